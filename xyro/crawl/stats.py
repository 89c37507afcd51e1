"""Counters of a crawl: what an operator wants to see in progress lines, ``xyro status``
and the Prometheus endpoint (:mod:`xyro.service.metrics`, which reads them at scrape time).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Upper bounds (seconds, real time) of the fetch-latency buckets. The last finite bound is
#: the default fetch deadline (crawler.limits.deadline_s); slower fetches land in +Inf.
FETCH_SECONDS_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def status_class(status: int | None) -> str:
    """``200`` → ``2xx``; ``None`` (no HTTP answer: network error, refused) → ``none``.

    A class, not the code: a bounded label set for metrics (DESIGN.md §8).
    """
    if status is None or not 100 <= status <= 599:
        return "none"
    return f"{status // 100}xx"


@dataclass(frozen=True, slots=True)
class StatsView:
    """A consistent copy of the counters, taken under the lock (for the metrics scrape)."""

    pages_by_type_status: dict[tuple[str, str], int]
    errors: dict[str, int]
    refused: dict[str, int]
    bytes: int
    robots_fetches: int
    discovered: int
    not_modified: int
    #: Non-cumulative counts per bucket of FETCH_SECONDS_BUCKETS, then the +Inf bucket.
    fetch_seconds_counts: tuple[int, ...]
    fetch_seconds_sum: float


@dataclass
class CrawlStats:
    """Thread-safe counters. Rates use real elapsed time (what an operator experiences)."""

    started_monotonic: float = field(default_factory=time.monotonic)
    pages: int = 0
    robots_fetches: int = 0
    bytes: int = 0
    not_modified: int = 0
    changed: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    discovered: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    by_type_status: Counter[tuple[str, str]] = field(default_factory=Counter)
    fetch_seconds_counts: list[int] = field(
        default_factory=lambda: [0] * (len(FETCH_SECONDS_BUCKETS) + 1))
    fetch_seconds_sum: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def page(self, page_type: str, size: int, error_kind: str | None, not_modified: bool,
             status: int | None = None, elapsed_s: float | None = None) -> None:
        """One page record. ``elapsed_s``: real seconds its fetch took (None: no fetch, e.g.
        refused by robots.txt); one bisect and two additions under the lock already held."""
        with self._lock:
            self.pages += 1
            self.bytes += size
            self.by_type[page_type] += 1
            self.by_type_status[page_type, status_class(status)] += 1
            if error_kind:
                self.errors[error_kind] += 1
            if not_modified:
                self.not_modified += 1
            if elapsed_s is not None:
                # bisect_left: a fetch of exactly a bound's length counts in it (le="bound").
                self.fetch_seconds_counts[bisect.bisect_left(FETCH_SECONDS_BUCKETS,
                                                             elapsed_s)] += 1
                self.fetch_seconds_sum += elapsed_s

    def robots_fetch(self) -> None:
        with self._lock:
            self.robots_fetches += 1

    def refuse(self, reason_kind: str) -> None:
        with self._lock:
            self.refused[reason_kind] += 1

    def view(self) -> StatsView:
        """Copy the counters the metrics endpoint exposes, in one short hold of the lock."""
        with self._lock:
            return StatsView(dict(self.by_type_status), dict(self.errors), dict(self.refused),
                             self.bytes, self.robots_fetches, self.discovered,
                             self.not_modified, tuple(self.fetch_seconds_counts),
                             self.fetch_seconds_sum)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_monotonic

    def snapshot(self, **extra: Any) -> dict[str, Any]:
        """A JSON-ready copy: counters, pages/s, and whatever the engine adds (queue sizes)."""
        with self._lock:
            elapsed = max(self.elapsed_s, 1e-9)
            # A page robots.txt refused is a page record, not a fetch: the rate counts the
            # pages fetched, as `xyro status` and the demo show them beside it.
            fetched = self.pages - self.errors["robots"]
            return {
                "pages": self.pages,
                "pages_per_s": round(fetched / elapsed, 2),
                "elapsed_s": round(elapsed, 2),
                "robots_fetches": self.robots_fetches,
                "bytes": self.bytes,
                "not_modified": self.not_modified,
                "discovered": self.discovered,
                "by_type": dict(self.by_type),
                "errors_by_kind": dict(self.errors),
                "refused_by_reason": dict(self.refused),
                **extra,
            }

    def progress_line(self, queued: int) -> str:
        snap = self.snapshot()
        errors = sum(self.errors.values())
        return (f"{snap['pages']} pages ({snap['pages_per_s']:.1f}/s), {queued} queued, "
                f"{snap['discovered']} discovered, {errors} errors")
