"""FindGlobalPR (001 Algorithm 2, DESIGN.md §5): estimate the global PageRank of a local
domain L by crawling a few well-chosen out-of-scope pages.

    F ← L; f ← PageRank(F)
    for round 1..T: pick k frontier pages with the selector, crawl them (their out-links
        join F), f ← PageRank(F) warm-started from the previous f
    estimate ← f restricted to L, renormalized

The budget (extra pages, e.g. n or 2n) is spread evenly over the T rounds, so with T even
and a budget of 2n the round T/2 ends exactly at n extra pages. The loop stops early if the
frontier runs dry. Crawling is the caller's ``reveal`` (``ranking.global_domain.OutLinks``):
a global graph in the benchmark and the CLI, the fetcher in the daemon.

Metrics (001 §6.1) of an estimate against a reference (the global PageRank of L's pages,
both renormalized over L): L1 = Σ|a_i − b_i| (``ranking.compare``), L∞ = max|a_i − b_i|, and
Kendall's τ-b (``ranking.compare``, sampled above its page limit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ranking.compare import compare_rankings, normalized_pair
from ranking.global_domain import OutLinks, Subgraph, check_degree, subgraph_pagerank
from ranking.global_select import Selector, resolve_selector, top_candidates


def estimate_metrics(estimate: object, reference: object, *,
                     kendall: bool = True) -> dict[str, float | None]:
    """L1, L∞ and (when ``kendall``) Kendall's τ of two vectors renormalized to sum 1."""
    a, b = normalized_pair(estimate, reference)
    diff = np.abs(a - b)
    metrics: dict[str, float | None] = {"l1": float(diff.sum()), "linf": float(diff.max())}
    if kendall:
        metrics["kendall_tau"] = compare_rankings(a, b)["kendall_tau"]
    return metrics


@dataclass(frozen=True)
class EstimateParams:
    """``budget`` extra pages over ``rounds`` rounds; out-degree ``degree`` (``within``, the
    paper's, or ``all``); damping; the PageRank residual ``tol``; ``seed`` for the random
    selector."""

    budget: int
    rounds: int = 50
    degree: str = "within"
    damping: float = 0.85
    tol: float = 1e-10
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("budget", "rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be an integer >= 0")
        if self.budget > 0 and self.rounds < 1:
            raise ValueError("a positive budget needs rounds >= 1")
        check_degree(self.degree)
        if not 0.0 < self.damping < 1.0:
            raise ValueError(f"damping={self.damping!r} is outside (0, 1)")

    def round_sizes(self) -> np.ndarray:
        """Pages crawled in each round: the budget spread evenly (fewer rounds than
        ``rounds`` when the budget is smaller: no round crawls nothing)."""
        if self.budget == 0:
            return np.zeros(0, dtype=np.int64)
        edges = np.round(np.linspace(0, self.budget, self.rounds + 1)).astype(np.int64)
        sizes = np.diff(edges)
        return sizes[sizes > 0]


@dataclass(frozen=True)
class RoundRecord:
    """F after ``extra`` crawled pages: its size, the frontier, the sweeps and seconds of its
    PageRank and of the selection that followed, and metrics when a reference is given."""

    extra: int
    size: int
    candidates: int
    sweeps: int
    seconds_pagerank: float
    seconds_select: float
    metrics: dict[str, float | None] | None


@dataclass
class GlobalEstimate:
    """The estimate (L's pages, sum 1), the crawled ids in order, and one record per round
    (round 0 is the local PageRank of L alone)."""

    estimate: np.ndarray
    crawled: np.ndarray
    history: list[RoundRecord] = field(default_factory=list)

    def at_extra(self, extra: int) -> RoundRecord:
        """The first record with at least ``extra`` crawled pages (else the last)."""
        for record in self.history:
            if record.extra >= extra:
                return record
        return self.history[-1]


RoundFn = Callable[[RoundRecord], None]


def find_global_pagerank(local_ids: object, reveal: OutLinks, selector: str | Selector,
                         params: EstimateParams, *, reference: np.ndarray | None = None,
                         kendall: bool = False, on_round: RoundFn | None = None,
                         selector_options: dict | None = None) -> GlobalEstimate:
    """FindGlobalPR (module doc). ``reference``: the true global PageRank of L's pages (any
    scale), to record the metrics of every round; ``kendall``: include Kendall's τ in them
    (costlier); ``selector_options``: keyword arguments for the selector (e.g. SC's norms)."""
    score = resolve_selector(selector)
    options = selector_options or {}
    rng = np.random.default_rng(params.seed)
    domain = Subgraph(local_ids, reveal)
    n = domain.n_local
    if reference is not None and np.asarray(reference).shape != (n,):
        raise ValueError(f"reference has shape {np.asarray(reference).shape}; it needs one "
                         f"value per page of the local domain ({n})")
    result = GlobalEstimate(np.empty(0), np.empty(0, dtype=np.int64))
    crawled: list[np.ndarray] = []
    f: np.ndarray | None = None
    sizes = params.round_sizes()
    extra = 0
    for r in range(len(sizes) + 1):
        started = time.perf_counter()
        view = domain.view(params.degree, params.damping)
        f, sweeps = subgraph_pagerank(view, f, tol=params.tol)
        seconds_pagerank = time.perf_counter() - started
        estimate = f[:n] / f[:n].sum()
        metrics = (estimate_metrics(estimate, reference, kendall=kendall)
                   if reference is not None else None)
        started = time.perf_counter()
        chosen = np.empty(0, dtype=np.int64)
        if r < len(sizes) and len(view.candidates):
            chosen = top_candidates(view, score(view, f, rng, **options), int(sizes[r]))
        seconds_select = time.perf_counter() - started
        record = RoundRecord(extra, view.size, len(view.candidates), sweeps, seconds_pagerank,
                             seconds_select, metrics)
        result.history.append(record)
        if on_round is not None:
            on_round(record)
        if not len(chosen):
            break
        domain.add(chosen)
        crawled.append(chosen)
        extra += len(chosen)
    result.estimate = estimate
    result.crawled = (np.concatenate(crawled) if crawled else np.empty(0, dtype=np.int64))
    return result
