"""One admission for every producer of the frontier (DESIGN.md §2, §7).

Every URL that enters the frontier — seeds, discovered links, redirect targets, the refresh
planner's due pages and discovery share, the loader's DTDs and entities, the rows a restart
restores — is checked here, by the one :class:`Admission` the composition root builds from
the configuration. The checks, in order (cheapest and most telling first):

    scheme   only http and https with a host
    depth    ``scope.max_depth`` (links followed from a seed; seeds are depth 0)
    suffix   ``crawler.skip_suffixes`` (images, archives...)
    scope    allowed/denied domains, allow/deny patterns (:class:`xyro.net.urls.Scope`)
    trap     URL shapes that generate endless pages (:meth:`TrapGuard.check_shape`)
    budget   pages per host per time unit (:meth:`TrapGuard.check`, counted)

Which of them a producer passes depends on what it is (:data:`RULES`): the loader's DTDs
live on other hosts, so loader needs skip depth, suffix and the scope's allowed domains but
not the scheme and the trap shapes; publication sources (sitemaps, feeds) skip the suffix
list and the host budget; the global PageRank estimate's out-of-scope pages skip the allowed
domains and depth (denied domains and deny patterns bind every producer: never fetched
means never, :meth:`xyro.net.urls.Scope.denied`); seeds pass
the scope's explicit domain lists, while the default "hosts of the seeds" cannot refuse a
seed; refreshes and restored rows were counted against the host budget when they were
first admitted. robots.txt is not checked here: it needs a fetch, and
the frontier asks for it before any other request to an origin.

A :class:`Refusal` is *lasting* when it belongs to the URL (its scheme, scope, shape, or its
depth on that path): the store marks such a URL ``refused`` and no path fetches it. The host
budget refuses only for the current time unit, so those URLs stay ``unread`` and the refresh
planner's discovery share may pick them later.

Pure: no I/O, no store, callable without a running frontier (``xyro seed``, ``xyro plan
--run``). Not thread-safe (the budget counts): the frontier calls it under its lock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from xyro.net.filters import suffix_skipped
from xyro.net.urls import Scope, TrapGuard


class Source(str, enum.Enum):
    """Who offers a URL to the frontier (each passes the :data:`RULES` of its kind)."""

    SEED = "seed"            # configured seeds, `xyro seed`, SIGHUP-reloaded seeds
    OPERATOR = "operator"    # `xyro seed` while a crawler runs: queued even if known
    DISCOVERY = "discovery"  # links of a fetched page
    REDIRECT = "redirect"    # the target of a 3xx, one more hop
    REFRESH = "refresh"      # the refresh planner: due pages and its discovery share
    LOADER = "loader"        # DTDs and entities a document waits for
    RESTORE = "restore"      # persisted frontier rows read back at start
    SITEMAP = "sitemap"      # URLs listed by sitemaps and feeds
    PUBLICATION = "publication"  # sitemaps and feeds themselves (config, robots.txt, indexes)
    GLOBAL_ESTIMATE = "global_estimate"  # out-of-scope pages fetched for their links alone


@dataclass(frozen=True, slots=True)
class Rules:
    """Which checks a source passes (the scheme is always checked)."""

    depth: bool = True
    suffix: bool = True
    scope: bool = True
    trap: bool = True
    budget: bool = False
    seed: bool = False  # a seed may not be refused by the domains derived from the seeds


#: The checks of each producer (module docstring).
RULES: dict[Source, Rules] = {
    Source.SEED: Rules(budget=True, seed=True),
    # Not skipped when seen (xyro.crawl.frontier): a queued URL moves up to its priority, a
    # fetched one is fetched again, as `xyro seed` does with no crawler running.
    Source.OPERATOR: Rules(budget=True, seed=True),
    Source.DISCOVERY: Rules(budget=True),
    Source.REDIRECT: Rules(budget=True),
    Source.SITEMAP: Rules(budget=True),
    # A site's own announcement of its sitemaps (003 §3, the push channel): scheme, scope,
    # depth and trap shapes hold; no suffix list (sitemap.xml.gz) and no host budget (a
    # handful per host, re-read on a schedule, must not be crowded out by its pages).
    Source.PUBLICATION: Rules(suffix=False),
    Source.REFRESH: Rules(),
    Source.RESTORE: Rules(),
    # DTDs and entities live on other hosts and at any depth; the shape checks, denied
    # domains and deny patterns still hold.
    Source.LOADER: Rules(depth=False, suffix=False, scope=False),
    # The global PageRank estimate's pages are out of scope by definition, at any depth,
    # and a few per round; suffixes, trap shapes, denied domains and deny patterns still
    # hold (DESIGN.md §5).
    Source.GLOBAL_ESTIMATE: Rules(depth=False, scope=False),
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a URL was not admitted: ``kind`` (scheme, depth, suffix, scope, trap, budget)."""

    kind: str
    detail: str

    @property
    def lasting(self) -> bool:
        """True when the refusal belongs to the URL (marked ``refused`` in the store)."""
        return self.kind != "budget"

    @property
    def counter(self) -> str:
        """The crawl statistics' reason label (scope, trap, suffix, scheme)."""
        return {"depth": "scope", "budget": "trap"}.get(self.kind, self.kind)

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class Admission:
    """The checks of the module docstring over one scope, trap guard and suffix list."""

    def __init__(self, scope: Scope, traps: TrapGuard | None,
                 skip_suffixes: frozenset[str] = frozenset()) -> None:
        self.scope = scope
        self.traps = traps
        self.skip_suffixes = frozenset(skip_suffixes)

    @classmethod
    def open(cls) -> Admission:
        """Scheme check only (frontiers built by tests and benchmarks)."""
        return cls(Scope(), None)

    @property
    def max_depth(self) -> int | None:
        return self.scope.max_depth

    def check(self, url: str, depth: int, source: Source, count: bool = True) -> Refusal | None:
        """None if ``url`` (canonical) at link ``depth`` may be queued by ``source``; an
        admitted URL counts against its host's budget unless ``count`` is False."""
        if not url.startswith(("http://", "https://")):
            return Refusal("scheme", f"{url[:80]!r} is not an http(s) URL")
        rules = RULES[source]
        max_depth = self.scope.max_depth
        if rules.depth and max_depth is not None and depth > max_depth:
            return Refusal("depth", f"depth {depth} exceeds scope.max_depth {max_depth}")
        if rules.suffix and self.skip_suffixes and suffix_skipped(url, self.skip_suffixes):
            return Refusal("suffix", "its suffix is in crawler.skip_suffixes")
        reason = (self.scope.check(url, 0, seed=rules.seed) if rules.scope
                  else self.scope.denied(url))
        if reason is not None:
            return Refusal("scope", reason)
        traps = self.traps
        if traps is not None and rules.trap:
            reason = traps.check_shape(url)
            if reason is not None:
                return Refusal("trap", reason)
            if rules.budget:
                reason = traps.check_budget(url, count)
                if reason is not None:
                    return Refusal("budget", reason)
        return None

    def add_seeds(self, urls: list[str]) -> None:
        """Seeds added while running (SIGHUP): their hosts join a scope derived from seeds."""
        self.scope.add_seeds(urls)

    def add_found(self, urls: list[str]) -> None:
        """Seeds found where a seed redirected: their hosts, exactly, join a scope derived
        from seeds."""
        self.scope.add_found(urls)
