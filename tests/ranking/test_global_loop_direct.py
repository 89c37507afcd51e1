"""FindGlobalPR (001 Algorithm 2, DESIGN.md §5) against a direct implementation written
from the definitions alone: dense matrices, F's PageRank by a linear solve, the selectors'
scores by a loop over the links (equal scores ordered as the selection orders ties). The
two must crawl the same pages in the same rounds and report the same errors."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.global_domain import graph_out_links
from ranking.global_estimate import EstimateParams, find_global_pagerank
from ranking.global_select import tie_order
from ranking.graph import LinkGraph

DAMPING = 0.85


def random_sites(seed: int, n: int = 160, width: int = 40) -> np.ndarray:
    """A dense 0/1 adjacency (adj[k, i]: k links to i, no self-links) with site structure:
    most links stay in a block of ``width`` pages, some go to low (popular) ids; a few pages
    have no links at all."""
    rng = np.random.default_rng(seed)
    adj = np.zeros((n, n), dtype=bool)
    for k in range(n):
        if rng.random() < 0.1:
            continue
        for _ in range(1 + rng.poisson(5)):
            near = (k // width) * width + int(rng.integers(0, width))
            adj[k, near if rng.random() < 0.75 else int(n * rng.random() ** 3)] = True
    np.fill_diagonal(adj, False)
    return adj


def stationary(columns: np.ndarray) -> np.ndarray:
    """The stationary vector of a column-stochastic matrix, by one linear solve."""
    m = len(columns)
    system = columns - np.eye(m)
    system[-1] = 1.0
    rhs = np.zeros(m)
    rhs[-1] = 1.0
    return np.linalg.solve(system, rhs)


def pagerank_of(adj: np.ndarray, members: list[int], degree: str) -> np.ndarray:
    """PageRank of the pages ``members`` (uniform teleport over them): a page's links are
    split over its out-degree (inside ``members`` for ``within``, every link for ``all``);
    what does not stay inside, and a page with no out-degree, teleports uniformly."""
    inside = adj[np.ix_(members, members)].astype(float)
    m = len(members)
    columns = np.full((m, m), 1.0 / m)
    for k in range(m):
        out = inside[k].sum() if degree == "within" else adj[members[k]].sum()
        if out > 0:
            columns[:, k] = DAMPING * inside[k] / out + (1 - DAMPING * inside[k].sum() / out) / m
    return stationary(columns)


def direct_scores(adj: np.ndarray, members: list[int], f: np.ndarray, selector: str,
                  degree: str) -> dict[int, float]:
    """PF-Select (Σ f_k/(o_k + 1) over F's pages k linking to j, o_k the links of k inside F;
    with ``all``, f_k/O_k, O_k all of k's links) or the outlink count, per frontier page j."""
    in_f = set(members)
    scores: dict[int, float] = {}
    for k, page in enumerate(members):
        within = sum(1 for i in np.flatnonzero(adj[page]) if i in in_f)
        for j in np.flatnonzero(adj[page]):
            if j in in_f:
                continue
            if selector == "outlinks":
                share = 1.0
            elif degree == "within":
                share = f[k] / (within + 1)
            else:
                share = f[k] / adj[page].sum()
            scores[int(j)] = scores.get(int(j), 0.0) + share
    return scores


def direct_loop(adj: np.ndarray, local: list[int], selector: str, degree: str,
                sizes: list[int]) -> tuple[list[int], list[float]]:
    """The crawled pages in order and the L1 error of each round (round 0: local PageRank)."""
    truth = pagerank_of(adj, list(range(len(adj))), "within")[local]
    truth /= truth.sum()
    members, crawled, errors = list(local), [], []
    for r in range(len(sizes) + 1):
        f = pagerank_of(adj, members, degree)
        estimate = f[:len(local)] / f[:len(local)].sum()
        errors.append(float(np.abs(estimate - truth).sum()))
        if r == len(sizes):
            break
        scores = direct_scores(adj, members, f, selector, degree)
        # equal scores (to 10 digits) go by the selection's fixed order of ids
        chosen = sorted(scores, key=lambda j: (-float(f"{scores[j]:.10e}"),
                                               int(tie_order(np.array([j]))[0])))[:sizes[r]]
        if not chosen:
            break
        members += chosen
        crawled += chosen
    return crawled, errors


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("degree", ["within", "all"])
@pytest.mark.parametrize("selector", ["pf", "outlinks"])
def test_the_loop_equals_a_direct_implementation(seed: int, degree: str,
                                                 selector: str) -> None:
    adj = random_sites(seed)
    local = list(range(40, 80))  # one site: its links out lead to the others
    src, dst = np.nonzero(adj)
    graph = LinkGraph.from_edges(src, dst, len(adj))
    params = EstimateParams(budget=60, rounds=5, degree=degree, damping=DAMPING, tol=1e-14)
    truth = pagerank_of(adj, list(range(len(adj))), "within")[local]
    result = find_global_pagerank(np.array(local), graph_out_links(graph), selector, params,
                                  reference=truth)
    crawled, errors = direct_loop(adj, local, selector, degree,
                                  params.round_sizes().tolist())
    assert result.crawled.tolist() == crawled
    np.testing.assert_allclose([r.metrics["l1"] for r in result.history], errors, atol=1e-9)
    assert errors[-1] < errors[0]  # the crawl moved the estimate toward the global PageRank
