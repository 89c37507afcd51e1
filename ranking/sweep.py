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

Residual (the stopping rule), per sweep k:
- normalized iteration (the paper's variant, ‖x‖₁ = 1): ‖x_{k+1} − x_k‖₁. Under
  Gauss-Seidel it is measured before the end-of-sweep renormalization by 1/‖x̃_{k+1}‖₁ (a
  factor that tends to 1).
- linear iteration (teleport variant and inverse interest): ‖x_{k+1} − x_k‖₁ / ‖x_{k+1}‖₁,
  the L1 change of the 1-normalized iterate to first order.
networkx's ``pagerank(tol=t)`` stops when the L1 change is below N·t: pass ``tol = N·t`` to
stop at the same point.
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
        ptr = self._ptrs[block]
        y = out[:len(ptr) - 1]
        y.fill(0.0)
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

    def apply(self, y: np.ndarray, r0: int, r1: int, damping: float, rho: float) -> None:
        """y ← ρ·(c·s_out·y + (1−c)·E) on rows [r0, r1), in place."""
        y *= damping
        if self.out_scale is not None:
            y *= self.out_scale[r0:r1]
        y += self.teleport if isinstance(self.teleport, float) else self.teleport[r0:r1]
        if rho != 1.0:
            y *= rho


def solve_fixpoint(blocks: RowBlocks, fixpoint: Fixpoint, x0: np.ndarray,
                   params: SolverParams, progress: ProgressFn | None = None) -> RankResult:
    """Sweep until the residual < ``params.tol``; raises ConvergenceError after max_iter."""
    started = time.perf_counter()
    x = np.array(x0, dtype=np.float64)
    p = x if fixpoint.in_scale is None else x * fixpoint.in_scale
    x_next = None if params.gauss_seidel else np.empty_like(x)
    y_buf = np.empty(blocks.max_rows)
    d_buf = np.empty(blocks.max_rows)
    rho, residuals = 1.0, []
    for iteration in range(1, params.max_iter + 1):
        diff = total = 0.0
        for b in range(len(blocks)):
            r0, r1 = int(blocks.starts[b]), int(blocks.starts[b + 1])
            y = blocks.matvec(b, p, y_buf)
            fixpoint.apply(y, r0, r1, params.damping, rho)
            old = x[r0:r1]
            diff += float(np.abs(np.subtract(y, old, out=d_buf[:r1 - r0])).sum())
            total += float(y.sum())
            if x_next is not None:
                x_next[r0:r1] = y
                continue
            old[...] = y
            if p is not x:
                np.multiply(y, fixpoint.in_scale[r0:r1], out=p[r0:r1])
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
            p = x if fixpoint.in_scale is None else np.multiply(x, fixpoint.in_scale, out=p)
        else:
            residual = diff / total
            if fixpoint.normalize:
                x /= total
                if p is not x:
                    p /= total
                rho /= total
        residuals.append(residual)
        if progress is not None:
            progress(SweepProgress(fixpoint.name, iteration, residual))
        if residual < params.tol:
            method = "gauss-seidel" if params.gauss_seidel else "jacobi"
            return RankResult(x, iteration, residual, tuple(residuals),
                              time.perf_counter() - started, method)
    raise ConvergenceError(fixpoint.name, params.max_iter, residuals[-1], params.tol,
                           tuple(residuals))
