"""The composition root: every component is built here, from one immutable config.

Commands ask the :class:`App` for what they need; no component reaches for configuration,
the clock or the store by itself.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metadata import MetadataStore, SetState, crawl_queries, versions
from metadata.connection import search_problem, write_problem
from metadata.errors import StoreAccessError, access_message
from metadata.writer import Writer
from xyro.affinity import pin_process
from xyro.clock import Clock, WallClock, unit_index
from xyro.config import XyroConfig
from xyro.crawl.activity import HostWarnings
from xyro.crawl.admission import Admission
from xyro.crawl.crawler import Crawler, CrawlSettings, Validators
from xyro.crawl.frontier import REFRESH, Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.publishing import PublicationChannel
from xyro.crawl.seenset import SeenSet
from xyro.crawl.unit_budget import UnitBudget
from xyro.errors import AccessError, UsageError, XyroError
from xyro.loader import LoaderSettings, Warehouse
from xyro.loader.catalogs import SYSTEM_CATALOG, Catalogs
from xyro.loader.stage import LoaderStage
from xyro.net.dns import Resolver
from xyro.net.fetcher import Fetcher, FetchLimits, user_agent
from xyro.net.robots import RobotsCache
from xyro.net.urls import Scope, ScopeSeeds, TrapGuard
from xyro.publication.published import PublishedDates
from xyro.publication.sitemaps import MAX_SITEMAP_BYTES
from xyro.publication.trust import PublishedDateTrusts

log = logging.getLogger("xyro.app")

if TYPE_CHECKING:
    from xyro.crawl.opic_online import OpicCheckpoints


@dataclass
class App:
    """What a command works with: the config, the clock, and the store it opens on demand."""

    config: XyroConfig
    clock: Clock = field(default_factory=WallClock)
    #: What to do when the database does not exist (``--demo``: run the demo first).
    missing_hint: str = ("run `xyro init` first (or point storage.database at an existing "
                         "one)")

    @property
    def database_path(self) -> Path:
        return Path(self.config.storage.database)

    @property
    def time_unit_s(self) -> float:
        return float(self.config.refresh.time_unit_s)

    def current_unit(self) -> int:
        """Index of the current refresh time unit (folder number, DESIGN.md §6)."""
        return unit_index(self.clock.now(), self.time_unit_s)

    def open_store(self, *, create: bool = False, read_only: bool = False) -> MetadataStore:
        """Open the metadata database.

        ``create`` also makes its folder and the warehouse folder and insists on writing
        (``init``, ``demo``, ``run``). ``read_only`` never writes, not even a migration
        (``documents``, ``export``, ``plan`` without ``--run``). Otherwise the store opens
        for writing when this user may write it, else read-only when its schema is current:
        reads work and the first write raises :class:`StoreAccessError` saying why (the
        README promises the database can be read by a user who cannot write it). Problems of
        permission are one line naming the path, its owner and mode, and the user (exit 2,
        DESIGN.md §7).
        """
        path = self.database_path
        if create:
            _make_folder(path.parent, "storage.database")
            _make_folder(Path(self.config.storage.warehouse_dir), "storage.warehouse_dir")
        elif not os.path.exists(path):
            problem = search_problem(path)
            if problem is not None:
                raise StoreAccessError(problem)
            raise UsageError(f"no database at {path}: {self.missing_hint}")
        if read_only:
            return MetadataStore.open(path, read_only=True)
        try:
            return MetadataStore.open(path)
        except StoreAccessError:
            if create or not os.path.exists(path) or write_problem(path) is None:
                raise
        return MetadataStore.open(path, read_only=True)


def _make_folder(folder: Path, key: str) -> None:
    """Create ``folder`` (and its parents) and check this user may write it; ``key`` is the
    config key that names it, offered as the way out."""
    elsewhere = f"point {key} elsewhere"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        existing = next((p for p in folder.parents if os.path.exists(p)), None)
        if isinstance(exc, PermissionError) and existing is not None:
            problem = (search_problem(folder, elsewhere)
                       or access_message(existing, "write", elsewhere))
            raise AccessError(f"cannot create folder {folder} ({key}): {problem}") from None
        raise AccessError(f"cannot create folder {folder} ({key}): {exc.strerror or exc}; "
                          f"fix the path or {elsewhere}") from None
    problem = search_problem(folder / "x", elsewhere)
    if problem is None and not os.access(folder, os.W_OK | os.X_OK):
        problem = access_message(folder, "write", elsewhere)
    if problem is not None:
        raise AccessError(problem)


@dataclass
class CrawlParts:
    """A crawler and what must be closed after it ran."""

    crawler: Crawler
    fetchers: tuple[Fetcher, ...]
    resolver: Resolver
    writer: Writer
    store: MetadataStore | None = None
    versions_per_url: int = 10

    def close(self) -> None:
        for fetcher in self.fetchers:
            fetcher.close()
        self.resolver.close()
        self.writer.close()
        loader = self.crawler.loader
        if self.store is not None and loader is not None:
            prune_warehouse(self.store, loader.warehouse, self.versions_per_url)
            self.store.set_state(WAREHOUSE_WRITING, 0)  # closed cleanly: no blob without its row


def prune_warehouse(store: MetadataStore, warehouse: Warehouse, keep: int,
                    grace_s: float | None = None) -> int:
    """Drop versions beyond ``keep`` per URL, then the blobs nothing references any more.

    Without ``grace_s`` it must run while nothing writes versions (after the crawl writer
    closed). With it (the running daemon), a blob written or touched in the last
    ``grace_s`` real seconds is kept: it may belong to a version whose row is not committed
    yet (the same bytes as a pruned one). Returns the number of blobs deleted.
    """
    # Durable before any blob goes: a power loss must not bring back a row without its blob.
    with store.atomic(durable=True) as conn:
        orphans = versions.prune_versions(conn, keep)
    before = None if grace_s is None else time.time() - grace_s   # file times: real time
    return warehouse.delete_unreferenced(orphans, set(), written_before=before)


#: State key: 1 while a crawl may write warehouse blobs, 0 once it closed cleanly. A 1 found
#: at a start means the last crawl died, maybe between a blob and its row's commit.
WAREHOUSE_WRITING = "warehouse.writing"


#: State key: the id of this database, written in the warehouse it owns (:data:`OWNER_FILE`).
WAREHOUSE_OWNER = "warehouse.owner"
#: The file naming, by that id, the database a warehouse belongs to.
OWNER_FILE = ".xyro-database"


def claim_warehouse(store: MetadataStore, warehouse: Warehouse) -> None:
    """One warehouse per database: the crash sweep and the prune delete the blobs their
    database does not reference, which would be another database's documents. A warehouse
    names its database in :data:`OWNER_FILE`; an unclaimed one (new, or older than the
    file) is claimed, one claimed by another database is refused (exit 2), and so is an
    unclaimed one where this database's documents should be (a warehouse on a mount that
    failed to mount, a moved folder): claiming it would split the archive in two."""
    mine = store.get_state(WAREHOUSE_OWNER)
    marker = warehouse.root / OWNER_FILE
    try:
        theirs: str | None = marker.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        theirs = None
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessError(f"cannot read {marker}: {exc}; it names the database this "
                          f"warehouse belongs to") from None
    if theirs is not None and theirs == mine:
        return
    if theirs is not None:
        raise UsageError(
            f"the warehouse {warehouse.root} (storage.warehouse_dir) holds the documents of "
            f"another database (id {theirs}, not {store.path}'s): two databases sharing one "
            f"warehouse would delete each other's documents; give this one its own "
            f"storage.warehouse_dir, or, if that database is gone for good, delete {marker}")
    if mine is not None and (versions := store.stored_versions()):
        raise UsageError(
            f"the warehouse {warehouse.root} (storage.warehouse_dir) does not hold this "
            f"database's documents ({versions:,} stored version(s), but no {marker}): is it "
            f"not mounted, or moved? Point storage.warehouse_dir at it; if those documents "
            f"are gone for good, write {mine} into {marker} to use this folder instead")
    if mine is None:
        mine = uuid.uuid4().hex
        store.set_state(WAREHOUSE_OWNER, mine)
    part = marker.with_name(OWNER_FILE + ".part")
    try:
        warehouse.root.mkdir(parents=True, exist_ok=True)
        part.write_text(f"{mine}\n", encoding="ascii")
        part.replace(marker)
    except OSError as exc:
        raise AccessError(f"cannot write {marker}: {exc.strerror or exc}; the crawler needs "
                          f"to write storage.warehouse_dir") from None


def sweep_after_crash(store: MetadataStore, warehouse: Warehouse) -> int:
    """Delete the blobs a killed crawl wrote without their rows (and temporary files), when
    the last crawl did not close cleanly; then mark this one as writing. Run before the
    writer starts. A full sweep reads every blob name, so a clean stop skips it. Returns the
    files removed."""
    crashed = store.get_state(WAREHOUSE_WRITING) == 1
    removed = 0
    if crashed:
        with store.atomic() as conn:
            referenced = versions.referenced_keys(conn)
        removed = warehouse.sweep(referenced)
        if removed:
            log.warning("the last crawl did not stop cleanly: %d warehouse file(s) it left "
                        "without a version row were removed from %s", removed, warehouse.root)
    store.set_state(WAREHOUSE_WRITING, 1)
    return removed


def _seen_set(configured: int, stored: int, false_positive_rate: float) -> SeenSet:
    """The crawl's seen-set, its size said when large and a clear error when it does not
    fit in memory. ``crawler.expected_urls`` sizes it, or twice the ``stored`` URLs when
    the store already holds more: past its size a Bloom filter takes more and more new URLs
    for seen (a quarter of them at three times its size), which nothing would show."""
    expected = max(configured, 2 * stored)
    if expected > configured:
        log.warning("the store holds %d URLs, more than crawler.expected_urls (%d): the "
                    "seen-set is sized for %d; raise crawler.expected_urls to what the crawl "
                    "will reach", stored, configured, expected)
    size = SeenSet.bits_for(expected, false_positive_rate) / 8
    advice = "lower crawler.expected_urls or raise crawler.seen_set_false_positive_rate"
    if size >= 2**28:
        log.info("the seen-set takes %.1f GiB of memory (crawler.expected_urls %d at a "
                 "false-positive rate of %g)", size / 2**30, expected, false_positive_rate)
    try:
        return SeenSet(expected, false_positive_rate)
    except MemoryError:
        raise XyroError(f"the seen-set for crawler.expected_urls {expected} needs "
                        f"{size / 2**30:.1f} GiB, more memory than this process can have; "
                        f"{advice}") from None


def build_crawler(app: App, store: MetadataStore, *, enforce_politeness: bool = True,
                  getaddrinfo: Callable[..., Any] | None = None,
                  budget: bool = False) -> CrawlParts:
    """Wire the crawl engine from the config: one writer, four fetchers (pages, robots.txt,
    the loader's DTDs and entities, known sitemaps and feeds), the polite frontier;
    with ``budget`` (the daemon), G page fetches per refresh time unit (``refresh``).

    Page redirects are followed through the frontier (each hop polite and re-checked), so the
    page fetcher follows none itself; robots.txt fetches follow up to the configured number
    of hops inline, to other hosts too when their politeness allows (``FetchLimits.for_robots``,
    :mod:`xyro.crawl.robots_hops`; RFC 9309 §2.3.1.2).
    """
    cfg, clock = app.config, app.clock
    crawl, limits, polite = cfg.crawler, cfg.crawler.limits, cfg.crawler.politeness
    if crawl.cpus is not None:
        pin_process(crawl.cpus)
    resolver = Resolver(clock, timeout_s=limits.dns_timeout_s, ttl_s=limits.dns_cache_ttl_s,
                        **({"getaddrinfo": getaddrinfo} if getaddrinfo else {}))
    agent = user_agent(crawl.user_agent, crawl.contact_url)
    fetch_limits = FetchLimits(
        connect_timeout_s=limits.connect_timeout_s, read_timeout_s=limits.read_timeout_s,
        deadline_s=limits.deadline_s, max_body_bytes=limits.max_body_bytes,
        max_decoded_bytes=limits.max_decoded_bytes, max_redirects=0,
        allow_private_addresses=cfg.scope.allow_private_addresses,
        skip_suffixes=frozenset(crawl.skip_suffixes),
        accept_content_types=tuple(crawl.accept_content_types))
    pool = max(crawl.workers, 16)
    page_fetcher = Fetcher(fetch_limits, agent, resolver, clock, max_host_pools=pool)
    # DTDs and entities come with any Content-Type (.mod, .ent); they are size-capped.
    loader_cfg = cfg.loader
    loader_fetcher = Fetcher(replace(fetch_limits, accept_content_types=("*/*",),
                                     max_decoded_bytes=max(loader_cfg.max_entity_bytes, 1),
                                     max_body_bytes=min(limits.max_body_bytes,
                                                        loader_cfg.max_entity_bytes)),
                             agent, resolver, clock, max_host_pools=pool)
    # Known sitemaps and feeds: as large on the wire as decoded, up to the protocol's 50 MB
    # (servers often send a big sitemap.xml uncompressed); their parse is streamed.
    publication_fetcher = Fetcher(
        replace(fetch_limits, max_body_bytes=max(
            limits.max_body_bytes, min(limits.max_decoded_bytes, MAX_SITEMAP_BYTES))),
        agent, resolver, clock, max_host_pools=pool)
    robots = RobotsCache(robots_token(crawl.user_agent), clock, ttl_s=polite.robots_ttl_s,
                         unreachable_retry_s=polite.robots_unreachable_retry_s,
                         max_crawl_delay_s=polite.max_crawl_delay_s)
    hosts = HostScheduler(polite.delay_s, clock, enforce=enforce_politeness,
                          max_retry_after_s=polite.max_retry_after_s)
    warehouse = Warehouse(cfg.storage.warehouse_dir, durable=cfg.storage.fsync)
    claim_warehouse(store, warehouse)
    sweep_after_crash(store, warehouse)
    with store.atomic() as conn:
        versions.forget_pending(conn)
    writer = store.writer(dead_after=crawl.dead_after_404s, now=clock.now)
    readers = _ThreadReaders(store)
    loader = LoaderStage(
        LoaderSettings(max_document_bytes=loader_cfg.max_document_bytes,
                       validate=loader_cfg.dtd_validation, dtd_timeout_s=loader_cfg.dtd_timeout_s,
                       versions_per_url=loader_cfg.versions_per_url,
                       max_expansion_factor=loader_cfg.max_expansion_factor,
                       max_entity_bytes=loader_cfg.max_entity_bytes,
                       max_cache_entries=loader_cfg.max_cached_entities,
                       max_cache_bytes=loader_cfg.max_cache_bytes,
                       max_entity_urls=loader_cfg.max_entity_urls,
                       max_pending_bytes=loader_cfg.max_pending_bytes,
                       max_url_length=limits.max_url_length,
                       max_attributes_per_element=loader_cfg.max_attributes_per_element,
                       max_namespaces_in_scope=loader_cfg.max_namespaces_in_scope),
        warehouse, readers.latest_version,
        catalogs=xml_catalogs(loader_cfg.catalogs, loader_cfg.max_entity_bytes),
        now=clock.now)
    # The frontier owns queued work: one admission, and the writer's submit to record every
    # enqueue and dequeue itself (DESIGN.md §2).
    opic = build_opic(app, store, writer.submit)
    admission = build_admission(app, scope_seeds(app, store))
    frontier = Frontier(hosts, robots, clock, admission=admission, record=writer.submit,
                        seen=_seen_set(crawl.expected_urls, store.graph_counts()[0],
                                       crawl.seen_set_false_positive_rate),
                        cash=None if opic is None else opic.opic.cash)
    # Up to five hops, to other hosts too when they are free (RFC 9309; robots_hops.py),
    # the first 500 KiB of any length.
    robots_fetcher = Fetcher(fetch_limits.for_robots(limits.max_redirects), agent, resolver,
                             clock, hop_gate=frontier.robots_hops.gate, max_host_pools=pool)
    crawler = Crawler(
        frontier=frontier, fetch=page_fetcher.fetch,
        fetch_robots=robots_fetcher.fetch, validators=readers.validators, submit=writer.submit,
        clock=clock,
        settings=CrawlSettings(workers=crawl.workers, follow_nofollow=crawl.follow_nofollow,
                               max_url_length=limits.max_url_length,
                               max_redirects=limits.max_redirects,
                               max_retry_after_s=polite.max_retry_after_s),
        loader=loader, fetch_for_loader=loader_fetcher.fetch,
        fetch_for_publication=publication_fetcher.fetch,
        host_warnings=HostWarnings(clock, cfg.log.host_warning_interval_s),
        publication=build_publication(app), opic=opic,
        budget=build_budget(app, store, frontier, writer) if budget else None)
    return CrawlParts(crawler, (page_fetcher, robots_fetcher, loader_fetcher,
                                publication_fetcher), resolver, writer,
                      store, loader_cfg.versions_per_url)


def build_opic(app: App, store: MetadataStore,
               submit: Callable[[Any], object]) -> OpicCheckpoints | None:
    """OPIC in the crawl (``ranking.opic``), continued from the stored checkpoint if any and
    brought up to the store: the visits of pages fetched after it (all fetched pages without
    one) are replayed (:mod:`xyro.crawl.opic_replay`). A checkpoint that does not decode is
    an :class:`~xyro.crawl.opic_online.OpicCheckpointError` (exit 2); one written under
    another estimate or damping is continued, with a warning (``OnlineOpic.continue_under``)."""
    # Imported here: ranking compiles with numba, whose cache folder the entry point sets
    # first (xyro/service/numba_cache.py).
    from contextlib import closing

    from ranking.opic import OpicParams
    from ranking.opic_adaptive import WINDOW_ESTIMATES, AdaptiveParams
    from xyro.crawl.opic_online import Focus, OnlineOpic, OpicCheckpointError, OpicCheckpoints
    from xyro.crawl.opic_replay import replay_fetches

    cfg = app.config.ranking
    opic_cfg = cfg.opic
    if not opic_cfg.enabled:
        return None
    focus = Focus(xml=opic_cfg.focus.xml, patterns=tuple(opic_cfg.focus.patterns),
                  boost=opic_cfg.focus.boost)
    stored = store.opic_checkpoint()
    if stored is not None:
        try:
            opic = OnlineOpic.from_checkpoint(stored[3], focus, opic_cfg.estimate)
        except OpicCheckpointError as exc:
            raise OpicCheckpointError(f"cannot continue OPIC from the checkpoint in "
                                      f"{store.path}: {exc}") from exc
        for note in opic.continue_under(cfg.damping, opic_cfg.estimate):
            log.warning("OPIC checkpoint in %s: %s", store.path, note)
    else:
        adaptive = AdaptiveParams() if opic_cfg.estimate in WINDOW_ESTIMATES else None
        opic = OnlineOpic(OpicParams(damping=cfg.damping, adaptive=adaptive), focus,
                          opic_cfg.estimate)
    opic.load_kernels()  # at start, not at the first fetched page (OnlineOpic.load_kernels)
    with closing(store.read_connection()) as conn:
        replay_fetches(opic, conn, None if stored is None else stored[0])
    return OpicCheckpoints(opic, submit, app.clock, opic_cfg.checkpoint_interval_s,
                           importance=cfg.importance == "opic")


#: State key: the last reservation of page fetches, [unit, unit length (s), count]
#: (xyro.crawl.unit_budget: a restart in that unit counts at least that many as spent).
UNIT_RESERVED = "fetch_units.reserved"


def build_budget(app: App, store: MetadataStore, frontier: Frontier,
                 writer: Writer) -> UnitBudget:
    """The daemon's G fetches per unit, continuing the unit a previous run stopped in."""
    cfg = app.config.refresh

    def reserve(unit: int, unit_s: float, count: int) -> None:
        writer.submit(SetState(UNIT_RESERVED, json.dumps([unit, unit_s, count])))
        writer.flush()   # committed before the request it covers is sent

    budget = UnitBudget(cfg.bandwidth_pages_per_unit, cfg.time_unit_s, cfg.discovery_share,
                        lambda: frontier.queued(REFRESH), writer.submit, planner=True,
                        servable=lambda until, cap: frontier.servable(REFRESH, until, cap),
                        reserve=reserve)
    # The row of the unit running now, at the configured length: the newest row may be of
    # another length (refresh.time_unit_s changed), whose count is not this unit's.
    now = app.clock.now()
    reserved = store.get_state(UNIT_RESERVED)
    budget.resume(store.fetch_unit(unit_index(now, cfg.time_unit_s), cfg.time_unit_s), now,
                  None if not isinstance(reserved, str) else _reservation(reserved))
    return budget


def _reservation(value: str) -> tuple[int, float, int] | None:
    """The stored reservation, or None when it is not one (a row edited by hand)."""
    try:
        unit, unit_s, count = json.loads(value)
        return int(unit), float(unit_s), int(count)
    except (ValueError, TypeError, OverflowError):
        return None


def xml_catalogs(paths: tuple[str, ...] | None, max_entity_bytes: int) -> Catalogs | None:
    """The loader's XML catalogs: ``loader.catalogs``, or the system catalog when that key is
    null and the file exists. Catalogs that cannot be read are logged, not fatal."""
    if paths is None:
        paths = (SYSTEM_CATALOG,) if Path(SYSTEM_CATALOG).is_file() else ()
    if not paths:
        return None
    catalogs = Catalogs(tuple(paths), max_entity_bytes)
    catalogs.preload()   # a missing or broken catalog is warned about at start, once
    return catalogs


def scope_seeds(app: App, store: MetadataStore) -> ScopeSeeds:
    """The URLs whose hosts a scope derived from the seeds allows (empty
    ``scope.allowed_domains``, DESIGN.md §2): the configured seeds and sitemaps and the seeds
    added with ``xyro seed``, and those found where a seed redirected (:mod:`metadata.seeds`)."""
    cfg = app.config
    stored = store.seeds()
    return ScopeSeeds((*cfg.seeds, *cfg.sitemaps,
                       *(s.url for s in stored if s.redirected_from is None)),
                      tuple(s.url for s in stored if s.redirected_from is not None))


def build_admission(app: App, seeds: ScopeSeeds) -> Admission:
    """The one admission of every producer of the frontier, from the config and ``seeds``
    (:func:`scope_seeds`) (DESIGN.md §2); also used with no crawler running (``xyro seed``,
    ``xyro plan --run``)."""
    cfg = app.config
    scope, traps = cfg.scope, cfg.crawler.traps
    return Admission(
        Scope(seeds.urls, scope.allowed_domains, scope.denied_domains, scope.allow_patterns,
              scope.deny_patterns, scope.max_depth, seeds.found),
        TrapGuard(app.clock, max_url_length=cfg.crawler.limits.max_url_length,
                  max_repeated_segments=traps.max_repeated_segments,
                  max_query_params=traps.max_query_params,
                  max_pages_per_host_per_unit=traps.max_pages_per_host_per_unit,
                  unit_s=cfg.refresh.time_unit_s),
        frozenset(cfg.crawler.skip_suffixes))


def build_publication(app: App) -> PublicationChannel:
    """The crawl's sitemaps, feeds and published dates, with the configured trust rule
    (paper 003 §3, DESIGN.md §6); one per crawl, its trust learnt while it runs."""
    pub = app.config.publication
    return PublicationChannel(PublishedDates(PublishedDateTrusts(
        window=pub.trust_window, min_observations=pub.trust_min_observations,
        max_disagreement=pub.trust_max_disagreement, tolerance_s=pub.trust_tolerance_s)),
        dead_after=app.config.crawler.dead_after_404s)


def robots_token(user_agent_product: str) -> str:
    """The robots.txt product token: ``Xyro/0.1`` → ``Xyro`` (RFC 9309 §2.2.1)."""
    return user_agent_product.split("/", 1)[0].strip() or "Xyro"


class _ThreadReaders:
    """One read connection per fetch worker thread (SQLite connections are not shared)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._local = threading.local()

    def _conn(self):  # type: ignore[no-untyped-def]
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._store.read_connection()
        return conn

    def validators(self, url: str) -> Validators:
        return crawl_queries.prior_fetch(self._conn(), url)

    def latest_version(self, url: str) -> versions.LatestVersion | None:
        return versions.latest_version(self._conn(), url)
