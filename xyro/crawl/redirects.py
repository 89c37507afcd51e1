"""Redirects are followed through the frontier, not inline (DESIGN.md §7, README "Redirects").

A 3xx ends as an ERROR ``redirect`` record whose one link is the target; the target enters
the frontier as a :data:`~xyro.crawl.admission.Source.REDIRECT` offer, so each hop gets every
check a link gets (scheme, depth, scope, traps, robots.txt) and, unlike an inline hop, the
host's politeness delay (as Heritrix does). The hop count travels with the target, so a
chain longer than ``max_redirects`` ends as ERROR.

Where a seed redirects, the seed is (``example.org`` to ``www.example.org``, ``http://`` to a
new domain): in a scope derived from the seeds the target's host joins the scope, now and,
stored as a seed, at every start, as Heritrix's ``seedsRedirectNewSeeds`` does; that host
exactly, not its subdomains (a redirect to a bare suffix, ``com``, must not open every
``.com`` host). A configured ``scope.allowed_domains`` is the operator's word and is never
widened: the redirect is one warning. A redirect is no link: its target keeps the depth of
the URL it replaces.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from metadata import PageType
from xyro.content.page import Child, PageOutcome
from xyro.crawl.admission import Refusal
from xyro.crawl.frontier import Offer
from xyro.net.fetcher import REDIRECT_STATUSES
from xyro.net.urls import Scope, canonicalize
from xyro.records import ErrorKind, FetchResult

log = logging.getLogger("xyro.crawl.redirects")


class Redirects:
    """Hop counts of redirect targets in the frontier, and the seed each chain started from
    (dispatcher thread only)."""

    def __init__(self, max_redirects: int, max_url_length: int, scope: Scope) -> None:
        self.max_redirects = max_redirects
        self.max_url_length = max_url_length
        self._scope = scope
        self._hops: dict[str, int] = {}  # redirect target queued → hops taken to reach it
        self._seed_of: dict[str, str] = {}  # such a target → the seed its chain started at

    def outcome(self, url: str, result: FetchResult, outcome: PageOutcome) -> PageOutcome:
        """The outcome to record for ``url``: ``outcome`` unless it answered with a redirect."""
        hops = self._hops.pop(url, 0)
        seed = self._seed_of.pop(url, None)
        if result.status not in REDIRECT_STATUSES or not result.redirects:
            return outcome
        target = canonicalize(result.redirects[-1], max_length=self.max_url_length)
        if target is None:
            return _error(f"HTTP {result.status} to {result.redirects[-1]!r}, not an http(s) "
                          "URL Xyro can fetch")
        if hops >= self.max_redirects:
            return _error(f"more than {self.max_redirects} redirects in a row (last HTTP "
                          f"{result.status} to {target})")
        self._hops[target] = hops + 1  # kept only if the frontier queues it (see not_queued)
        if seed is not None or self._scope.is_seed(url):
            self._seed_of[target] = seed or url
        return PageOutcome(PageType.ERROR, children=(Child(target, False),),
                           error_kind=ErrorKind.REDIRECT.value,
                           error_detail=f"HTTP {result.status} moved to {target} "
                                        f"(hop {hops + 1}, followed as a new URL)")

    def is_redirect(self, outcome: PageOutcome) -> bool:
        return outcome.error_kind == ErrorKind.REDIRECT.value and bool(outcome.children)

    def new_seed(self, target: str, depth: int) -> str | None:
        """The seed whose redirect chain led to ``target`` (at link ``depth``) when the scope
        derived from the seeds refuses ``target``: the caller adds it as a seed if the
        admission takes it as one (not refused for another reason: a denied domain or
        pattern, the depth, a suffix). None otherwise (no seed's chain, in scope already, a
        configured scope)."""
        seed, scope = self._seed_of.get(target), self._scope
        if seed is None or not scope.derived or scope.check(target, depth) is None:
            return None
        return seed

    def not_queued(self, targets: list[str],
                   refused: Iterable[tuple[Offer, Refusal]] = ()) -> None:
        """The frontier did not queue these targets: forget their hop counts; ``refused``
        (the frontier's refusals) names those of a seed's chain the scope refused."""
        for offer, refusal in refused:
            seed = self._seed_of.get(offer.url)
            if seed is not None and refusal.kind == "scope":
                hint = ("check scope.denied_domains and scope.deny_patterns"
                        if self._scope.derived else
                        "add its domain to scope.allowed_domains")
                log.warning("seed %s redirects to %s, which the scope refuses (%s): %s",
                            seed, offer.url, refusal.detail, hint)
        for target in targets:
            self._hops.pop(target, None)
            self._seed_of.pop(target, None)


def _error(detail: str) -> PageOutcome:
    return PageOutcome(PageType.ERROR, error_kind=ErrorKind.REDIRECT.value, error_detail=detail)
