"""SC-Select's ``learned`` estimate of a candidate's unknown links (ranking.global_select
module doc): s, β and the candidate's share of links into L taken from the crawled pages.
Checked against direct counts and, under the paper's out-degree, against the stochastic
complement of P_{F_j} built explicitly with the column that estimate implies."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.global_domain import Subgraph, graph_out_links, subgraph_pagerank
from ranking.global_select import (SELECTORS, flow_vector, link_back_shares, sc_scores)
from ranking.graph import LinkGraph

C = 0.85


def grown(seed: int, degree: str, crawled: int = 60, n: int = 300):
    """A web of 50-page sites, L = the first site, ``crawled`` of its frontier crawled."""
    rng = np.random.default_rng(seed)
    width, links = 50, 8 * n
    src = rng.integers(0, n, links)
    near = (src // width) * width + rng.integers(0, width, links)
    dst = np.where(rng.random(links) < 0.7, near, rng.integers(0, n, links))
    graph = LinkGraph.from_edges(src, dst, n)
    domain = Subgraph(np.arange(width), graph_out_links(graph))
    domain.add(domain.view().candidates[::2][:crawled])
    view = domain.view(degree, C)
    return graph, view, subgraph_pagerank(view, tol=1e-13)[0]


def direct_shares(view) -> tuple[np.ndarray, float]:  # noqa: ANN001
    """ρ_j and ρ̄ from the module doc's formulas, page by page."""
    local, degree = view.n_local, view.out_degree()
    links = list(zip(view.src.tolist(), view.dst.tolist()))
    crawled = range(local, view.size)
    rho_bar = (sum(1 for k, i in links if k >= local and i < local)
               / sum(degree[k] for k in crawled))

    def q(k: int) -> float:
        into = sum(1 for a, i in links if a == k and i < local)
        return into / degree[k] if degree[k] else 0.0

    def per_parent(p: int) -> float:
        children = [i for a, i in links if a == p and i >= local]
        return (sum(q(c) for c in children) + rho_bar) / (len(children) + 1)

    rho = [float(np.mean([per_parent(int(p)) for p in view.front_src[view.front_cand == j]]))
           for j in range(len(view.candidates))]
    return np.array(rho), rho_bar


@pytest.mark.parametrize("degree", ["within", "all"])
def test_the_learned_estimate_equals_direct_counts(degree: str) -> None:
    _, view, _ = grown(4, degree)
    rho, rho_bar = link_back_shares(view)
    expected, expected_bar = direct_shares(view)
    assert rho_bar == pytest.approx(expected_bar, abs=1e-15)
    np.testing.assert_allclose(rho, expected, atol=1e-12)
    assert rho.std() > 0  # the crawled pages tell the candidates apart
    s, beta = flow_vector(view, "learned")
    from_crawled = view.src >= view.n_local
    indegree = np.bincount(view.dst[from_crawled], minlength=view.size)
    np.testing.assert_allclose(s, indegree / indegree.sum(), atol=1e-15)
    crawled = slice(view.n_local, None)
    assert beta == (1.0 if degree == "within" else pytest.approx(
        view.out_within[crawled].sum() / view.out_all[crawled].sum()))
    assert beta * s[:view.n_local].sum() == pytest.approx(rho_bar)  # the same ρ̄ both ways


@pytest.mark.parametrize("degree", ["within", "all"])
def test_with_nothing_crawled_the_scores_are_the_papers(degree: str) -> None:
    _, view, f = grown(5, degree, crawled=0)
    assert view.size == view.n_local
    np.testing.assert_allclose(SELECTORS["sc_learned"](view, f, None), sc_scores(view, f),
                               rtol=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_learned_scores_equal_the_explicit_stochastic_complement(seed: int) -> None:
    """Under ``within``: P_{F_j} with j's column c·s_j, s_j = (ρ_j/ρ̄)·s on L and
    (1 − ρ_j)/(1 − ρ̄)·s on the rest of F; S_j = P₁₁ + p₁₂·p₂₁ᵀ/(1 − p₂₂); the score is
    ‖E_L(S_j·f − f)‖₁."""
    _, view, f = grown(seed, "within", crawled=25, n=200)
    l, local = view.size, view.n_local
    a = np.zeros((l, l))
    a[view.dst, view.src] = 1.0
    s, _ = flow_vector(view, "learned")
    rho, rho_bar = link_back_shares(view)
    fast = sc_scores(view, f, norms="exact", links="learned")
    assert not np.isin(view.candidates, view.ids).any()
    for j in range(len(view.candidates)):
        u = np.zeros(l)
        parents = view.front_src[view.front_cand == j]
        u[parents] = 1.0
        column = np.concatenate([s[:local] * rho[j] / rho_bar,
                                 s[local:] * (1 - rho[j]) / (1 - rho_bar)])
        assert column.sum() == pytest.approx(1.0)  # a valid column: the model is exact
        aj = np.zeros((l + 1, l + 1))
        aj[:l, :l], aj[l, :l] = a, u
        degree = np.append(a.sum(axis=0) + u, 1.0)
        m = np.divide(aj, degree, out=np.zeros_like(aj), where=degree > 0)
        m[:l, l], m[l, l] = column, 0.0
        p = C * m + np.outer(np.ones(l + 1), 1.0 - C * m.sum(axis=0)) / (l + 1)
        complement = p[:l, :l] + np.outer(p[:l, l], p[l, :l]) / (1.0 - p[l, l])
        step = complement @ f
        assert fast[j] == pytest.approx(np.abs(step[:local] - f[:local]).sum(), abs=1e-9)
    assert len(view.candidates) > 10 and rho.std() > 0


def test_until_a_crawled_page_links_inside_f_the_estimate_is_the_papers() -> None:
    # L = {0, 1}: 0 <-> 1, 0 -> 2, 1 -> 4; 2 is crawled and links only to 3, outside F.
    graph = LinkGraph.from_edges([0, 1, 0, 1, 2], [1, 0, 2, 4, 3], 5)
    domain = Subgraph([0, 1], graph_out_links(graph))
    domain.add(np.array([2]))
    for degree in ("within", "all"):
        view = domain.view(degree, C)
        learned, paper = flow_vector(view, "learned"), flow_vector(view)
        np.testing.assert_allclose(learned[0], paper[0], rtol=1e-15)
        assert learned[1] == paper[1]
        assert link_back_shares(view)[1] == pytest.approx(paper[1] * paper[0][:2].sum())
        f = subgraph_pagerank(view)[0]  # no sibling of 3 or 4 is crawled: the paper's scores
        np.testing.assert_allclose(sc_scores(view, f, links="learned"), sc_scores(view, f),
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
    assert rho_bar == pytest.approx(1.0)  # the one crawled link inside F, 4 -> 0, is into L
    np.testing.assert_allclose(rho, [(0 + rho_bar) / 2, (1 + rho_bar) / 2, rho_bar])
    f = subgraph_pagerank(view)[0]
    paper, learned = sc_scores(view, f), sc_scores(view, f, links="learned")
    assert learned[1] / learned[0] > 2 * paper[1] / paper[0]  # 6 gains on 5


def test_an_unknown_estimate_is_refused() -> None:
    _, view, f = grown(1, "within")
    with pytest.raises(ValueError, match="links='siblings' is unknown"):
        sc_scores(view, f, links="siblings")
