"""Which page OPIC visits next, and the compiled visits (000 §3 "On convergence", 004 §2;
DESIGN.md §5 "OPIC").

Selection policies (all fair on a graph closed by the virtual page: every page is read
infinitely often):

- ``greedy``: the page with the most cash (ties: the lowest id). Exact, one page at a time,
  also in batch: a tournament tree over the cash gives the maximum after each visit in
  O(log n), so no top-k approximation is needed (1.2M visits/s on 100k pages, 0.65M on 1M,
  10 children per page, on the 2-core benchmark machine).
- ``random``: uniform over the known pages, from a seeded ``numpy.random.Generator``.
- ``cycle``: a fixed order (ids 0..n−1, or a given permutation) read round and round.

In a crawl, pick one page at a time (``OpicState.greedy_pick(candidates)``, ``random_pick``)
and call ``OpicState.visit(page, children)``. For a benchmark or to replay a stored graph, the
``visit_*`` functions run many visits in the compiled kernel, page i's children being row i
of a ``LinkGraph`` over exactly the state's pages.

The kernels (numba, cached on disk beside this file like ``ranking.gauss_seidel``) all live
here, for every visit path, because numba's cache is invalidated only by changes to the
calling function's own file: a kernel calling a kernel of another file could run stale code.
``OpicState`` (``ranking.opic``) reaches them through ``visit_rows_kernel`` and
``flush_virtual_kernel``; the state's scalars and parameters are float64 arrays indexed by
the constants below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from ranking.graph import LinkGraph

if TYPE_CHECKING:
    from ranking.opic import OpicState

# the state's scalars (one float64 array shared with the kernels)
TOTAL, CLOCK, VIRTUAL, OFFSET, VIRTUAL_HISTORY, RECENT = range(6)
# the kernels' parameters (one float64 array, ``OpicParams.kernel_array``)
P_DAMPING, P_FLUSH, P_WINDOW, P_ADAPTIVE, P_DEFAULT, P_WEIGHT = range(6)

SELECTIONS = ("greedy", "random", "cycle")
CHUNK = 1 << 16  # visits generated per call of the kernel (bounds the order arrays)


def random_pick(state: OpicState, rng: np.random.Generator,
                candidates: object | None = None) -> int:
    """A page drawn uniformly among ``candidates`` (None = all known pages)."""
    if candidates is None:
        if state.n == 0:
            raise ValueError("random_pick: no known pages; add_pages first")
        return int(rng.integers(state.n))
    ids = state.page_ids(candidates, "candidates")
    if ids.size == 0:
        raise ValueError("random_pick: candidates is empty; give at least one page id")
    return int(ids[rng.integers(ids.size)])


def graph_rows(state: OpicState, graph: LinkGraph) -> tuple[np.ndarray, np.ndarray]:
    """The graph's CSR, checked to describe exactly the state's pages."""
    if not isinstance(graph, LinkGraph):
        raise ValueError(f"graph must be a ranking.graph.LinkGraph, got {type(graph).__name__}")
    if graph.n != state.n:
        raise ValueError(f"graph has {graph.n} pages but the OPIC state knows {state.n}; "
                         "add_pages (or rebuild the graph) so that they match")
    return graph.indptr, graph.indices


def _check_visits(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"count={count!r} must be a non-negative integer number of visits")
    return int(count)


def visit_greedy(state: OpicState, graph: LinkGraph, count: int) -> None:
    """``count`` visits, each of the page with the most cash."""
    indptr, indices = graph_rows(state, graph)
    count = _check_visits(count)
    if count == 0:
        return
    if state.n == 0:
        raise ValueError("visit_greedy: no known pages to visit; add_pages first")
    tree, leaves = _build_tree(state.n, state.kernel_buffers()[0])
    _visit_greedy(count, indptr, indices, tree, leaves, state.n, *state.kernel_buffers())


def visit_order(state: OpicState, graph: LinkGraph, pages: object) -> None:
    """Visit ``pages`` (ids) in the given order."""
    indptr, indices = graph_rows(state, graph)
    ids = state.page_ids(pages, "pages")
    visit_rows_kernel(state, ids, ids, indptr, indices)


def visit_random(state: OpicState, graph: LinkGraph, count: int,
                 rng: np.random.Generator) -> None:
    """``count`` visits of pages drawn uniformly (with replacement) by ``rng``."""
    indptr, indices = graph_rows(state, graph)
    left = _check_visits(count)
    while left > 0:
        pages = rng.integers(0, state.n, size=min(left, CHUNK), dtype=np.int64)
        visit_rows_kernel(state, pages, pages, indptr, indices)
        left -= len(pages)


def visit_cycle(state: OpicState, graph: LinkGraph, count: int, cursor: int = 0,
                order: np.ndarray | None = None) -> int:
    """``count`` visits going round ``order`` (a permutation of the ids; None = 0..n−1)
    from position ``cursor``; returns the position to continue from."""
    indptr, indices = graph_rows(state, graph)
    left = _check_visits(count)
    if order is not None:
        order = state.page_ids(order, "order")
        if len(order) != state.n or len(np.unique(order)) != state.n:
            raise ValueError(f"order must be a permutation of the {state.n} page ids")
    if state.n == 0:
        if left:
            raise ValueError("visit_cycle: no known pages to visit; add_pages first")
        return 0
    cursor = int(cursor) % state.n
    while left > 0:
        positions = (cursor + np.arange(min(left, CHUNK), dtype=np.int64)) % state.n
        pages = positions if order is None else order[positions]
        visit_rows_kernel(state, pages, pages, indptr, indices)
        cursor = int(positions[-1] + 1) % state.n
        left -= len(positions)
    return cursor


def visit_by(state: OpicState, graph: LinkGraph, selection: str, count: int, *,
             rng: np.random.Generator | None = None, cursor: int = 0) -> int:
    """``count`` visits under a named selection policy (``SELECTIONS``); ``rng`` is needed for
    ``random``; returns the cycle cursor to continue from (``cursor`` for the others)."""
    if selection == "greedy":
        visit_greedy(state, graph, count)
    elif selection == "random":
        if rng is None:
            raise ValueError("selection 'random' needs rng (a numpy.random.Generator, seeded)")
        visit_random(state, graph, count, rng)
    elif selection == "cycle":
        return visit_cycle(state, graph, count, cursor)
    else:
        raise ValueError(f"selection {selection!r} is unknown; use one of {SELECTIONS}")
    return cursor


# ---- compiled kernels ----------------------------------------------------------------------

def visit_rows_kernel(state: OpicState, pages: np.ndarray, rows: np.ndarray,
                      indptr: np.ndarray, indices: np.ndarray) -> None:
    """Visit pages[r] with the children of CSR row rows[r], in order (ids checked by the
    caller)."""
    _visit_rows(pages, rows, indptr, indices, state.n, *state.kernel_buffers())


def visit_one_kernel(state: OpicState, page: int, children: np.ndarray) -> None:
    """Visit ``page`` with the int64 ids ``children`` (ids checked by the caller)."""
    _visit_one(page, children, state.n, *state.kernel_buffers())


def flush_virtual_kernel(n: int, stored_cash: np.ndarray, scalars: np.ndarray) -> None:
    """Hand V's cash to the n pages as one offset (``ranking.opic``)."""
    _flush(n, stored_cash, scalars)


@njit(cache=True, nogil=True)
def _flush(n, cash, sc):  # noqa: ANN001
    """V's cash to every page as one offset; fold the offset into the stored cash when it
    exceeds the mean page cash (keeps rounding at the scale of the pages' own cash)."""
    sc[OFFSET] += sc[VIRTUAL] / n
    sc[VIRTUAL_HISTORY] += sc[VIRTUAL]
    sc[VIRTUAL] = 0.0
    if sc[OFFSET] >= sc[TOTAL] / n:
        offset = sc[OFFSET]
        for j in range(n):
            cash[j] += offset
        sc[OFFSET] = 0.0


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _visit(i, lo, hi, indices, n, cash, history, pending, born, visits,  # noqa: ANN001
           bao_h, bao_g, ring_cash, ring_time, ring_len, ring_head, sc, prm):  # noqa: ANN001
    """One visit of page i with children indices[lo:hi] (module doc)."""
    offset = sc[OFFSET]
    x = cash[i] + offset
    g = sc[CLOCK]
    q = max(x - pending[i], 0.0)  # the inflow: what i received rather than was given
    pending[i] = 0.0
    history[i] += x
    sc[CLOCK] = g + x
    cash[i] = -offset
    k = hi - lo
    if k > 0:
        share = prm[P_DAMPING] * x / k
        for e in range(lo, hi):
            cash[indices[e]] += share
        sc[VIRTUAL] += x - share * k
    else:
        sc[VIRTUAL] += x
    if prm[P_ADAPTIVE] > 0.0:
        _record(i, q, g, n, born[i], visits[i], bao_h, bao_g, ring_cash, ring_time,
                ring_len, ring_head, sc, prm)
    visits[i] += 1
    if sc[VIRTUAL] >= prm[P_FLUSH] * sc[TOTAL] / n:
        _flush(n, cash, sc)


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _record(i, q, g, n, born, visits, bao_h, bao_g, ring_cash, ring_time,  # noqa: ANN001
            ring_len, ring_head, sc, prm):  # noqa: ANN001
    """Adaptive OPIC histories of a visit with inflow q at clock g (``ranking.opic_adaptive``)."""
    window = prm[P_WINDOW]
    delta = g - bao_g[i]
    if delta >= window:
        bao_h[i] = q * window / delta
    else:
        bao_h[i] = bao_h[i] * (window - delta) / window + q
    bao_g[i] = g
    m = ring_cash.shape[1]
    head = ring_head[i]
    if ring_len[i] == m:  # full: records r1..rm from the oldest, at head, head+1, ...
        r2, r3, r4 = (head + 1) % m, (head + 2) % m, (head + 3) % m
        if ring_time[i, r2] > g - window:
            # all of (t1, t2] .. is still in use: group (t2, t3] and (t3, t4] into one
            # interval (000 §3, "group several consecutive measures into one") and shift
            # r1, r2 up a slot; the straddling (t1, t2] stays short and leaves the window
            ring_cash[i, r4] += ring_cash[i, r3]
            ring_cash[i, r3] = ring_cash[i, r2]
            ring_time[i, r3] = ring_time[i, r2]
            ring_time[i, r2] = ring_time[i, head]
        ring_len[i] -= 1  # (else (t1, t2] lies before the window: drop r1)
    ring_cash[i, head] = q
    ring_time[i, head] = g
    ring_head[i] = (head + 1) % m
    ring_len[i] += 1
    if visits == 0 and prm[P_DEFAULT] < 0.0 and g > born:  # learn the default history
        w = prm[P_WEIGHT]
        sc[RECENT] = (1.0 - w) * sc[RECENT] + w * (q / (g - born) * n)


@njit(cache=True, nogil=True, boundscheck=False)
def _visit_rows(pages, rows, indptr, indices, n, cash, history, pending, born,  # noqa: ANN001
                visits, bao_h, bao_g, ring_cash, ring_time, ring_len, ring_head,  # noqa: ANN001
                sc, prm):  # noqa: ANN001
    """Visit pages[r] with the children of CSR row rows[r], for r in order."""
    for r in range(pages.shape[0]):
        row = rows[r]
        _visit(pages[r], indptr[row], indptr[row + 1], indices, n, cash, history, pending,
               born, visits, bao_h, bao_g, ring_cash, ring_time, ring_len, ring_head, sc, prm)


# The GIL is kept: a visit takes about a microsecond, and releasing the GIL around it
# would hand the interpreter to one of the crawl's fetch threads at every page.
@njit(cache=True, nogil=False, boundscheck=False)
def _visit_one(i, children, n, cash, history, pending, born, visits, bao_h,  # noqa: ANN001
               bao_g, ring_cash, ring_time, ring_len, ring_head, sc, prm):  # noqa: ANN001
    """One visit of page i with the given children (the crawl's: one per fetch)."""
    _visit(i, 0, children.shape[0], children, n, cash, history, pending, born, visits,
           bao_h, bao_g, ring_cash, ring_time, ring_len, ring_head, sc, prm)


@njit(cache=True, nogil=True, boundscheck=False)
def _visit_greedy(count, indptr, indices, tree, leaves, n, cash, history,  # noqa: ANN001
                  pending, born, visits, bao_h, bao_g, ring_cash, ring_time,  # noqa: ANN001
                  ring_len, ring_head, sc, prm):  # noqa: ANN001
    """``count`` visits, each of the page with the most cash (ties: the lowest id), found at
    the root of a tournament tree over the stored cash (the offset is common to all pages):
    after a visit the page's own path is replayed (its cash fell to 0) and each child
    climbs only while it beats the winner above it (its cash rose)."""
    for _ in range(count):
        i = tree[1]
        lo, hi = indptr[i], indptr[i + 1]
        _visit(i, lo, hi, indices, n, cash, history, pending, born, visits, bao_h, bao_g,
               ring_cash, ring_time, ring_len, ring_head, sc, prm)
        node = (leaves + i) >> 1
        while node >= 1:
            tree[node] = _winner(tree[2 * node], tree[2 * node + 1], cash)
            node >>= 1
        for e in range(lo, hi):
            j = indices[e]
            node = (leaves + j) >> 1
            while node >= 1:
                w = tree[node]
                if w != j:
                    if _winner(j, w, cash) != j:
                        break
                    tree[node] = j
                node >>= 1


@njit(cache=True, nogil=True, inline="always")
def _winner(a, b, cash):  # noqa: ANN001
    """The page with more cash, ties to the lower id; -1 is an empty leaf."""
    if b < 0:
        return a
    if a < 0:
        return b
    if cash[a] > cash[b] or (cash[a] == cash[b] and a < b):
        return a
    return b


@njit(cache=True, nogil=True)
def _build_tree(n, cash):  # noqa: ANN001
    leaves = 1
    while leaves < n:
        leaves *= 2
    tree = np.full(2 * leaves, -1, np.int64)
    for i in range(n):
        tree[leaves + i] = i
    for node in range(leaves - 1, 0, -1):
        tree[node] = _winner(tree[2 * node], tree[2 * node + 1], cash)
    return tree, leaves
