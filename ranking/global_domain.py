"""The growing supergraph F of a local domain L, its frontier, and its PageRank (001 §4–5,
DESIGN.md §5 "Global PageRank of a local domain").

F starts as the local domain L (n pages, the scope) and grows by "crawled" out-of-scope pages.
Crawling a page reveals its out-links and nothing else; the frontier F_out is the set of
pages outside F that some page of F links to. Page ids are any non-negative integers (node
ids of a global graph, URL ids of the metadata store); local ids number F's pages in the
order they joined it, L first, so ``local id < n`` means "in L".

The graph is the paper's model: 0/1 links, no self-links ("we do not allow self-links in this
framework"), so a revealed list of out-links is deduplicated and loses its self-link.

PageRank of F, uniform teleport over F, damping c, with one of two out-degrees (``degree``):
- ``within`` (the paper's: D_F makes F·D_F⁻¹ column stochastic, so a page's out-degree counts
  only its links inside F; a page with none is dangling and teleports uniformly, "replacing
  each zero column of our adjacency matrix with the uniform vector", 001 §6.1);
- ``all``: a page's out-degree counts all its known links, those leaving F too; the share of
  the links that leave F teleports uniformly over F like a dangling page's mass. The matrix
  is P = c·M + e·dᵀ/|F| with M[i, k] = 1/O_k when k → i, d_k = 1 − c·o_k/O_k.
Both are column-stochastic Markov chains with uniform teleport, which SC-Select's stochastic
complement needs. They are solved with the ranking package's own sweep
(``ranking.sweep.solve_fixpoint``, the ``teleport`` importance equation), warm-started from
the previous round's vector: ``all`` adds one sink page that receives the links leaving F
and is dangling with teleport weight 0, so its mass returns uniformly to F.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ranking.graph import LinkGraph
from ranking.importance import importance_fixpoint
from ranking.sweep import SolverParams, solve_fixpoint

DEGREES = ("within", "all")

# ids (int64[k]) -> their out-links as a CSR: (indptr int64[k+1], indices int64[...])
OutLinks = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def check_degree(degree: str) -> None:
    if degree not in DEGREES:
        raise ValueError(f"degree={degree!r} is unknown; use one of {DEGREES} ('within': "
                         "out-degree counted inside F, the paper's; 'all': every known link)")


def graph_out_links(graph: LinkGraph) -> OutLinks:
    """Out-links read from a global graph (the benchmark's and the CLI's ground truth)."""

    def reveal(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= graph.n):
            raise ValueError(f"page ids must be in [0, {graph.n}) for this graph")
        starts, ends = graph.indptr[ids], graph.indptr[ids + 1]
        lengths = ends - starts
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        # positions of every link of every requested row, without a Python loop
        offsets = np.arange(int(indptr[-1]), dtype=np.int64) - np.repeat(indptr[:-1], lengths)
        return indptr, graph.indices[np.repeat(starts, lengths) + offsets].astype(np.int64)

    return reveal


def simple_links(ids: np.ndarray, indptr: np.ndarray,
                 indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source row, destination id) of the links of ``ids``: one per distinct pair, no
    self-links (the paper's 0/1 graph)."""
    rows = np.repeat(np.arange(len(ids), dtype=np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    keep = dst != ids[rows]
    rows, dst = rows[keep], dst[keep]
    if rows.size:
        order = np.lexsort((dst, rows))
        rows, dst = rows[order], dst[order]
        first = np.ones(rows.size, dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (dst[1:] != dst[:-1])
        rows, dst = rows[first], dst[first]
    return rows, dst


def simple_graph(graph: LinkGraph) -> LinkGraph:
    """The same pages with the paper's 0/1 links (no duplicates, no self-links): the graph
    whose PageRank a global estimate is measured against."""
    rows, dst = simple_links(np.arange(graph.n, dtype=np.int64), graph.indptr, graph.indices)
    return LinkGraph.from_edges(rows, dst, graph.n)


@dataclass(frozen=True)
class DomainView:
    """One round's snapshot of F and its frontier, in local ids (module doc).

    ``ids``: int64[l] page ids of F, L first (``n_local`` pages). ``src``/``dst``: int64
    links inside F (local ids, k -> i). ``out_within``: o_k, links of k inside F;
    ``out_all``: O_k, all of k's known links. ``candidates``: int64[C] frontier page ids,
    increasing; ``front_src``/``front_cand``: the links k -> candidates[j] (local k, index j).
    ``degree`` and ``damping`` define F's PageRank matrix (module doc)."""

    ids: np.ndarray
    n_local: int
    src: np.ndarray
    dst: np.ndarray
    out_within: np.ndarray
    out_all: np.ndarray
    candidates: np.ndarray
    front_src: np.ndarray
    front_cand: np.ndarray
    degree: str
    damping: float

    @property
    def size(self) -> int:
        return len(self.ids)

    def out_degree(self) -> np.ndarray:
        """The out-degree PageRank divides by: o_k (``within``) or O_k (``all``)."""
        return self.out_within if self.degree == "within" else self.out_all


class Subgraph:
    """F: the local domain plus the crawled pages, with every out-link revealed so far."""

    def __init__(self, local_ids: object, reveal: OutLinks) -> None:
        ids = np.asarray(local_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("the local domain needs at least one page id (a 1-D array)")
        if int(ids.min()) < 0:
            raise ValueError("page ids must be >= 0")
        if np.unique(ids).size != ids.size:
            raise ValueError("the local domain lists a page id twice")
        self.n_local = int(ids.size)
        self._reveal = reveal
        self._ids: list[np.ndarray] = []
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._size = 0
        self.add(ids)

    @property
    def size(self) -> int:
        return self._size

    @property
    def ids(self) -> np.ndarray:
        return np.concatenate(self._ids)

    def add(self, ids: np.ndarray) -> None:
        """Crawl ``ids`` (pages outside F): reveal their out-links and make them part of F."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        indptr, indices = self._reveal(ids)
        rows, dst = simple_links(ids, np.asarray(indptr), np.asarray(indices))
        self._ids.append(ids)
        self._src.append(rows + self._size)
        self._dst.append(dst)
        self._size += int(ids.size)

    def view(self, degree: str = "within", damping: float = 0.85) -> DomainView:
        """F and its frontier now, in local ids (linear in |F| + links, plus one sort)."""
        check_degree(degree)
        ids = self.ids
        src, dst = np.concatenate(self._src), np.concatenate(self._dst)
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        pos = np.minimum(np.searchsorted(sorted_ids, dst), len(ids) - 1)
        inside = sorted_ids[pos] == dst
        l = len(ids)
        out_all = np.bincount(src, minlength=l)
        out_within = np.bincount(src[inside], minlength=l)
        candidates, front_cand = np.unique(dst[~inside], return_inverse=True)
        return DomainView(ids, self.n_local, src[inside], order[pos[inside]], out_within,
                          out_all, candidates, src[~inside], front_cand.astype(np.int64),
                          degree, damping)


def subgraph_pagerank(view: DomainView, start: np.ndarray | None = None, *,
                      tol: float = 1e-10, max_iter: int = 500) -> tuple[np.ndarray, int]:
    """The PageRank f of F (sum 1, module doc; damping ``view.damping``) and the sweeps it
    took. ``start``: the previous round's vector for F's first pages (the new ones start at
    its mean). ``tol``: the sweep's residual (``ranking.sweep``)."""
    params = SolverParams(damping=view.damping, tol=tol, max_iter=max_iter)
    l = view.size
    if view.degree == "within":
        graph = LinkGraph.from_edges(view.src, view.dst, l)
        personalization: float | np.ndarray = 1.0 / l
        nodes = l
    else:  # the sink page l receives one link per link leaving F, and teleports it back
        leaks = view.out_all - view.out_within
        graph = LinkGraph.from_edges(
            np.concatenate([view.src, np.repeat(np.arange(l), leaks)]),
            np.concatenate([view.dst, np.full(int(leaks.sum()), l)]), l + 1)
        personalization = np.append(np.full(l, 1.0 / l), 0.0)
        nodes = l + 1
    x0 = np.full(nodes, 1.0 / l)
    if start is not None and len(start):
        x0[:len(start)] = start
        x0[len(start):l] = float(np.mean(start))
    if nodes > l:
        x0[l] = 0.0
    fixpoint = importance_fixpoint(graph, params.damping, personalization, "teleport")
    pattern = graph.transpose()
    result = solve_fixpoint(pattern.indptr, pattern.indices, fixpoint, x0, params)
    f = result.values[:l].copy()
    return f / f.sum(), result.iterations
