"""What sitemaps and feeds said of each URL's last change, and whether to believe it.

Paper 003 §3 calls sitemaps and feeds the push channel: a site tells when its pages last
changed. DESIGN.md §6 uses change dates to estimate change rates (λ = C / Σ l_i), but only
dates that are reliable. This component keeps, per URL, the date its latest listing gave
(``<lastmod>``, ``<updated>``, ``pubDate``) and when that listing was read; when the URL is
fetched again, the fetch interval is judged against that date (:func:`xyro.publication.trust.judge`)
in the trust record of the listing (:class:`~xyro.publication.trust.PublishedDateTrusts`),
and the date becomes the observation's change date only while that source is trusted and the
server sent no Last-Modified of its own (:func:`xyro.publication.trust.change_date`).

A listing speaks for the pages of its own origin (``scheme://host[:port]``): a feed on
another site (a planet, an aggregator) may list a page, but its date is when it aggregated
the page, not when the page changed. Callers pass only the dates a source may give
(:meth:`xyro.crawl.publishing.PublicationChannel.read`: its own origin's, and a sitemap's
cross submits); here a listing from another origin never replaces one from the page's own,
so an aggregator cannot wipe a site's honest sitemap dates by listing its pages.

A fetch judged against a listing read before it cannot tell a date that never moves from a
change after the read (:func:`xyro.publication.trust.judge` calls it undecidable); such an
interval is kept and judged again when a source next lists the URL, read after the fetch.
Without that second look a feed that dates every entry alike is trusted on its unchanged
pages alone.

Memory is bounded: at most ``max_urls`` listed URLs and as many undecided intervals are
remembered, the oldest dropped first. Thread-safe (listings arrive from the crawl's
dispatcher, judgements too).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from xyro.net.urls import robots_origin
from xyro.publication.trust import (Outcome, PublishedDateTrust, PublishedDateTrusts,
                                    TrustVerdict, change_date)


@dataclass(frozen=True, slots=True)
class Listing:
    """One URL's date in the latest sitemap or feed that listed it."""

    published: float   # POSIX seconds: the date the source gave
    read_at: float     # when the source was read (clock time)
    source: str        # the trust key: the sitemap's or feed's URL
    own: bool = False  # the source is on the page's own origin (module docstring)


class PublishedDates:
    """Listed dates per URL and a trust record per source (module docstring)."""

    def __init__(self, trusts: PublishedDateTrusts | None = None,
                 max_urls: int = 1_000_000) -> None:
        if max_urls < 1:
            raise ValueError(f"max_urls must be >= 1, got {max_urls!r}")
        self._trusts = trusts or PublishedDateTrusts()
        self._max_urls = max_urls
        self._listed: OrderedDict[str, Listing] = OrderedDict()
        # URL -> (previous fetch, fetch, changed): its last interval, undecidable when fetched.
        self._undecided: OrderedDict[str, tuple[float, float, bool]] = OrderedDict()
        self._outcomes: Counter[str] = Counter()
        # Sources trusted after their latest judgement: kept as judgements arrive, so the
        # status snapshot does not recompute every source's verdict.
        self._trusted: set[str] = set()
        self._lock = threading.Lock()

    def listed(self, source: str, entries: Iterable[tuple[str, float | None]],
               read_at: float) -> int:
        """Remember the dates a source (a sitemap's or feed's URL) gave its URLs; returns
        how many were dated.

        A date in the future is held against the source at once (FUTURE), and not kept. A
        source on another origin than a URL's does not replace the listing of a source on
        the URL's own origin (module docstring).
        """
        dated = 0
        prefix = origin_prefix(source)
        with self._lock:
            trust = self._trusts.source(source)
            for url, published in entries:
                if published is None:
                    continue
                own = prefix is not None and url.startswith(prefix)
                before = self._listed.get(url)
                if before is not None and before.own and not own:
                    continue
                if trust.observe_listing(published, read_at) is Outcome.FUTURE:
                    self._outcomes[Outcome.FUTURE.value] += 1
                    continue
                self._judge_undecided(trust, url, published, read_at)
                self._listed[url] = Listing(published, read_at, source, own)
                self._listed.move_to_end(url)
                dated += 1
            while len(self._listed) > self._max_urls:
                self._listed.popitem(last=False)
            while len(self._undecided) > self._max_urls:
                self._undecided.popitem(last=False)
            self._note_trust(source, trust.trusted)
        return dated

    def change_date(self, url: str, previous_fetch: float | None, fetch: float,
                    changed: bool | None, http_last_modified: float | None) -> float | None:
        """The change date to record with this fetch's observation (DESIGN.md §6).

        Judges the interval (``previous_fetch``, ``fetch``] (content ``changed`` or not)
        against the URL's listed date when there is one, then answers the server's own
        Last-Modified if any, else the listed date while its source is trusted, else None.
        """
        with self._lock:
            listing = self._listed.get(url)
            if listing is None:
                return http_last_modified
            trust = self._trusts.source(listing.source)
            if previous_fetch is not None and changed is not None and fetch > previous_fetch:
                outcome = trust.observe(previous_fetch=previous_fetch, fetch=fetch,
                                        changed=changed, published=listing.published,
                                        read_at=listing.read_at)
                self._outcomes[outcome.value] += 1
                self._undecided.pop(url, None)
                if outcome is Outcome.UNDECIDABLE and listing.read_at < fetch:
                    self._undecided[url] = (previous_fetch, fetch, changed)
            trusted = trust.trusted
            self._note_trust(listing.source, trusted)
            return change_date(http_last_modified, listing.published, trusted)

    def _judge_undecided(self, trust: PublishedDateTrust, url: str, published: float,
                         read_at: float) -> None:
        """Judge ``url``'s undecided interval against the date a source read after it gives;
        caller holds the lock."""
        interval = self._undecided.get(url)
        if interval is None or read_at < interval[1]:
            return
        previous_fetch, fetch, changed = interval
        outcome = trust.observe(previous_fetch=previous_fetch, fetch=fetch, changed=changed,
                                published=published, read_at=read_at)
        if outcome is not Outcome.UNDECIDABLE:
            del self._undecided[url]
            self._outcomes[outcome.value] += 1

    def _note_trust(self, source: str, trusted: bool) -> None:
        if trusted:
            self._trusted.add(source)
        else:
            self._trusted.discard(source)

    def listing(self, url: str) -> Listing | None:
        """The latest listing of ``url``, or None."""
        with self._lock:
            return self._listed.get(url)

    def verdict(self, source: str) -> TrustVerdict:
        """The current trust verdict of one source (for status and tests)."""
        with self._lock:
            return self._trusts.source(source).verdict()

    def counts(self) -> dict[str, int]:
        """Listed URLs and judged outcomes so far, for ``xyro status`` and metrics."""
        with self._lock:
            return {"listed_urls": len(self._listed), **dict(self._outcomes)}

    def trusted_sources(self) -> int:
        """Sources (hosts) whose dates are currently believed."""
        with self._lock:
            return len(self._trusted)


@lru_cache(maxsize=4096)
def origin_prefix(url: str) -> str | None:
    """``scheme://host[:port]/`` of ``url`` (the prefix of every URL of its origin), or None
    when ``url`` is no http(s) URL with a host (a trust key given by hand)."""
    try:
        return robots_origin(url) + "/"
    except ValueError:
        return None
