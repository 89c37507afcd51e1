"""The loader as a stage of the crawl engine (DESIGN.md §2).

Worker side (fetch threads, the CPU): :meth:`LoaderStage.load` parses a fetched XML body,
stores a new version in the warehouse when its canonical signature changed, and turns the
:class:`LoadResult` into the page outcome the engine records; a document whose DTDs or
entities are missing comes back pending with its needs.

Dispatcher side (one thread): :meth:`hold` keeps a pending document (bounded memory),
:meth:`arrived` feeds a fetched need into the cache and returns the documents that can be
loaded again or must fail, :meth:`expire` fails documents waiting longer than
``loader.dtd_timeout_s`` of clock time. Needs are pushed by the engine at priority 0
(LOADER), bypassing the seen-set; a need answered by a redirect waits for its target.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from metadata import PageType, XmlVersion
from metadata.versions import LatestVersion
from xyro.content.page import Child, PageOutcome
from xyro.content.signature import md5_signature
from xyro.loader.cache import EntityCache
from xyro.loader.catalogs import Catalogs
from xyro.loader.document import LoadError, LoadResult, LoadStatus, load_document
from xyro.loader.pending import Held, PendingDocuments
from xyro.loader.settings import LoaderSettings
from xyro.loader.warehouse import Warehouse, WarehouseError
from xyro.records import FetchResult

#: A URL's newest stored version, or None.
LatestOf = Callable[[str], "LatestVersion | None"]
#: Versions this stage made lately, remembered by URL: the writer commits in batches, so
#: for a moment the store does not show them yet (a document fetched twice in that time,
#: as a page and as an entity, would be stored twice).
RECENT_VERSIONS = 4096

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class Loaded:
    """What the worker hands back: a final outcome (+ version), or the needs to wait for."""

    outcome: PageOutcome | None
    needs: tuple[str, ...] = ()
    version: XmlVersion | None = None


@dataclass(frozen=True, slots=True)
class Arrival:
    """The effect of one fetched need: documents to load again, documents that fail."""

    ready: tuple[Held, ...] = ()
    failed: tuple[tuple[Held, str], ...] = ()
    follow: str | None = None  # a redirect target to fetch in place of the need


class LoaderStage:
    """Cache + pending documents + warehouse, for the crawl engine."""

    def __init__(self, settings: LoaderSettings, warehouse: Warehouse,
                 latest_version: LatestOf, cache: EntityCache | None = None,
                 catalogs: Catalogs | None = None,
                 now: Callable[[], float] | None = None) -> None:
        self.settings = settings
        self.warehouse = warehouse
        self.cache = cache or EntityCache(settings.max_entity_bytes, settings.max_cache_entries,
                                          fallback=self._stored_entity,
                                          failure_ttl_s=settings.failed_need_retry_s, now=now,
                                          max_age_s=settings.entity_max_age_s,
                                          max_bytes=settings.max_cache_bytes)
        self.catalogs = catalogs
        # Where the DTDs and entities of loaded documents came from (xyro status).
        self._sources = {"catalog": 0, "cache": 0, "web": 0}
        self.pending = PendingDocuments(settings.max_pending_bytes)
        self._stored_latest = latest_version
        self._recent: OrderedDict[str, LatestVersion] = OrderedDict()   # RECENT_VERSIONS
        self._aliases: dict[str, set[str]] = {}  # redirect target → needs it stands for
        self._wanted: set[str] = set()
        self._lock = threading.Lock()

    # -- worker side ---------------------------------------------------------------------

    def wanted(self, url: str) -> bool:
        """True when ``url`` is fetched for the loader (fetch it unconditionally)."""
        with self._lock:
            return url in self._wanted

    def load(self, url: str, result: FetchResult) -> Loaded:
        """Load the XML body of ``result`` (fetched for ``url``), in the charset of its
        Content-Type when it names one (RFC 7303 §3.2)."""
        body = result.body
        res = load_document(body, result.final_url or url, self.cache, self.settings,
                            catalogs=self.catalogs, charset=result.charset)
        if res.from_catalog or res.from_cache:
            with self._lock:
                self._sources["catalog"] += res.from_catalog
                self._sources["cache"] += res.from_cache
        if res.status is LoadStatus.PENDING:
            return Loaded(None, res.needs)
        md5 = md5_signature(body)
        if res.status is LoadStatus.ERROR:
            return Loaded(PageOutcome(PageType.ERROR, signature=md5, error_kind=res.error_kind,
                                      error_detail=res.error_detail))
        outcome = PageOutcome(PageType.XML, tuple(Child(l.url, l.likely_xml) for l in res.links),
                              res.signature)
        return Loaded(outcome, version=self._version(url, result, res, md5))

    def _version(self, url: str, result: FetchResult, res: LoadResult,
                 md5: bytes) -> XmlVersion | None:
        """A new warehouse version, unless the newest one has the same canonical form, the
        same DTD and the same validity (the DOCTYPE is outside the canonical form)."""
        latest = self._latest(url)
        if latest is not None and (latest.c14n_signature, latest.dtd_url, latest.valid) \
                == (res.signature, res.dtd_url, res.valid):
            return None
        key = self.warehouse.put(result.body)
        return self._made(XmlVersion(
            url=url, md5=md5, c14n_signature=res.signature, fetched_at=result.started_at,
            size=len(result.body), storage_key=key, valid=res.valid,
            validation_error=res.validation_error, dtd_url=res.dtd_url,
            schema_url=res.schema_url))

    def _latest(self, url: str) -> LatestVersion | None:
        with self._lock:
            recent = self._recent.get(url)
        return recent if recent is not None else self._stored_latest(url)

    def _made(self, version: XmlVersion) -> XmlVersion:
        """Remember ``version`` as ``url``'s newest until the store shows it."""
        latest = LatestVersion(version.c14n_signature, version.md5, version.storage_key,
                               version.fetched_at, version.dtd_url, version.valid)
        with self._lock:
            self._recent[version.url] = latest
            self._recent.move_to_end(version.url)
            if len(self._recent) > RECENT_VERSIONS:
                self._recent.popitem(last=False)
        return version

    def store_entity(self, url: str, result: FetchResult) -> XmlVersion | None:
        """Keep a fetched DTD/entity in the warehouse (a version row without c14n), so the
        cache of a later run can be filled without fetching it again."""
        body = result.body
        if not body or len(body) > self.settings.max_entity_bytes:
            return None
        md5 = md5_signature(body)
        latest = self._latest(url)
        if latest is not None and latest.md5 == md5:
            return None
        return self._made(XmlVersion(url=url, md5=md5, c14n_signature=None,
                                     fetched_at=result.started_at, size=len(body),
                                     storage_key=self.warehouse.put(body), valid=None))

    def _stored_entity(self, url: str) -> tuple[bytes, float] | None:
        """The copy of a DTD/entity an earlier run stored, and when it was last fetched."""
        latest = self._latest(url)
        if latest is None or latest.c14n_signature is not None:  # none, or an XML document
            return None
        try:
            return self.warehouse.get(latest.storage_key), latest.last_access or 0.0
        except WarehouseError:
            return None

    def dtd_sources(self) -> dict[str, int]:
        """DTD and entity loads answered by an XML catalog's local file, by the cache (fetched
        earlier, or stored by an earlier run), and fetches made from the web for them."""
        with self._lock:
            return dict(self._sources)

    # -- dispatcher side -----------------------------------------------------------------

    def hold(self, item: object, result: FetchResult, needs: tuple[str, ...], now: float,
             previous: Held | None = None) -> Held | None:
        """Keep a pending document; None when holding it would pass max_pending_bytes."""
        held = previous or Held(item, result, now)
        held.rounds += 1
        if not self.pending.fits(held):
            return None
        self.pending.wait(held, needs)
        with self._lock:
            self._wanted.update(needs)
        return held

    def arrived(self, url: str, result: FetchResult, ok: bool, detail: str | None) -> Arrival:
        """A wanted URL was fetched: cache its body or record its failure."""
        if result.status in _REDIRECTS and result.redirects and not ok:
            return Arrival(follow=result.redirects[-1])  # the engine calls alias() next
        needs = self._resolve_aliases(url)
        if not ok or not result.body:
            reason = detail or f"HTTP {result.status} with an empty body"
            failed: list[tuple[Held, str]] = []
            for need in needs:
                self.cache.fail(need, reason)
                failed += [(h, f"needed {need}: {reason}") for h in self.pending.failed(need)]
            self._unwant(needs)
            return Arrival(failed=tuple(failed))
        with self._lock:
            self._sources["web"] += 1
        ready: list[Held] = []
        failed = []
        for need in needs:
            refused = self.cache.put(need, result.body)
            if refused is not None:
                failed += [(h, refused) for h in self.pending.failed(need)]
            else:
                ready += self.pending.satisfied(need)
        self._unwant(needs)
        return Arrival(tuple(ready), tuple(failed))

    def alias(self, target: str, need: str) -> None:
        """``need`` redirected to ``target``: the target's body will serve for the need."""
        with self._lock:
            self._aliases.setdefault(target, set()).update(self._aliases.pop(need, {need}))
            self._wanted.add(target)

    def expire(self, now: float) -> list[tuple[Held, str]]:
        timeout = self.settings.dtd_timeout_s
        out = []
        for held in self.pending.expired(now - timeout):
            missing = ", ".join(sorted(held.needs)) or "nothing"
            out.append((held, f"its DTD/entities ({missing}) did not arrive within "
                              f"{timeout:g} s (loader.dtd_timeout_s)"))
        return out

    def _resolve_aliases(self, url: str) -> set[str]:
        with self._lock:
            return self._aliases.pop(url, set()) | {url}

    def _unwant(self, needs: set[str]) -> None:
        with self._lock:
            for need in needs:
                if not self.pending.wanted(need) and need not in self._aliases:
                    self._wanted.discard(need)


def error_outcome(result: FetchResult, kind: LoadError, detail: str) -> PageOutcome:
    """The ERROR outcome of a document the loader gave up on (raw MD5 kept)."""
    return PageOutcome(PageType.ERROR, signature=md5_signature(result.body) if result.body else None,
                       error_kind=kind.value, error_detail=detail)
