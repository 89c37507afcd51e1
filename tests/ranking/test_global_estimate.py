"""FindGlobalPR (001 Algorithm 2): the loop, its budget, F's PageRank and the metrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranking.global_domain import Subgraph, graph_out_links, subgraph_pagerank
from ranking.global_estimate import EstimateParams, estimate_metrics, find_global_pagerank
from ranking.global_select import SELECTORS
from ranking.graph import LinkGraph
from ranking.importance import direct_importance
from ranking.sweep import SolverParams


def sites(seed: int, n: int = 3000, width: int = 300, links: int = 24000) -> LinkGraph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, links)
    near = (src // width) * width + rng.integers(0, width, links)
    dst = np.where(rng.random(links) < 0.8, near, (n * rng.random(links) ** 3).astype(int))
    return LinkGraph.from_edges(src, dst, n)


def global_pagerank(graph: LinkGraph) -> np.ndarray:
    """The reference: teleport PageRank of the 0/1 graph without self-links."""
    src = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    pairs = np.unique(np.column_stack([src, graph.indices]), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    simple = LinkGraph.from_edges(pairs[:, 0], pairs[:, 1], graph.n)
    return direct_importance(simple, SolverParams(tol=1e-13, max_iter=2000),
                             dangling="teleport").values


@pytest.mark.parametrize("selector", sorted(SELECTORS))
@pytest.mark.parametrize("degree", ["within", "all"])
def test_the_loop_spends_its_budget_on_frontier_pages(selector: str, degree: str) -> None:
    graph = sites(1)
    local = np.arange(600, 900)
    truth = global_pagerank(graph)[local]
    seen: list[int] = []
    result = find_global_pagerank(local, graph_out_links(graph), selector,
                                  EstimateParams(budget=600, rounds=10, degree=degree),
                                  reference=truth, kendall=True,
                                  on_round=lambda r: seen.append(r.extra))
    assert len(result.crawled) == 600 and len(np.unique(result.crawled)) == 600
    assert not np.isin(result.crawled, local).any()
    assert seen == list(range(0, 601, 60))
    assert [r.size for r in result.history] == [300 + e for e in seen]
    assert result.estimate.shape == (300,) and result.estimate.sum() == pytest.approx(1.0)
    assert result.at_extra(300).extra == 300
    first, last = result.history[0].metrics, result.history[-1].metrics
    assert set(first) == {"l1", "linf", "kendall_tau"}
    assert last["l1"] < first["l1"]  # crawling 2n pages of this graph always helps


def test_first_round_is_the_local_pagerank_and_rounds_are_warm_started() -> None:
    graph = sites(2)
    sub = Subgraph(np.arange(300, 600), graph_out_links(graph))
    cold, cold_sweeps = subgraph_pagerank(sub.view())
    sub.add(sub.view().candidates[:50])
    grown = sub.view()
    warm, warm_sweeps = subgraph_pagerank(grown, cold)
    fresh, fresh_sweeps = subgraph_pagerank(grown)
    np.testing.assert_allclose(warm, fresh, atol=1e-9)
    assert warm_sweeps <= fresh_sweeps
    result = find_global_pagerank(np.arange(300, 600), graph_out_links(graph), "pf",
                                  EstimateParams(budget=0))
    np.testing.assert_allclose(result.estimate, cold, atol=1e-9)
    assert len(result.history) == 1 and len(result.crawled) == 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 60), local=st.integers(1, 4),
       degree=st.sampled_from(["within", "all"]), selector=st.sampled_from(sorted(SELECTORS)))
def test_crawling_the_whole_graph_gives_the_global_pagerank(seed: int, n: int, local: int,
                                                             degree: str,
                                                             selector: str) -> None:
    """Page 0 (in L) links to every page, so F can grow to the whole graph; then every
    out-degree is the global one and F's PageRank is the global PageRank."""
    rng = np.random.default_rng(seed)
    links = rng.integers(0, n, (3 * n, 2))
    links = np.vstack([links, np.column_stack([np.zeros(n, int), np.arange(n)])])
    graph = LinkGraph.from_edges(links[:, 0], links[:, 1], n)
    local = min(local, n)
    truth = global_pagerank(graph)[:local]
    result = find_global_pagerank(np.arange(local), graph_out_links(graph), selector,
                                  EstimateParams(budget=n, rounds=3, degree=degree, tol=1e-13))
    assert len(result.crawled) == n - local  # the frontier ran dry
    np.testing.assert_allclose(result.estimate, truth / truth.sum(), atol=1e-9)


def test_metrics_by_hand() -> None:
    got = estimate_metrics([0.5, 0.3, 0.2], [0.4, 0.4, 0.2])
    assert got["l1"] == pytest.approx(0.2) and got["linf"] == pytest.approx(0.1)
    assert got["kendall_tau"] == pytest.approx(2 / np.sqrt(6))
    assert set(estimate_metrics([1, 1], [1, 2], kendall=False)) == {"l1", "linf"}


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="degree='global' is unknown"):
        EstimateParams(budget=10, degree="global")
    with pytest.raises(ValueError, match="budget=-1"):
        EstimateParams(budget=-1)
    with pytest.raises(ValueError, match="rounds >= 1"):
        EstimateParams(budget=5, rounds=0)
    graph = sites(3, n=100, width=10, links=300)
    reveal = graph_out_links(graph)
    with pytest.raises(ValueError, match="selector='best' is unknown"):
        find_global_pagerank([1, 2], reveal, "best", EstimateParams(budget=1))
    with pytest.raises(ValueError, match="one value per page of the local domain"):
        find_global_pagerank([1, 2], reveal, "pf", EstimateParams(budget=1),
                             reference=np.ones(3))
    with pytest.raises(ValueError, match="lists a page id twice"):
        Subgraph([1, 1], reveal)
    with pytest.raises(ValueError, match=r"page ids must be in \[0, 100\)"):
        Subgraph([100], reveal)
    assert EstimateParams(budget=7, rounds=3).round_sizes().tolist() == [2, 3, 2]
    assert EstimateParams(budget=3, rounds=10).round_sizes().tolist() == [1, 1, 1]
