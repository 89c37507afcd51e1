"""Point Gauss-Seidel sweeps, compiled (003 §5.3, "Gauss-Seidel Iterations").

Every page's new value is written back at once, so the very next row of the same sweep
already reads it. This is the solver PRPACK (igraph) uses; the paper sketches it for its
slices. Row i of the fixpoint in ``ranking.sweep`` reads

    y_i = (r_i·Σ_{j ∈ row i} p_j + t_i·β) / (1 − q),   p_j = s_j·x_j

with s = c·s_in (``col_scale``, the pre-scaled vector: 4 bytes of index per link and no value
array), r = c·s_out (``row_scale``, 1 when absent), t = (1−c)·E. δ is the current mass of the
pages without out-links (``dangling``), kept up to date row by row: the teleport variant
spreads c·δ along E (β = 1 + c·δ/(1−c), q = 0), the paper variant along x itself (β = 1,
q = c·δ/‖x‖₁, eq. 7's renormalization); otherwise β = 1, q = 0.

Self-links are solved exactly: a page that links to itself appears in its own row, so the
plain update would read its own old value, and a page whose only link is to itself would
then creep to its fixpoint at rate c per sweep. Solving y_i·(1 − q) = (other terms) + r_i·s_i·y_i for y_i
instead removed that slow mode: 53 sweeps instead of 94 on LAW cnr-2000 (87,442 self-links).

Why compiled: SciPy has no Gauss-Seidel kernel (``spsolve_triangular`` costs 15× a
``csr_matvec`` per sweep), and block Gauss-Seidel with ``csr_matvec`` is Jacobi inside each
block, where a web site's link cycles fall in URL order: on cnr-2000 it needed 103 sweeps
against Jacobi's 102. The kernel is compiled once per signature by numba and cached on disk
beside this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit


DANGLING = 1  # flag bits, one byte per page
SELF_LINK = 2


@njit(cache=True, nogil=True, boundscheck=False)
def _sweep(indptr, indices, x, p, col_scale, row_scale, flags,  # noqa: ANN001
           spread, tele_scalar, tele, damping, delta, mass):  # noqa: ANN001
    """One sweep over all rows in order; returns (Σ|y − x_old|, Σ y, δ). ``p`` may be ``x``
    itself (``col_scale`` None); ``tele`` None means t_i = ``tele_scalar`` for every row;
    ``spread``: the dangling mass δ goes along x (paper) instead of along E (teleport)."""
    boost_rate = damping / (1.0 - damping)
    beta = 1.0
    q = 0.0
    if spread:
        q = damping * delta / mass
    else:
        beta = 1.0 + boost_rate * delta
    scale = 1.0 / (1.0 - q)
    diff = 0.0
    total = 0.0
    lo = indptr[0]
    for i in range(x.shape[0]):
        hi = indptr[i + 1]
        s = 0.0
        for k in range(lo, hi):
            s += p[indices[k]]
        lo = hi
        r = 1.0 if row_scale is None else row_scale[i]
        t = tele_scalar if tele is None else tele[i]
        old = x[i]
        a = r * s + t * beta
        f = flags[i]
        if f == 0:  # the common row: no division
            y = a * scale
        else:
            den = 1.0 - q
            if f & SELF_LINK:
                rw = r * (1.0 if col_scale is None else col_scale[i])
                if den - rw > 1e-12:  # else the plain update (δ overshoots in early sweeps)
                    a -= rw * old
                    den -= rw
            y = a / den
        d = y - old
        diff += abs(d)
        total += y
        mass += d
        if f & DANGLING:
            delta += d
            if spread:
                q = damping * delta / mass
                scale = 1.0 / (1.0 - q)
            else:
                beta = 1.0 + boost_rate * delta
        x[i] = y
        if col_scale is not None:
            p[i] = y * col_scale[i]
    return diff, total, delta


def page_flags(indptr: np.ndarray, indices: np.ndarray,
               dangling: np.ndarray | None) -> np.ndarray:
    """One byte per row: DANGLING (from ``dangling``), SELF_LINK (the row holds its own
    index)."""
    flags = np.zeros(len(indptr) - 1, dtype=np.uint8)
    if dangling is not None:
        flags[dangling] = DANGLING
    _mark_self_links(indptr, indices, flags)
    return flags


@njit(cache=True, nogil=True, boundscheck=False)
def _mark_self_links(indptr, indices, flags):  # noqa: ANN001
    for i in range(flags.shape[0]):
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] == i:
                flags[i] |= SELF_LINK
                break


class PointGaussSeidel:
    """The iterate ``x`` of one equation, swept in place by the compiled kernel.

    ``indptr``/``indices``: the 0/1 pattern whose row i lists the pages feeding page i.
    ``col_scale``/``row_scale``: c·s_in and c·s_out (None = absent); at least one is given,
    since the damping c enters through them. ``tele``: t = (1−c)·E, a scalar or per page.
    ``dangling``: bool[n], the pages without out-links, whose mass goes along E, or along x
    when ``spread_along_x`` (None = the equation has no such mass to move).
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, x0: np.ndarray,
                 col_scale: np.ndarray | None, row_scale: np.ndarray | None,
                 tele: np.ndarray | float, dangling: np.ndarray | None,
                 spread_along_x: bool, damping: float) -> None:
        if col_scale is None and row_scale is None:
            raise ValueError("PointGaussSeidel needs col_scale or row_scale (they carry c)")
        # int32 row pointers stream half the bytes; int64 only past 2^31 links
        narrow = len(indices) < np.iinfo(np.int32).max
        self._indptr = indptr.astype(np.int32 if narrow else np.int64, copy=False)
        self._indices = indices
        self.x = np.array(x0, dtype=np.float64)
        self._col_scale = col_scale
        self._row_scale = row_scale
        self._p = self.x if col_scale is None else self.x * col_scale
        self._flags = page_flags(self._indptr, indices, dangling)
        self._tele_scalar = float(tele) if isinstance(tele, float) else 0.0
        self._tele = None if isinstance(tele, float) else np.asarray(tele, dtype=np.float64)
        self._spread = spread_along_x and dangling is not None
        self._damping = damping
        self.delta = 0.0 if dangling is None else float(self.x[dangling].sum())
        self._mass = float(self.x.sum())

    def sweep(self) -> tuple[float, float]:
        """One sweep; returns (Σ|x_new − x_old|, Σ x_new)."""
        diff, total, self.delta = _sweep(
            self._indptr, self._indices, self.x, self._p, self._col_scale, self._row_scale,
            self._flags, self._spread, self._tele_scalar, self._tele,
            self._damping, self.delta, self._mass)
        self._mass = total
        return diff, total

    def rescale(self, factor: float) -> None:
        """Multiply the iterate (and what is derived from it) by ``factor``."""
        self.x *= factor
        if self._p is not self.x:
            self._p *= factor
        self.delta *= factor
        self._mass *= factor
