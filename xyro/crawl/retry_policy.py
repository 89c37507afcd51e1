"""Retrying a URL the server asked us to come back for: 429 and 503 (DESIGN.md §7, §8);
and an origin whose robots.txt cannot be reached (:class:`PrerequisiteRetries`).

The server is slowed down by the host scheduler (Retry-After sets the host's next start);
this policy decides whether the URL itself goes back into the frontier, and from when: the
Retry-After pause (at most ``max_pause_s``), else 60 s doubled per try, at most
``max_retries`` times, then the answer
is recorded as the page's outcome. Retries belong here and in the scheduler, never in
urllib3's Retry (DESIGN.md §8).
"""

from __future__ import annotations

from xyro.content.page import RETRY_STATUSES
from xyro.records import ErrorKind


class RetryPolicy:
    """Per-URL try counts of 429/503 answers (dispatcher thread only)."""

    def __init__(self, max_retries: int, base_pause_s: float = 60.0,
                 max_pause_s: float = 3600.0) -> None:
        self.max_retries = max_retries
        self.base_pause_s = base_pause_s
        # The host's cap (crawler.politeness.max_retry_after_s) caps the URL's pause too: a
        # Retry-After of years would otherwise park it, and a crawl waiting for it, for good.
        self.max_pause_s = max_pause_s
        self._tries: dict[str, int] = {}

    def pause(self, url: str, status: int | None, retry_after_s: float | None) -> float | None:
        """Seconds to wait before fetching ``url`` again, or None: record this answer."""
        if status not in RETRY_STATUSES:
            self._tries.pop(url, None)  # answered: the next 503 starts counting afresh
            return None
        tries = self._tries.get(url, 0)
        if tries >= self.max_retries:
            del self._tries[url]
            return None
        self._tries[url] = tries + 1
        pause = retry_after_s if retry_after_s is not None else self.base_pause_s * 2 ** tries
        return min(pause, self.max_pause_s)


class PrerequisiteRetries:
    """Consecutive failures to reach an origin's robots.txt, the prerequisite of every URL
    of that origin (dispatcher thread only).

    As Heritrix retries a failed prerequisite (DNS, robots.txt) with back-off before it fails
    the URIs that wait on it, the origin's URLs stay queued while its robots.txt is retried
    (each try at least ``crawler.politeness.robots_unreachable_retry_s`` after the last, the
    host's error back-off growing). The crawl gives up on them only once the origin failed
    more than ``max_retries`` times in a row AND over at least ``max_retries`` retry periods
    of clock time (DESIGN.md §3): a DNS outage at start-up, a server restarting, a network
    down for a while cost no queued work. Given up, the origin is :attr:`draining` (the
    engine records its queued URLs as errors, batch by batch). Memory: one entry per origin
    failing now, forgotten on its first answer or when its URLs are recorded.
    """

    def __init__(self, max_retries: int) -> None:
        self.max_retries = max_retries
        self._failures: dict[str, tuple[float, int]] = {}  # origin → (first failure, count)
        #: origin → (host, failure kind, detail of the records) of the origins given up on
        self.draining: dict[str, tuple[str, ErrorKind, str]] = {}

    def failed(self, origin: str, host: str, kind: ErrorKind, reason: str, now: float,
               retry_s: float) -> bool:
        """One more failure of ``origin`` (``reason``: what happened); True when the crawl
        gives up on it now (it is then :attr:`draining`)."""
        first, count = self._failures.get(origin, (now, 0))
        count += 1
        span = now - first
        if count <= self.max_retries or span < self.max_retries * retry_s:
            self._failures[origin] = (first, count)
            return False
        del self._failures[origin]
        self.draining[origin] = (host, kind, f"{reason}: {count} attempts over "
                                 f"{span / 3600:.1f} h failed, the crawl gave up on the URLs "
                                 "queued for it")
        return True

    def answered(self, origin: str) -> None:
        """``origin`` answered (any status): the next failure starts counting afresh."""
        self._failures.pop(origin, None)
        self.draining.pop(origin, None)

    def attempts(self, origin: str) -> int:
        """Consecutive failures of ``origin`` so far."""
        return self._failures.get(origin, (0.0, 0))[1]
