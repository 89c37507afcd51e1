"""Which frontier pages to crawl next (001 §5, DESIGN.md §5): SC-Select, PF-Select, outlink
count, random. A selector maps one round's ``DomainView`` and F's PageRank f to a score per
candidate (``view.candidates``); the loop crawls the k best.

SC-Select (001 Algorithm 3). Adding a candidate j gives the graph F_j = F ∪ {j}: j receives
the links u_j that F has to it, and j's own links into F, unknown until it is crawled, are
estimated by the average column of F, s = (in-degrees within F) / (links within F). Its
PageRank matrix P_{F_j} (``ranking.global_domain``'s chain on l + 1 pages) splits as
[[P₁₁, p₁₂], [p₂₁ᵀ, p₂₂]]; the stochastic complement of P₁₁,

    S_j = P₁₁ + p₁₂·p₂₁ᵀ / (1 − p₂₂),

is column stochastic and its stationary vector is exactly F_j's PageRank restricted to F and
renormalized. One power step from f estimates it, f̂_j = S_j·f, and j's score is its
influence on the local domain, ‖E_L(f̂_j − f)‖₁. Using f = P_F·f, the difference is

    f̂_j − f = x_j + b_j·s + c_j·e,

- x_j: the sparse leak of the siblings. With the ``within`` out-degree a page k that links to
  j now splits its mass over o_k + 1 links: x_j = −c·Σ_{k→j, o_k>0} f_k/(o_k(o_k+1))·F[:, k],
  non-zero only on the pages k also links to (zero with the ``all`` out-degree, whose
  degrees already count the link to j);
- with D = dᵀf the teleported mass of F (d_k = 1 − c·(share of k's links that stay in F),
  1 for a dangling page), δ_j the part of it that j's parents stop teleporting (the mass of
  its dangling parents under ``within``; φ_j under ``all``), the flow
  φ_j = Σ_{k→j} f_k/deg′_k (deg′ the out-degree once j is in: o_k + 1, or O_k), the
  scalar g_j = p₂₁ᵀf = c·φ_j + (D − c·δ_j)/(l + 1), the weight β of j's links into F
  (1 under ``within``; Σo/ΣO under ``all``) and p₂₂ = (1 − c·β)/(l + 1):
  b_j = g_j·c·β/(1 − p₂₂), c_j = (D − c·δ_j)/(l + 1) − D/l + g_j·p₂₂/(1 − p₂₂).

The paper's two candidate-independent vectors y (the leak of the random surfer) and z (where
the flow lands) are here e and s, and its one scalar per candidate ū_jᵀf is g_j. Since s ≥ 0,
‖E_L(b·s + c·e)‖₁ = b·h(c/b) with h(t) = Σ_{i∈L} |s_i + t|, one convex piecewise-linear
function of one scalar for all candidates: ``norms="table"`` tabulates it on ``table_size``
evenly spaced points over the candidates' range and interpolates (the paper's discretized
table, which uses the nearest point; h is exactly linear outside [−max s, −min s], where the
table is not needed); ``norms="exact"`` evaluates it from the sorted s and its prefix sums
(the paper's unpublished O(log l) variant). The sibling terms then correct the few entries
where x_j ≠ 0: |x + b·s + c| − |b·s + c| summed over them. All candidates cost
O(|F| + links + Σ_{k ∈ F} o_k^L·(links from k to the frontier)) per round, the last term
being the paper's nested loop over siblings.

SC-Select with ``links="learned"`` (an extension of the paper's estimate). The paper estimates
j's unknown links into F "as the expectation over inlink counts among the set of already
crawled pages" and notes it "may not reflect the true inlinks from that page" (001 §5.1);
DESIGN.md §5 takes the average column of all of F, L included. L's pages link mostly to each
other, so that column sends most of a new page's links into L, the same share ρ̄ for every
candidate, and what sets the candidates apart is mostly their inflow g_j: the selection
follows the pages F's PageRank flows to most, on a real web often hubs of other sites that
rarely link back (measured on LAW cnr-2000: README, ``global_pagerank``). ``learned`` takes
both parts of the estimate from the out-of-scope pages crawled so far, pages like j: s and β
are the average column of the crawled pages (so ρ̄ is the share of their counted links that
land in L), and each candidate's own share ρ_j comes from the crawled pages beside it: a page
p of F shows how often the crawled pages it links to link into L, q̄_p = (Σ q_c + ρ̄) /
(crawled children + 1) with q_c = c's links into L / its out-degree (one pseudo-observation
of ρ̄), and ρ_j is the mean q̄_p over j's parents p. j's flow into L is then b_j·(ρ_j/ρ̄)·s on
L: the same formulas with b_j scaled, one table and one sibling pass for all candidates.
Under ``within`` this is exactly SC-Select for a page whose column puts ρ_j on L (spread as
s) and 1 − ρ_j on the rest of F. Until a crawled page links inside F, s, β and ρ̄ are the
paper's (all of F) and only the siblings' evidence applies; before the first crawl there is
none, and the scores are the paper's.

PF-Select scores φ_j (001 §5.3: only the flow term, f_k normalized by o_k + 1, or by O_k under
``all``); outlink count scores the number of pages of F linking to j; random draws uniformly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import sparse

from ranking.global_domain import DomainView

NORMS = ("table", "exact")
LINK_ESTIMATES = ("average", "learned")
TABLE_SIZE = 1000
MAX_PRODUCTS = 1 << 23  # sibling products per block (bounds the memory of one block)
TIE_RELATIVE = 1e-12  # scores this close (relative) are equal: ``top_candidates``

Selector = Callable[[DomainView, np.ndarray, np.random.Generator], np.ndarray]


def flows(view: DomainView, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(φ, δ) per candidate (module doc): the PageRank flowing into j once it joins F, and
    the teleported mass of F that its parents stop teleporting."""
    count = len(view.candidates)
    k, j = view.front_src, view.front_cand
    if view.degree == "within":
        o = view.out_within[k]
        phi = np.bincount(j, weights=f[k] / (o + 1.0), minlength=count)
        delta = np.bincount(j, weights=np.where(o == 0, f[k], 0.0), minlength=count)
        return phi, delta
    phi = np.bincount(j, weights=f[k] / view.out_all[k], minlength=count)
    return phi, phi


def pf_scores(view: DomainView, f: np.ndarray,
              rng: np.random.Generator | None = None) -> np.ndarray:
    """PF-Select: the PageRank flow φ_j into each candidate."""
    return flows(view, f)[0]


def outlink_scores(view: DomainView, f: np.ndarray | None = None,
                   rng: np.random.Generator | None = None) -> np.ndarray:
    """Outlink count: how many pages of F link to each candidate."""
    return np.bincount(view.front_cand, minlength=len(view.candidates)).astype(np.float64)


def random_scores(view: DomainView, f: np.ndarray | None,
                  rng: np.random.Generator) -> np.ndarray:
    """Random: a uniform draw per candidate."""
    return rng.random(len(view.candidates))


def estimating_links(view: DomainView, links: str) -> tuple[np.ndarray, np.ndarray]:
    """(link mask, page mask): whose links estimate a candidate's: all of F (``average``),
    or the crawled pages once one of them links inside F (``learned``; module doc)."""
    if links == "learned":
        from_crawled = view.src >= view.n_local
        if from_crawled.any():
            return from_crawled, np.arange(view.size) >= view.n_local
    return np.ones(len(view.src), dtype=bool), np.ones(view.size, dtype=bool)


def flow_vector(view: DomainView, links: str = "average") -> tuple[np.ndarray, float]:
    """(s, β): where j's estimated links land in F (sum 1) and their weight (module doc)."""
    l = view.size
    from_links, pages = estimating_links(view, links)
    indegree = np.bincount(view.dst[from_links], minlength=l).astype(np.float64)
    total = float(indegree.sum())
    s = indegree / total if total > 0 else np.full(l, 1.0 / l)
    if view.degree == "within":
        return s, 1.0
    counted = float(view.out_all[pages].sum())
    return s, (float(view.out_within[pages].sum()) / counted if counted > 0 else 1.0)


def teleported_mass(view: DomainView, f: np.ndarray) -> float:
    """D = dᵀf: the mass F teleports per step, over c (module doc)."""
    c, deg = view.damping, view.out_degree()
    share = np.divide(view.out_within, deg, out=np.zeros(view.size), where=deg > 0)
    return float(((1.0 - c * share) * f).sum())


def dense_coefficients(view: DomainView, f: np.ndarray, links: str = "average"
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(b, c, s, β): f̂_j − f = x_j + b_j·s + c_j·e for every candidate (module doc)."""
    c, l = view.damping, view.size
    s, beta = flow_vector(view, links)
    total = teleported_mass(view, f)
    phi, delta = flows(view, f)
    rest = (total - c * delta) / (l + 1)
    g = c * phi + rest
    p22 = (1.0 - c * beta) / (l + 1)
    b = g * c * beta / (1.0 - p22)
    shift = rest - total / l + g * p22 / (1.0 - p22)
    return b, shift, s, beta


def sibling_weights(view: DomainView, f: np.ndarray) -> np.ndarray:
    """w_k = f_k/(o_k(o_k + 1)) per frontier link k -> j (0 when o_k = 0, and under ``all``):
    x_j = −c·Σ_{k→j} w_k·F[:, k]."""
    if view.degree != "within":
        return np.zeros(len(view.front_src))
    o = view.out_within[view.front_src].astype(np.float64)
    return np.divide(f[view.front_src], o * (o + 1.0), out=np.zeros_like(o), where=o > 0)


class AbsSums:
    """h(t) = Σ_i |s_i + t| for a fixed s, from its sorted values and prefix sums."""

    def __init__(self, s: np.ndarray) -> None:
        self.sorted = np.sort(s)
        self.prefix = np.concatenate([[0.0], np.cumsum(self.sorted)])

    def __call__(self, t: np.ndarray) -> np.ndarray:
        n = len(self.sorted)
        below = np.searchsorted(self.sorted, -t, side="right")  # s_i + t <= 0
        low = self.prefix[below]
        return (self.prefix[-1] - low + t * (n - below)) - (low + t * below)

    def table(self, t: np.ndarray, size: int) -> np.ndarray:
        """h(t) from a table of ``size`` evenly spaced points over the part of t's range
        where h bends, linearly interpolated; exact where h is linear."""
        values = self(t)
        bends = (t > -self.sorted[-1]) & (t < -self.sorted[0])
        if bends.any() and size >= 2:
            lo, hi = float(t[bends].min()), float(t[bends].max())
            grid = np.linspace(lo, hi, size)
            values[bends] = np.interp(t[bends], grid, self(grid))
        return values


def link_back_shares(view: DomainView) -> tuple[np.ndarray, float]:
    """(ρ_j per candidate, ρ̄): the share of j's links estimated to land in L, from the
    crawled pages beside it, and the crawled pages' share (module doc, ``learned``)."""
    l, local = view.size, view.n_local
    degree = view.out_degree().astype(np.float64)
    into_local = np.bincount(view.src[view.dst < local], minlength=l).astype(np.float64)
    _, pages = estimating_links(view, "learned")
    counted = float(degree[pages].sum())
    rho_bar = float(into_local[pages].sum()) / counted if counted > 0 else 0.0
    q = np.divide(into_local, degree, out=np.zeros(l), where=degree > 0)
    crawled_child = view.dst >= local
    parents = view.src[crawled_child]
    seen = np.bincount(parents, weights=q[view.dst[crawled_child]], minlength=l)
    children = np.bincount(parents, minlength=l)
    per_parent = (seen + rho_bar) / (children + 1.0)
    count = len(view.candidates)
    total = np.bincount(view.front_cand, weights=per_parent[view.front_src], minlength=count)
    parent_links = np.bincount(view.front_cand, minlength=count)
    return (np.divide(total, parent_links, out=np.full(count, rho_bar),
                      where=parent_links > 0), rho_bar)


def sc_scores(view: DomainView, f: np.ndarray, rng: np.random.Generator | None = None, *,
              norms: str = "table", table_size: int = TABLE_SIZE,
              links: str = "average", max_products: int = MAX_PRODUCTS) -> np.ndarray:
    """SC-Select: ‖E_L(f̂_j − f)‖₁ for every candidate j (module doc); ``links``: j's
    unknown links estimated by the average column of F (DESIGN.md §5) or ``learned`` from
    the crawled pages."""
    if norms not in NORMS:
        raise ValueError(f"norms={norms!r} is unknown; use one of {NORMS}")
    if links not in LINK_ESTIMATES:
        raise ValueError(f"links={links!r} is unknown; use one of {LINK_ESTIMATES}")
    b, shift, s, _ = dense_coefficients(view, f, links)
    if links == "learned":
        rho, rho_bar = link_back_shares(view)
        if rho_bar > 0:
            b = b * (rho / rho_bar)
    local = view.n_local
    h = AbsSums(s[:local])
    safe = np.where(b > 0, b, 1.0)
    t = shift / safe
    hv = h.table(t, table_size) if norms == "table" else h(t)
    scores = np.where(b > 0, b * hv, local * np.abs(shift))
    if view.degree == "within":
        scores += sibling_corrections(view, f, b, shift, s, max_products)
    return scores


def sibling_corrections(view: DomainView, f: np.ndarray, b: np.ndarray, shift: np.ndarray,
                        s: np.ndarray, max_products: int = MAX_PRODUCTS) -> np.ndarray:
    """Σ_{i ∈ L, x_j[i] ≠ 0} |x_j[i] + b_j·s_i + c_j| − |b_j·s_i + c_j| per candidate j."""
    count, local, c = len(view.candidates), view.n_local, view.damping
    out = np.zeros(count)
    w = sibling_weights(view, f)
    keep = w > 0
    if not keep.any():
        return out
    # Uᵀ: candidate j -> its parents k (weight w_k); Aᵀ: page k -> its children in L
    ut = sparse.csr_matrix((w[keep], (view.front_cand[keep], view.front_src[keep])),
                           shape=(count, view.size))
    into_local = view.dst < local
    at = sparse.csr_matrix((np.ones(int(into_local.sum())),
                            (view.src[into_local], view.dst[into_local])),
                           shape=(view.size, local))
    fanout = np.diff(at.indptr)
    per_row = np.bincount(view.front_cand[keep], weights=fanout[view.front_src[keep]],
                          minlength=count)
    cuts = np.searchsorted(np.cumsum(per_row), np.arange(max_products, per_row.sum(),
                                                          max_products))
    bounds = np.unique(np.concatenate([[0], cuts, [count]]))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        block = (ut[lo:hi] @ at).tocoo()
        j, i = block.row + lo, block.col
        base = b[j] * s[i] + shift[j]
        delta = np.abs(base - c * block.data) - np.abs(base)
        out += np.bincount(j, weights=delta, minlength=count)
    return out


def sc_one_step(view: DomainView, f: np.ndarray, candidate: int) -> np.ndarray:
    """f̂_j = S_j·f for one candidate index j (all of F), from the same decomposition."""
    b, shift, s, _ = dense_coefficients(view, f)
    w = sibling_weights(view, f)
    parents = view.front_cand == candidate
    x = np.zeros(view.size)
    for k, wk in zip(view.front_src[parents], w[parents]):
        if wk > 0:
            x[view.dst[view.src == k]] -= view.damping * wk
    return f + x + b[candidate] * s + shift[candidate]


def sc_learned_scores(view: DomainView, f: np.ndarray,
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """SC-Select with each candidate's unknown links learned from the crawled pages."""
    return sc_scores(view, f, rng, links="learned")


SELECTORS: dict[str, Selector] = {"sc": sc_scores, "sc_learned": sc_learned_scores,
                                  "pf": pf_scores, "outlinks": outlink_scores,
                                  "random": random_scores}


def resolve_selector(selector: str | Selector) -> Selector:
    if callable(selector):
        return selector
    if selector not in SELECTORS:
        raise ValueError(f"selector={selector!r} is unknown; use one of {tuple(SELECTORS)}")
    return SELECTORS[selector]


def tie_order(ids: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random key per page id (SplitMix64's finalizer). Equal scores are
    ordered by it, so that the numbering of pages (URL order in LAW's graphs, where a lower
    id means the same site and folder; discovery order in the store) does not steer the
    crawl, while the same ids always come out in the same order."""
    z = np.asarray(ids, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def top_candidates(view: DomainView, scores: np.ndarray, k: int) -> np.ndarray:
    """The ids of the k best candidates: highest score first; scores within ``TIE_RELATIVE``
    of each other (the solver's last digits: structurally identical pages) are ties, broken
    by ``tie_order``. On a real web the cut falls inside such a tie in nearly every round."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) != len(view.candidates):
        raise ValueError(f"the selector gave {len(scores)} scores for "
                         f"{len(view.candidates)} candidates")
    k = min(k, len(scores))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    pool = np.arange(len(scores))
    if k < len(scores):  # only the candidates at or near the k-th score can be chosen
        cut = np.partition(scores, len(scores) - k)[len(scores) - k]
        pool = np.flatnonzero(scores >= cut - TIE_RELATIVE * abs(cut))
    ranked = pool[np.argsort(-scores[pool], kind="stable")]
    values = scores[ranked]
    with np.errstate(invalid="ignore"):  # -inf - -inf (two excluded candidates) is a tie
        apart = values[:-1] - values[1:] > TIE_RELATIVE * np.abs(values[:-1])
    group = np.concatenate([[0], np.cumsum(apart)])
    ids = view.candidates[ranked]
    return ids[np.lexsort((tie_order(ids), group))[:k]]
