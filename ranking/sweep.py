"""Sweeps of a fixpoint x = c·s_out ⊙ (P·(s_in ⊙ x)) + (1−c)·E (003 §5.3).

P is a 0/1 CSR pattern (rows = the pages being updated), s_in and s_out are per-page scale
vectors (1/OutDeg for the direct and the inverse ranking), E the teleport vector; the mass of
the pages without out-links is moved as described below.

Gauss-Seidel (003 §5.3, "Gauss-Seidel Iterations", ``gauss_seidel=True``, the default): point
by point with the compiled kernel of ``ranking.gauss_seidel``; each page's new value is used by
the very next row. On LAW cnr-2000 it needs about half of Jacobi's sweeps for all three
equations (53/102 teleport, 78/154 paper, 56/108 interest at residual 1e-9).

Jacobi (``gauss_seidel=False``) keeps the old vector for the whole sweep; it reproduces the
paper's iteration (eq. 6–7) exactly and serves as a reference. It runs over row blocks with
scipy's compiled ``csr_matvec``, which needs a value array: instead of storing one value per
link (8 more bytes per link to stream), the rows are cut into blocks of about ``block_links``
links; each block keeps a local int32 row pointer and all blocks share one small array of
ones that stays in the L2 cache. A sweep then streams 4 bytes of index per link plus the
gathers of the pre-scaled vector: the paper's pattern-matrix floor, which the Gauss-Seidel
kernel also keeps (the out-of-core path sweeps its slices with that kernel too).

Mass of the pages without out-links (``Fixpoint.dangling``, mass δ). ``teleport`` variant:
the sweep is the normalized equation x = c·M·x + (c·δ + 1−c)·E, as PRPACK does. ``paper``
variant (``spread_along_x``): eq. 7's renormalization r_k spreads δ along x itself, i.e.
x = (c·M·x + (1−c)·E)/(1 − c·δ) for ‖x‖₁ = 1. Under Gauss-Seidel δ is kept current row by
row, so every row sees the present dangling mass. Sweeping the unnormalized linear system
z = c·M·z + (1−c)·E instead (same teleport solution after 1-normalization) is as fast under
Jacobi, but Gauss-Seidel then excites the slow mode of the total mass: on a random 1M-page
graph it needed 41 sweeps against 19.

Residual (the stopping rule), per sweep k:
- normalized iteration (paper and teleport variants, ‖x‖₁ = 1): ‖x_{k+1} − x_k‖₁. Under
  Gauss-Seidel it is measured before the end-of-sweep renormalization by 1/‖x̃_{k+1}‖₁ (a
  factor that tends to 1).
- linear iteration (inverse interest): ‖x_{k+1} − x_k‖₁ / ‖x_{k+1}‖₁, the L1 change of the
  1-normalized iterate to first order.
The residual is not the error: with a contraction rate λ per sweep the L1 error to the
fixpoint is about λ/(1−λ) times the residual (λ ≈ c = 0.85 on web graphs: ~5×). To get an
error below ε, use tol ≈ ε/10 (``tests/bench/pagerank.py`` measures the error of every
system against a high-precision reference). networkx's ``pagerank(tol=t)`` stops when the
L1 change is below N·t: pass ``tol = N·t`` to stop at the same point.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import _sparsetools as sparsetools

from ranking.gauss_seidel import PointGaussSeidel
from ranking.results import ConvergenceError, ProgressFn, RankResult, SweepProgress


@dataclass(frozen=True)
class SolverParams:
    """Damping c in (0, 1); stop when the residual (module doc) < ``tol``; at most ``max_iter``
    sweeps; Gauss-Seidel or Jacobi; about ``block_links`` links per row block."""

    damping: float = 0.85
    tol: float = 1e-8
    max_iter: int = 200
    gauss_seidel: bool = True
    block_links: int = 1 << 16

    def __post_init__(self) -> None:
        if not (isinstance(self.damping, (int, float)) and 0.0 < self.damping < 1.0):
            raise ValueError(f"damping={self.damping!r} is outside (0, 1); 0.85 is usual")
        if not (isinstance(self.tol, (int, float)) and math.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol={self.tol!r} must be a positive finite number")
        if not (isinstance(self.max_iter, int) and self.max_iter >= 1):
            raise ValueError(f"max_iter={self.max_iter!r} must be an integer >= 1")
        if not (isinstance(self.block_links, int) and self.block_links >= 1):
            raise ValueError(f"block_links={self.block_links!r} must be an integer >= 1")


class RowBlocks:
    """A 0/1 CSR (``indptr`` may start at any offset into ``indices``) cut into row blocks."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, n_cols: int,
                 block_links: int) -> None:
        rows = len(indptr) - 1
        base = int(indptr[0])
        targets = base + np.arange(block_links, int(indptr[-1]) - base, block_links)
        cuts = np.searchsorted(indptr, targets, side="left")
        row_caps = np.arange(0, rows, block_links)  # bounds the y buffer on link-less rows
        self.starts = np.unique(np.concatenate([[0], cuts, row_caps, [rows]])).astype(np.int64)
        self.n_cols = n_cols
        self._ptrs: list[np.ndarray] = []
        self._idx: list[np.ndarray] = []
        widest, longest = 1, 1
        for r0, r1 in zip(self.starts[:-1], self.starts[1:]):
            lo, hi = int(indptr[r0]), int(indptr[r1])
            self._ptrs.append((indptr[r0:r1 + 1] - lo).astype(np.int32))
            self._idx.append(indices[lo - base:hi - base])
            widest, longest = max(widest, hi - lo), max(longest, int(r1 - r0))
        self.ones = np.ones(widest)
        self.max_rows = longest

    def __len__(self) -> int:
        return len(self.starts) - 1

    def matvec_add(self, block: int, vector: np.ndarray, y: np.ndarray) -> np.ndarray:
        """y += P[block rows] @ vector (``y`` has the block's row count)."""
        ptr = self._ptrs[block]
        sparsetools.csr_matvec(len(ptr) - 1, self.n_cols, ptr, self._idx[block], self.ones,
                               vector, y)
        return y


@dataclass
class Fixpoint:
    """The equation's data for one ranking over all n pages (scales may be None = 1)."""

    name: str
    in_scale: np.ndarray | None
    out_scale: np.ndarray | None
    teleport: np.ndarray | float  # (1 − c)·E, already multiplied
    normalize: bool
    dangling: np.ndarray | None = None  # bool, pages without out-links
    spread_along_x: bool = False  # their mass goes along x (paper), else along E (teleport)

    @property
    def teleports_dangling(self) -> bool:
        return self.dangling is not None and not self.spread_along_x


def solve_fixpoint(indptr: np.ndarray, indices: np.ndarray, fixpoint: Fixpoint,
                   x0: np.ndarray, params: SolverParams,
                   progress: ProgressFn | None = None) -> RankResult:
    """Sweep the pattern (row i = the pages feeding page i) until the residual < ``tol``.

    Gauss-Seidel sweeps point by point with the compiled kernel (``ranking.gauss_seidel``);
    Jacobi sweeps row blocks with ``csr_matvec``. Raises ConvergenceError after max_iter."""
    started = time.perf_counter()
    x = np.array(x0, dtype=np.float64)
    if fixpoint.dangling is not None:
        x /= x.sum()
    solver: _GaussSeidel | _Jacobi = (
        _GaussSeidel(indptr, indices, fixpoint, x, params.damping) if params.gauss_seidel
        else _Jacobi(indptr, indices, fixpoint, x, params))
    method = "gauss-seidel" if params.gauss_seidel else "jacobi"
    stall = Stall.at_damping(params.damping)
    start = x.copy() if params.gauss_seidel and fixpoint.spread_along_x else None
    residuals: list[float] = []
    for iteration in range(1, params.max_iter + 1):
        residual = solver.step()
        residuals.append(residual)
        if progress is not None:
            progress(SweepProgress(fixpoint.name, iteration, residual))
        if residual < params.tol:
            return RankResult(solver.values, iteration, residual, tuple(residuals),
                              time.perf_counter() - started, method)
        if start is not None and isinstance(solver, _GaussSeidel) and stall(residual):
            solver = _Jacobi(indptr, indices, fixpoint, start, params)
            method = "gauss-seidel, then jacobi"
    raise ConvergenceError(fixpoint.name, params.max_iter, residuals[-1], params.tol,
                           tuple(residuals))


@dataclass
class Stall:
    """Whether Gauss-Seidel has stopped converging: the lowest residual of the last
    ``sweeps`` sweeps is above ``factor`` times the lowest before them (oscillating, or
    creeping slower than 0.5 per 10 sweeps, where the power iteration of a web graph
    gains 0.2 at rate c = 0.85). The factor follows the damping (:meth:`at_damping`):
    healthy sweeps gain about c¹⁰ per 10, 0.60 at c = 0.95 (Gauss-Seidel on LAW cnr-2000
    gains 0.55–0.6), so a fixed 0.5 took them for a stall and restarted with the slower
    Jacobi: 2.5× the sweeps at c = 0.95, no convergence in 1,000 at 0.97.

    Why: the paper variant (δ spread along x) can fail under Gauss-Seidel. Its row
    equations divide by λ − c·M_ii with λ = 1 − c·δ the current eigenvalue estimate; where
    a page links only to itself and much mass sits on pages without out-links, λ comes
    close to c, so each row's change of δ swings that page by far more, and the sweeps
    oscillate or crawl. Jacobi, the power iteration of eq. 6–7, converges there (in 23 to
    51 sweeps on random 2,000- and 20,000-page graphs where Gauss-Seidel had not in 500);
    the solvers switch to it when this says so, starting again from the first iterate:
    with several such pages c is an eigenvalue of c·M + (1−c)·E·1ᵀ close to λ, the
    Gauss-Seidel iterate is full of its eigenvectors, and from there the power iteration
    crawls as slowly (3.6e-4 after 200 sweeps on one of those graphs)."""

    sweeps: int = 10
    factor: float = 0.5
    history: list[float] = field(default_factory=list)

    @classmethod
    def at_damping(cls, damping: float) -> Stall:
        """A stall is gaining less than max(0.5, c⁵) per 10 sweeps: half the rate the power
        iteration itself has at damping c (c¹⁰), 0.5 up to c = 0.87 as before."""
        return cls(factor=max(0.5, damping ** 5))

    def __call__(self, residual: float) -> bool:
        self.history.append(residual)
        if len(self.history) <= self.sweeps:
            return False
        return min(self.history[-self.sweeps:]) > self.factor * min(self.history[:-self.sweeps])


def _check_total(name: str, total: float) -> None:
    if total <= 0.0 or not math.isfinite(total):
        raise ValueError(f"{name}: the iterate vanished (sum {total}); "
                         "the personalization vector must have positive mass")


class _GaussSeidel:
    """Point Gauss-Seidel. A normalized equation is renormalized after each sweep, and the
    residual is measured before that (module doc)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, fixpoint: Fixpoint,
                 x: np.ndarray, damping: float) -> None:
        col = None if fixpoint.in_scale is None else damping * fixpoint.in_scale
        row = None if fixpoint.out_scale is None else damping * fixpoint.out_scale
        if col is None and row is None:
            col = np.full(len(x), damping)
        self._kernel = PointGaussSeidel(indptr, indices, x, col, row, fixpoint.teleport,
                                        fixpoint.dangling, fixpoint.spread_along_x, damping)
        self._fixpoint = fixpoint

    @property
    def values(self) -> np.ndarray:
        return self._kernel.x

    def step(self) -> float:
        diff, total = self._kernel.sweep()
        _check_total(self._fixpoint.name, total)
        if self._fixpoint.normalize:
            self._kernel.rescale(1.0 / total)
        return diff / total


class _Jacobi:
    """Jacobi over row blocks: the old vector for the whole sweep (the paper's eq. 6–7).

    Per block, y starts as the teleport term and ``csr_matvec`` adds P·p onto it, with
    p = c·s_in·x kept beside x, so a row needs no separate scaling passes (direct ranking)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, fixpoint: Fixpoint,
                 x: np.ndarray, params: SolverParams) -> None:
        self._blocks = blocks = RowBlocks(indptr, indices, len(x), params.block_links)
        self._fixpoint = fixpoint
        self._c = c = params.damping
        self.values = x
        self._next = np.empty_like(x)
        self._col_scale = None if fixpoint.in_scale is None else c * fixpoint.in_scale
        self._row_scale = None if fixpoint.out_scale is None else c * fixpoint.out_scale
        # per block, the local rows without out-links (index sums, not BLAS dot products:
        # multi-threaded BLAS on short vectors stalls on a loaded machine)
        # (the paper's spread along x is the normalization by r_k itself)
        self._dmask = None if not fixpoint.teleports_dangling else [
            np.flatnonzero(fixpoint.dangling[blocks.starts[b]:blocks.starts[b + 1]])
            for b in range(len(blocks))]
        self._delta = (float(x[fixpoint.dangling].sum()) if fixpoint.teleports_dangling
                       else 0.0)
        self._y = np.empty(blocks.max_rows)
        self._p = self._scaled(x)

    def _scaled(self, x: np.ndarray) -> np.ndarray:
        if self._col_scale is not None:
            return x * self._col_scale
        return x if self._row_scale is not None else x * self._c

    def step(self) -> float:
        fixpoint, blocks, c, x, x_next = self._fixpoint, self._blocks, self._c, \
            self.values, self._next
        diff = total = delta_next = 0.0
        boost = 1.0 + c * self._delta / (1.0 - c)
        for b in range(len(blocks)):
            r0, r1 = int(blocks.starts[b]), int(blocks.starts[b + 1])
            y = self._y[:r1 - r0]
            _start_rows(y, fixpoint.teleport, r0, r1, boost, self._row_scale is None)
            blocks.matvec_add(b, self._p, y)
            if self._row_scale is not None:  # interest: y = c/OutDeg(i)·Σ x_j + (1 − c)·E′
                y *= self._row_scale[r0:r1]
                y += (fixpoint.teleport if isinstance(fixpoint.teleport, float)
                      else fixpoint.teleport[r0:r1])
            if self._dmask is not None:
                delta_next += float(y.take(self._dmask[b]).sum())
            diff += float(np.abs(y - x[r0:r1]).sum())
            total += float(y.sum())
            x_next[r0:r1] = y
        _check_total(fixpoint.name, total)
        if fixpoint.normalize:
            x_next /= total
            residual = float(np.abs(x_next - x).sum())
        else:
            residual = diff / total
        self.values, self._next = x_next, x
        self._p = self._scaled(x_next)
        self._delta = delta_next / total
        return residual


def _start_rows(y: np.ndarray, teleport: np.ndarray | float, r0: int, r1: int, boost: float,
                with_teleport: bool) -> None:
    """y ← boost·(1−c)·E on rows [r0, r1) (the term csr_matvec adds onto), or 0."""
    if not with_teleport:
        y.fill(0.0)
    elif isinstance(teleport, float):
        y.fill(teleport * boost)
    else:
        np.multiply(teleport[r0:r1], boost, out=y)
