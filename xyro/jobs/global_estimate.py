"""``xyro rank --global-estimate``: the global PageRank of a local domain (001, DESIGN.md §5
"Global PageRank of a local domain"), with the pure core ``ranking.global_estimate``.

- edge-list mode (:func:`estimate_edges`): a bare ``.npz`` edge list (n, src, dst, as for
  ``xyro rank --edges``) is the whole web; the local domain is an id range ``START:STOP``
  (half-open; in a URL-ordered graph such as LAW cnr-2000 a range is a run of sites).
  FindGlobalPR "crawls" by reading out-links from the file, and every round is measured
  against the graph's true global PageRank (teleport, the paper's 0/1 graph);
- database mode (:func:`estimate_store`): the local domain is what the configured ``scope``
  admits, among the pages whose links the store holds (fetched HTML and XML pages). The
  store has no links of out-of-scope pages it never fetched, so without fetching this mode
  computes exactly: the local PageRank of the domain; the estimate with F = the domain plus
  the out-of-scope pages whose links the store does hold (the paper's §8: start F with the
  pages a crawl already read); and the selector's first round over F's out-of-scope
  frontier, i.e. the pages a global-estimate crawl would fetch next, with their scores. There
  is no true global PageRank to measure against. Further rounds need those fetches.

Nothing is written. The damping is the config's ``ranking.damping``; the selector, budget,
rounds and out-degree default to its ``ranking.global_estimate``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ranking.global_domain import graph_out_links, simple_graph
from ranking.global_estimate import EstimateParams, estimate_metrics, find_global_pagerank
from ranking.importance import direct_importance
from ranking.sweep import SolverParams
from xyro.app import App, build_admission, scope_seeds
from xyro.crawl.admission import Source
from xyro.crawl.frontier import DISCOVERY, admit_offline
from xyro.config import GlobalEstimateConfig
from xyro.errors import UsageError, XyroError
from xyro.jobs.rank_job import load_edge_list
from xyro.jobs.global_stored import config_scope, score_stored, stored_domain

REFERENCE_TOL = 1e-12
TOP_PAGES = 10


@dataclass(frozen=True)
class GlobalOptions:
    """``extra``: the budget as a multiple of the domain's n; the selector, rounds and
    out-degree of ``ranking.global_estimate.EstimateParams``."""

    selector: str
    extra: float
    rounds: int
    degree: str

    @classmethod
    def from_config(cls, settings: GlobalEstimateConfig, **overrides: Any) -> GlobalOptions:
        """The config's ``ranking.global_estimate``, with the options given (not None)."""
        chosen = {k: v for k, v in overrides.items() if v is not None}
        return cls(**{"selector": settings.selector,
                      "extra": settings.extra_pages_per_local_page,
                      "rounds": settings.rounds, "degree": settings.out_degree, **chosen})

    def params(self, n: int, damping: float) -> EstimateParams:
        return EstimateParams(budget=int(round(self.extra * n)), rounds=self.rounds,
                              degree=self.degree, damping=damping)


def parse_range(text: str) -> tuple[int, int]:
    """``START:STOP`` (integers, 0 <= START < STOP) -> (START, STOP); ValueError otherwise."""
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"{text!r} is not a range START:STOP of page ids (e.g. 1000:3000)")
    start, stop = int(parts[0]), int(parts[1])
    if start >= stop:
        raise ValueError(f"{text!r} is empty: START must be below STOP")
    return start, stop


def estimate_edges(path: Path, local: tuple[int, int], options: GlobalOptions,
                   damping: float) -> dict[str, Any]:
    """FindGlobalPR on the edge list at ``path`` for the ids ``local``, measured against the
    graph's global PageRank (module doc)."""
    started = time.perf_counter()
    graph = simple_graph(load_edge_list(path)[0])
    start, stop = local
    if stop > graph.n:
        raise UsageError(f"--local {start}:{stop} reaches past the graph's {graph.n:,} pages "
                         f"(ids 0 to {graph.n - 1}); give a range inside it")
    n = stop - start
    truth = direct_importance(graph, SolverParams(damping=damping, tol=REFERENCE_TOL,
                                                  max_iter=5000), dangling="teleport").values
    reference = truth[start:stop]
    result = find_global_pagerank(np.arange(start, stop), graph_out_links(graph),
                                  options.selector, options.params(n, damping),
                                  reference=reference, kendall=True)
    first, last = result.history[0], result.history[-1]
    report: dict[str, Any] = {
        "mode": "edges", "edges": str(path), "pages": graph.n, "links": graph.m,
        "local_range": [start, stop], "local_pages": n, "selector": options.selector,
        "out_degree": options.degree, "rounds": len(result.history) - 1,
        "extra_pages": last.extra, "damping": damping,
        "local_pr": first.metrics, "estimate": last.metrics}
    if last.extra >= n:
        report["estimate_after_n_extra"] = result.at_extra(n).metrics
    # None when the estimate is exact: JSON has no infinity (json.dumps would write a bare
    # Infinity that strict parsers refuse)
    report["gain_l1"] = (first.metrics["l1"] / last.metrics["l1"]
                         if last.metrics["l1"] > 0 else None)
    report["top_pages"] = [{"id": start + int(i), "estimate": float(result.estimate[i]),
                            "global": float(reference[i] / reference.sum())}
                           for i in np.argsort(-result.estimate, kind="stable")[:TOP_PAGES]]
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def estimate_store(app: App, options: GlobalOptions) -> dict[str, Any]:
    """What the stored graph allows without fetching (module doc)."""
    started = time.perf_counter()
    cfg = app.config
    with app.open_store(read_only=True) as store:
        seeds = scope_seeds(app, store)
        stored = stored_domain(store, config_scope(cfg, seeds))
    local, stored_outside, url_of = stored.local, stored.outside, stored.urls
    in_scope = stored.in_scope
    if local.size == 0:
        raise XyroError(f"the database {app.database_path} holds no fetched page inside the "
                        "configured scope, so there is no local domain to estimate: crawl "
                        "first (`xyro crawl`), or estimate on an edge list with "
                        "`xyro rank --global-estimate --edges FILE.npz --local START:STOP`")
    damping = cfg.ranking.damping
    scored = score_stored(stored, options.selector, options.degree, damping)
    local_pr, estimate, view, scores = (scored.local_pr, scored.estimate, scored.view,
                                        scored.scores)
    n = len(local)
    outside = ~in_scope[view.candidates]
    per_round = options.params(n, damping).round_sizes()
    admission = build_admission(app, seeds)

    def admitted(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
        ok = {o.url for o in admit_offline(admission, Source.GLOBAL_ESTIMATE,
                                           [u for _, u in pages], DISCOVERY).queued}
        return [p for p in pages if p[1] in ok]

    chosen = [url_id - 1 for url_id, _ in scored.best_accepted(
        int(per_round[0]) if len(per_round) else 0, url_of, admitted)]
    score_of = dict(zip(view.candidates.tolist(), scores.tolist()))
    return {
        "mode": "database", "database": str(app.database_path), "selector": options.selector,
        "out_degree": options.degree, "damping": damping, "local_pages": n,
        "stored_out_of_scope_pages_with_links": int(stored_outside.size),
        "frontier_out_of_scope_pages": int(outside.sum()),
        "frontier_in_scope_unread_pages": int((~outside).sum()),
        "estimate_change_from_local_pr_l1": estimate_metrics(estimate, local_pr,
                                                             kendall=False)["l1"],
        "budget_extra_pages": int(per_round.sum()), "rounds": len(per_round),
        "computable_without_fetching": "the local PageRank, the estimate with the stored "
        "out-of-scope pages, and the first round's selection; later rounds need the pages "
        "selected to be fetched (their links are not in the store)",
        "next_pages": [{"url": url_of[int(j)], "score": float(score_of[int(j)])}
                       for j in chosen],
        "top_pages": [{"url": url_of[int(local[i])], "estimate": float(estimate[i]),
                       "local_pr": float(local_pr[i])}
                      for i in np.argsort(-estimate, kind="stable")[:TOP_PAGES]],
        "seconds": round(time.perf_counter() - started, 3)}

