"""SC-Select's ``siblings`` link-back estimate (ranking.global_select module doc): each
candidate's share of links into L learned from the crawled pages beside it."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.global_domain import Subgraph, graph_out_links, subgraph_pagerank
from ranking.global_select import SELECTORS, link_back_shares, sc_scores
from ranking.graph import LinkGraph

C = 0.85


def grown(seed: int, degree: str) -> tuple:
    """A 300-page web of 6 sites, L = the first site, 60 of its frontier pages crawled."""
    rng = np.random.default_rng(seed)
    n, width, links = 300, 50, 2400
    src = rng.integers(0, n, links)
    near = (src // width) * width + rng.integers(0, width, links)
    dst = np.where(rng.random(links) < 0.7, near, rng.integers(0, n, links))
    domain = Subgraph(np.arange(width), graph_out_links(LinkGraph.from_edges(src, dst, n)))
    domain.add(domain.view().candidates[::2][:60])
    view = domain.view(degree, C)
    return view, subgraph_pagerank(view)[0]


def direct_shares(view) -> tuple[np.ndarray, float]:  # noqa: ANN001
    """The module doc's formulas, page by page."""
    local, degree = view.n_local, view.out_degree()
    links = list(zip(view.src.tolist(), view.dst.tolist()))
    rho_bar = sum(1 for _, i in links if i < local) / degree.sum()

    def q(k: int) -> float:
        into = sum(1 for a, i in links if a == k and i < local)
        return into / degree[k] if degree[k] else 0.0

    def per_parent(p: int) -> float:
        children = [i for a, i in links if a == p and i >= local]
        return (sum(q(c) for c in children) + rho_bar) / (len(children) + 1)

    rho = []
    for j in range(len(view.candidates)):
        parents = view.front_src[view.front_cand == j]
        rho.append(float(np.mean([per_parent(int(p)) for p in parents])))
    return np.array(rho), rho_bar


@pytest.mark.parametrize("degree", ["within", "all"])
def test_link_back_shares_equal_a_direct_count(degree: str) -> None:
    view, _ = grown(4, degree)
    rho, rho_bar = link_back_shares(view)
    expected, expected_bar = direct_shares(view)
    assert rho_bar == pytest.approx(expected_bar, abs=1e-15)
    np.testing.assert_allclose(rho, expected, atol=1e-12)
    assert rho.std() > 0  # the crawled pages do tell the candidates apart


@pytest.mark.parametrize("degree", ["within", "all"])
def test_with_nothing_crawled_the_scores_are_the_papers(degree: str) -> None:
    rng = np.random.default_rng(5)
    graph = LinkGraph.from_edges(rng.integers(0, 200, 1500), rng.integers(0, 200, 1500), 200)
    view = Subgraph(np.arange(40), graph_out_links(graph)).view(degree, C)
    f = subgraph_pagerank(view)[0]
    rho, rho_bar = link_back_shares(view)
    np.testing.assert_allclose(rho, rho_bar, rtol=1e-12)
    np.testing.assert_allclose(SELECTORS["sc_siblings"](view, f, None), sc_scores(view, f),
                               rtol=1e-12)


def test_crawled_siblings_move_a_candidates_score_their_way() -> None:
    # L = {0, 1, 2}: 1 -> 0, 2 -> 0, 0 -> 1. 0 -> 3, 0 -> 5 and 1 -> 4, 1 -> 6 leave L;
    # 3 and 4 are crawled: 3 -> 7 leads away, 4 -> 0 links back into L. Candidates: 5 (its
    # sibling 3 leads away), 6 (its sibling 4 links back), 7 (no crawled sibling).
    graph = LinkGraph.from_edges([1, 2, 0, 0, 0, 1, 1, 3, 4], [0, 0, 1, 3, 5, 4, 6, 7, 0], 8)
    domain = Subgraph([0, 1, 2], graph_out_links(graph))
    domain.add(np.array([3, 4]))
    view = domain.view("within", C)
    assert list(view.candidates) == [5, 6, 7]
    rho, rho_bar = link_back_shares(view)
    assert rho_bar == pytest.approx(4 / 6)  # 1->0, 2->0, 0->1, 4->0 of 6 links inside F
    np.testing.assert_allclose(rho, [(0 + rho_bar) / 2, (1 + rho_bar) / 2, rho_bar])
    f = subgraph_pagerank(view)[0]
    paper = sc_scores(view, f)
    siblings = sc_scores(view, f, link_back="siblings")
    assert siblings[0] < paper[0] and siblings[1] > paper[1]
    assert siblings[2] == pytest.approx(paper[2], rel=1e-12)


def test_an_unknown_link_back_is_refused() -> None:
    view, f = grown(1, "within")
    with pytest.raises(ValueError, match="link_back='parents' is unknown"):
        sc_scores(view, f, link_back="parents")
