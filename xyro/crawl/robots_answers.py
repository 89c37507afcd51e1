"""What the dispatcher does with a robots.txt fetch (DESIGN.md §7; RFC 9309 §2.3.1).

The answer is stored in the robots cache (a 2xx is read, a 4xx allows all, a 5xx or no
answer disallows for a while), a 2xx's Sitemap lines are offered as publication sources, and
the host's politeness slot is released, backed off on a failure. When the host cannot be
reached at all (or its answer cannot be read), its queued URLs wait while robots.txt is
retried, and are recorded as errors only after repeated failures over hours
(:class:`~xyro.crawl.retry_policy.PrerequisiteRetries`, as Heritrix retries a failed
prerequisite before failing the URIs that wait on it). Any other end — a redirect that
loops, runs past five hops, leads into a denied domain or to a URL that cannot be fetched,
a target the skip list refuses — reached the host but left no robots.txt to read: it is
unavailable, allow all (RFC 9309 §2.3.1.2), and the robots.txt URL gets an errors row
saying why (``xyro status``, ``v_recent_errors``), so the crawl is never silently held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from metadata import FetchRecord, PageType
from xyro.crawl.activity import HostWarnings
from xyro.crawl.frontier import Frontier
from xyro.crawl.frontier_queues import FrontierItem
from xyro.crawl.publishing import PublicationChannel
from xyro.crawl.retry_policy import PrerequisiteRetries
from xyro.crawl.stats import CrawlStats
from xyro.net.urls import canonicalize, robots_origin, robots_url
from xyro.records import ErrorKind, FetchResult

#: robots.txt fetch failures that mean the host cannot be reached at all, or that its answer
#: cannot be read (a body its Content-Encoding does not decode is no robots.txt either).
UNREACHABLE = frozenset({ErrorKind.TIMEOUT, ErrorKind.CONNECT, ErrorKind.TRUNCATED,
                         ErrorKind.DNS, ErrorKind.ADDRESS, ErrorKind.ENCODING})

#: The detail of the records of URLs drained, unfetched, with an origin whose robots.txt could
#: not be fetched (no OPIC visit: ``xyro.crawl.opic_replay`` tells them apart by it).
ORIGIN_UNREACHABLE = "robots.txt of {} could not be fetched"

#: URLs of an origin given up on, or refused by its robots.txt, recorded per dispatcher round:
#: a stop is seen between two batches, and the other hosts' results are not held up for long.
DRAIN_BATCH = 1000

#: robots.txt outcomes whose status is the server's answer (a 2xx to read, a 4xx or 5xx).
#: Every outcome in neither this set nor :data:`UNREACHABLE` is "unavailable" (RFC 9309
#: §2.3.1.2), with an errors row of :data:`ROBOTS_UNAVAILABLE`: a 3xx left when the
#: redirects ran out, looped or were refused, a URL the fetcher cannot request...
ROBOTS_ANSWERS = frozenset({None, ErrorKind.HTTP_STATUS})

#: The detail of the errors row of a robots.txt found unavailable by a failure:
#: (origin, the fetch's error detail).
ROBOTS_UNAVAILABLE = ("robots.txt of {} is unavailable ({}); its URLs are crawled as if it "
                      "allowed all (RFC 9309 §2.3.1.2) until it is read again")


#: Records a queued URL that ends without a fetch: (item, error kind, detail).
Unfetched = Callable[[FrontierItem, ErrorKind, str], None]


class RobotsAnswers:
    """robots.txt outcomes, and the origins given up on (dispatcher thread only).
    ``unfetched`` records a URL of such an origin; ``wake`` wakes the dispatcher's loop."""

    def __init__(self, frontier: Frontier, publication: PublicationChannel, stats: CrawlStats,
                 host_warnings: HostWarnings | None, failures: PrerequisiteRetries,
                 unfetched: Unfetched, wake: threading.Event) -> None:
        self.frontier = frontier
        self._publication = publication
        self._stats = stats
        self._host_warnings = host_warnings
        self._failures = failures
        self._unfetched = unfetched
        self._wake = wake

    def done(self, item: FrontierItem, result: FetchResult, now: float,
             cut: bool = False) -> None:
        """The fetch of ``item`` (an origin's robots.txt) ended with ``result``; ``cut``:
        by a stop, with no answer."""
        ask_again_at = self.frontier.robots_hops.settle(item.url, now)
        if cut:
            # No answer, so the origin's URLs stay queued (draining them as unreachable
            # would record them as errors and drop them from the frontier).
            self.frontier.done(item, now=now, started_at=result.started_at)
            return
        if ask_again_at is not None:   # its redirect found the other host busy
            if not self._answered_from_cache(item, result, now):
                self.frontier.robots.defer(item.origin, ask_again_at)
            self.frontier.done(item, now=now, started_at=result.started_at)
            return
        if result.error_kind not in ROBOTS_ANSWERS and result.error_kind not in UNREACHABLE:
            self._unavailable(item, result, now)
            return
        status = result.status if result.error_kind in ROBOTS_ANSWERS else None
        self.frontier.robots.store(item.origin, status, result.body, now)
        if status is not None and status < 300:
            self._publication.offer_robots(self.frontier, item.origin)
        # A robots.txt 404 is an answer (allow all), not a failure to back off from.
        failed = status is None or status >= 500 or status == 429
        self.frontier.done(item, result.retry_after_s, error=failed, now=now,
                           started_at=result.started_at)
        self._stats.robots_fetch()
        if result.error_kind in UNREACHABLE:
            self._unreachable(item, result, now)
        else:  # an answer, even a 5xx: the host is there
            self._failures.answered(item.origin)

    def _unavailable(self, item: FrontierItem, result: FetchResult, now: float) -> None:
        """The fetch of ``item`` (an origin's robots.txt) ended with nothing to read, though
        not for want of reaching the host (see :data:`ROBOTS_ANSWERS`): allow all until
        robots.txt is read again, no back-off, and an errors row on the robots.txt URL
        saying why."""
        assert result.error_kind is not None
        self.frontier.robots.unavailable(item.origin, now)
        self.frontier.done(item, result.retry_after_s, now=now, started_at=result.started_at)
        self._stats.robots_fetch()
        self._failures.answered(item.origin)
        # requested=False: a robots.txt request is no page access (none is counted in urls
        # or hosts, nor visited by OPIC); the record is this outcome alone.
        self.frontier.complete(item, FetchRecord(
            url=item.url, fetched_at=now, page_type=PageType.ERROR, http_status=result.status,
            error_kind=result.error_kind.value, requested=False,
            error_detail=ROBOTS_UNAVAILABLE.format(item.origin, result.error_detail)))

    def _answered_from_cache(self, item: FrontierItem, result: FetchResult,
                             now: float) -> bool:
        """The busy host's own robots.txt, read for its own pages and still fresh, answers
        for ``item``'s origin: a bare host whose robots.txt redirects to its ``www.`` name
        while that host is being crawled (busy at nearly every try) is not asked again and
        again. The hop's target is read as the frontier spells URLs (canonical)."""
        target = (canonicalize(result.redirects[-1]) if result.redirects else None) or ""
        try:
            source = robots_origin(target)
        except ValueError:
            return False
        return (target == robots_url(source)
                and self.frontier.robots.adopt(item.origin, source, now) is not None)

    def _unreachable(self, item: FrontierItem, result: FetchResult, now: float) -> None:
        """robots.txt of ``item.origin`` could not be fetched: its URLs stay queued (the
        host is disallowed for a while and backed off, robots.txt asked for again after),
        until repeated failures over hours give up on them."""
        assert result.error_kind is not None
        retry_s = self.frontier.robots.unreachable_retry_s
        reason = ORIGIN_UNREACHABLE.format(item.origin) + f" ({result.error_detail})"
        failures = self._failures
        if failures.failed(item.origin, item.host, result.error_kind, reason, now, retry_s):
            self._wake.set()  # its URLs are recorded from the next round on (drain_given_up)
        elif self._host_warnings is not None:
            self._host_warnings.error(item.url, result.error_kind.value, (
                f"{reason}, attempt {failures.attempts(item.origin)}; its queued URLs wait "
                f"and it is tried again in {retry_s:g} s or more"))

    def drain_given_up(self, stop: threading.Event) -> None:
        """Record a batch of the queued URLs of the origins given up on as ERROR pages;
        none once ``stop`` is set (they stay queued, in memory and in the store)."""
        budget, draining = DRAIN_BATCH, self._failures.draining
        if not draining:  # every dispatcher round: nothing to allocate in the common case
            return
        for origin, (host, kind, detail) in list(draining.items()):
            if stop.is_set() or budget <= 0:
                return
            batch = self.frontier.drain_origin(origin, host, budget)
            for queued in batch:
                self._unfetched(queued, kind, detail)
            budget -= len(batch)
            if budget > 0:  # fewer than asked for: nothing of that origin is left
                del draining[origin]
        if draining:
            self._wake.set()  # more to record: the run loop must not sleep on it
