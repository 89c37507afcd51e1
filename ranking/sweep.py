"""Row-block sweeps of a fixpoint x = ρ·(c·s_out ⊙ (P·(s_in ⊙ x)) + (1−c)·E) (003 §5.3).

P is a 0/1 CSR pattern (rows = the pages being updated), s_in and s_out are per-page scale
vectors (1/OutDeg for the direct and the inverse ranking), E the teleport vector, ρ a scalar.

Bandwidth. scipy's compiled ``csr_matvec`` needs a value array. Instead of storing one value
per link (8 more bytes per link to stream), the rows are cut into blocks of about
``block_links`` links; each block keeps a local int32 row pointer and all blocks share one
small array of ones that stays in the L2 cache. A sweep then streams 4 bytes of index per link
plus the gathers of the pre-scaled vector: the paper's pattern-matrix floor.

Gauss-Seidel (003 §5.3, "Gauss-Seidel Iterations"): the blocks are processed in order and
each new block overwrites the old values at once, so the following blocks already use it.
Jacobi (``gauss_seidel=False``) keeps the old vector for the whole sweep; it reproduces the
paper's iteration (eq. 6–7) exactly and serves as a reference.

Teleport of dangling mass (``Fixpoint.dangling``, the ``teleport`` variant): the sweep
is the normalized equation x = c·M·x + (c·δ + 1−c)·E with δ = the mass of the pages without
out-links, as PRPACK does. Under Gauss-Seidel δ is kept fresh: each block replaces its own
pages' old contribution by the new one, so the next blocks see the current dangling mass.
Sweeping the unnormalized linear system z = c·M·z + (1−c)·E instead (same solution after
1-normalization) is as fast under Jacobi, but Gauss-Seidel then excites the slow mode of the
total mass: on random graphs with fine blocks it needed 2–3× MORE sweeps than Jacobi.

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
from dataclasses import dataclass

import numpy as np
from scipy.sparse import _sparsetools as sparsetools

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

    def matvec(self, block: int, vector: np.ndarray, out: np.ndarray) -> np.ndarray:
        """P[block rows] @ vector into ``out[:rows]`` (returned view)."""
        y = out[:len(self._ptrs[block]) - 1]
        y.fill(0.0)
        return self.matvec_add(block, vector, y)

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
    dangling: np.ndarray | None = None  # bool, pages without out-links: teleport their mass

    def apply(self, y: np.ndarray, r0: int, r1: int, damping: float, rho: float,
              boost: float = 1.0) -> None:
        """y ← ρ·(c·s_out·y + boost·(1−c)·E) on rows [r0, r1), in place.

        ``boost`` = (c·δ + 1−c)/(1−c) spreads the dangling mass δ along E (teleport)."""
        y *= damping
        if self.out_scale is not None:
            y *= self.out_scale[r0:r1]
        if isinstance(self.teleport, float):
            y += self.teleport * boost
        elif boost == 1.0:
            y += self.teleport[r0:r1]
        else:
            y += boost * self.teleport[r0:r1]
        if rho != 1.0:
            y *= rho

    def dangling_mass(self, values: np.ndarray, r0: int, r1: int) -> float:
        """Σ values over the pages of rows [r0, r1) without out-links (0 if not teleported)."""
        if self.dangling is None:
            return 0.0
        return float(values[self.dangling[r0:r1]].sum())


def solve_fixpoint(blocks: RowBlocks, fixpoint: Fixpoint, x0: np.ndarray,
                   params: SolverParams, progress: ProgressFn | None = None) -> RankResult:
    """Sweep until the residual < ``params.tol``; raises ConvergenceError after max_iter.

    Per block: y starts as the teleport term and ``csr_matvec`` adds P·p onto it, with
    p = c·s_in·x kept beside x, so a row needs no separate scaling passes (direct ranking);
    the dangling mass moves by (y − old)·d, read off the difference the residual needs."""
    started = time.perf_counter()
    c = params.damping
    x = np.array(x0, dtype=np.float64)
    if fixpoint.dangling is not None:
        x /= x.sum()
    col_scale = None if fixpoint.in_scale is None else c * fixpoint.in_scale
    row_scale = None if fixpoint.out_scale is None else c * fixpoint.out_scale
    # per block, the local rows without out-links (index sums, not BLAS dot products:
    # multi-threaded BLAS on short vectors stalls on a loaded machine)
    dmask = None if fixpoint.dangling is None else [
        np.flatnonzero(fixpoint.dangling[blocks.starts[b]:blocks.starts[b + 1]])
        for b in range(len(blocks))]
    if col_scale is not None:
        p = x * col_scale
    else:
        p = x if row_scale is not None else x * c
    x_next = None if params.gauss_seidel else np.empty_like(x)
    y_buf = np.empty(blocks.max_rows)
    d_buf = np.empty(blocks.max_rows)
    rho, residuals = 1.0, []
    delta = fixpoint.dangling_mass(x, 0, len(x))
    for iteration in range(1, params.max_iter + 1):
        diff = total = delta_next = 0.0
        for b in range(len(blocks)):
            r0, r1 = int(blocks.starts[b]), int(blocks.starts[b + 1])
            y = y_buf[:r1 - r0]
            _start_rows(y, fixpoint.teleport, r0, r1, 1.0 + c * delta / (1.0 - c),
                        row_scale is None)
            blocks.matvec_add(b, p, y)
            if row_scale is not None:  # interest: y = c/OutDeg(i)·Σ x_j + (1 − c)·E′
                y *= row_scale[r0:r1]
                y += (fixpoint.teleport if isinstance(fixpoint.teleport, float)
                      else fixpoint.teleport[r0:r1])
            if rho != 1.0:
                y *= rho
            old = x[r0:r1]
            d = np.subtract(y, old, out=d_buf[:r1 - r0])
            if dmask is not None:
                if x_next is None:  # Gauss-Seidel: the next blocks see the new δ
                    delta += float(d.take(dmask[b]).sum())
                else:
                    delta_next += float(y.take(dmask[b]).sum())
            diff += float(np.abs(d, out=d).sum())
            total += float(y.sum())
            if x_next is not None:
                x_next[r0:r1] = y
                continue
            old[...] = y
            if col_scale is not None:
                np.multiply(y, col_scale[r0:r1], out=p[r0:r1])
            elif p is not x:
                np.multiply(y, c, out=p[r0:r1])
        if total <= 0.0 or not math.isfinite(total):
            raise ValueError(f"{fixpoint.name}: the iterate vanished (sum {total}); "
                             "the personalization vector must have positive mass")
        if x_next is not None:
            if fixpoint.normalize:
                x_next /= total
                residual = float(np.abs(x_next - x).sum())
            else:
                residual = diff / total
            x, x_next = x_next, x
            if col_scale is not None:
                np.multiply(x, col_scale, out=p)
            else:
                p = x * c if row_scale is None else x
            delta = delta_next / total
        else:
            residual = diff / total
            if fixpoint.normalize:
                x /= total
                p /= total
                if dmask is None:
                    rho /= total
                delta /= total
        residuals.append(residual)
        if progress is not None:
            progress(SweepProgress(fixpoint.name, iteration, residual))
        if residual < params.tol:
            method = "gauss-seidel" if params.gauss_seidel else "jacobi"
            return RankResult(x, iteration, residual, tuple(residuals),
                              time.perf_counter() - started, method)
    raise ConvergenceError(fixpoint.name, params.max_iter, residuals[-1], params.tol,
                           tuple(residuals))


def _start_rows(y: np.ndarray, teleport: np.ndarray | float, r0: int, r1: int, boost: float,
                with_teleport: bool) -> None:
    """y ← boost·(1−c)·E on rows [r0, r1) (the term csr_matvec adds onto), or 0."""
    if not with_teleport:
        y.fill(0.0)
    elif isinstance(teleport, float):
        y.fill(teleport * boost)
    else:
        np.multiply(teleport[r0:r1], boost, out=y)
