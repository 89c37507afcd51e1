"""Redirects are followed through the frontier, not inline (DESIGN.md §7, README "Redirects").

A 3xx ends as an ERROR ``redirect`` record whose one link is the target; the target enters
the frontier as a :data:`~xyro.crawl.admission.Source.REDIRECT` offer, so each hop gets every
check a link gets (scheme, depth, scope, traps, robots.txt) and, unlike an inline hop, the
host's politeness delay (as Heritrix does). The hop count travels with the target, so a
chain longer than ``max_redirects`` ends as ERROR.
"""

from __future__ import annotations

from metadata import PageType
from xyro.content.page import Child, PageOutcome
from xyro.net.fetcher import REDIRECT_STATUSES
from xyro.net.urls import canonicalize
from xyro.records import ErrorKind, FetchResult


class Redirects:
    """Hop counts of redirect targets in the frontier (dispatcher thread only)."""

    def __init__(self, max_redirects: int, max_url_length: int) -> None:
        self.max_redirects = max_redirects
        self.max_url_length = max_url_length
        self._hops: dict[str, int] = {}  # redirect target queued → hops taken to reach it

    def outcome(self, url: str, result: FetchResult, outcome: PageOutcome) -> PageOutcome:
        """The outcome to record for ``url``: ``outcome`` unless it answered with a redirect."""
        hops = self._hops.pop(url, 0)
        if result.status not in REDIRECT_STATUSES or not result.redirects:
            return outcome
        target = canonicalize(result.redirects[-1], max_length=self.max_url_length)
        if target is None:
            return _error(f"HTTP {result.status} to {result.redirects[-1]!r}, not an http(s) "
                          "URL Xyro can fetch")
        if hops >= self.max_redirects:
            return _error(f"more than {self.max_redirects} redirects in a row (last HTTP "
                          f"{result.status} to {target})")
        self._hops[target] = hops + 1  # kept only if the frontier queues it (see queued)
        return PageOutcome(PageType.ERROR, children=(Child(target, False),),
                           error_kind=ErrorKind.REDIRECT.value,
                           error_detail=f"HTTP {result.status} moved to {target} "
                                        f"(hop {hops + 1}, followed as a new URL)")

    def is_redirect(self, outcome: PageOutcome) -> bool:
        return outcome.error_kind == ErrorKind.REDIRECT.value and bool(outcome.children)

    def not_queued(self, targets: list[str]) -> None:
        """The frontier did not queue these targets: forget their hop counts."""
        for target in targets:
            self._hops.pop(target, None)


def _error(detail: str) -> PageOutcome:
    return PageOutcome(PageType.ERROR, error_kind=ErrorKind.REDIRECT.value, error_detail=detail)
