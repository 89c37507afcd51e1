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

from dataclasses import dataclass

import numpy as np
from numba import njit


DANGLING = 1  # flag bits, one byte per page
SELF_LINK = 2


@njit(cache=True, nogil=True, boundscheck=False)
def _sweep(indptr, indices, first, x, p, p_out, col_scale, row_scale, flags,  # noqa: ANN001
           spread, tele_scalar, tele, damping, delta, mass, jacobi):  # noqa: ANN001
    """Rows i = 0.. of ``x`` (pages first + i) in order; returns (Σ|y − x_old|, Σ y, δ, ‖x‖₁).

    ``p`` is the whole pre-scaled vector (it may be ``x`` itself when first = 0 and there is
    no ``col_scale``), and each new value times its scale goes to ``p_out`` (``p`` itself
    for Gauss-Seidel); ``tele`` None means t_i = ``tele_scalar`` for every row;
    ``spread``: the dangling mass δ goes along x (paper) instead of along E (teleport);
    ``jacobi``: β and q stay those of the sweep's start and self-links are not solved
    (with ``p_out`` apart from ``p``, the power iteration)."""
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
        w = 1.0 if col_scale is None else col_scale[i]
        old = x[i]
        a = r * s + t * beta
        f = flags[i]
        if f == 0:  # the common row: no division
            y = a * scale
        else:
            den = 1.0 - q
            if f & SELF_LINK and not jacobi and den - r * w > 1e-12:  # else the plain
                a -= r * w * old                      # update (early sweeps: δ may overshoot)
                den -= r * w
            y = a / den
        d = y - old
        diff += abs(d)
        total += y
        mass += d
        if f & DANGLING:
            delta += d
            if jacobi:
                pass
            elif spread:
                q = damping * delta / mass
                scale = 1.0 / (1.0 - q)
            else:
                beta = 1.0 + boost_rate * delta
        x[i] = y
        p_out[first + i] = y * w
    return diff, total, delta, mass


def page_flags(indptr: np.ndarray, indices: np.ndarray, first: int = 0,
               dangling: np.ndarray | None = None) -> np.ndarray:
    """One byte per row (page first + i): DANGLING (from ``dangling``), SELF_LINK (the row
    lists its own page)."""
    flags = np.zeros(len(indptr) - 1, dtype=np.uint8)
    if dangling is not None:
        flags[dangling] = DANGLING
    _mark_self_links(indptr, indices, first, flags)
    return flags


@njit(cache=True, nogil=True, boundscheck=False)
def _mark_self_links(indptr, indices, first, flags):  # noqa: ANN001
    base = indptr[0]
    for i in range(flags.shape[0]):
        for k in range(indptr[i] - base, indptr[i + 1] - base):
            if indices[k] == first + i:
                flags[i] |= SELF_LINK
                break


@dataclass(frozen=True)
class Rows:
    """Rows of one equation for the kernel: pages ``first`` .. ``first + len(flags)``.

    ``indptr``/``indices``: the 0/1 pattern, row i lists the pages feeding page first + i
    (``indptr`` starts at 0). ``col_scale``/``row_scale``: c·s_in and c·s_out of these pages
    (None = absent). ``tele``: t = (1−c)·E, one scalar or per row. ``flags``: ``page_flags``.
    """

    indptr: np.ndarray
    indices: np.ndarray
    first: int
    col_scale: np.ndarray | None
    row_scale: np.ndarray | None
    tele: np.ndarray | float
    flags: np.ndarray


@dataclass
class DanglingMass:
    """δ (the current mass of the pages without out-links) and ‖x‖₁, carried from row to
    row and from call to call; ``spread``: δ goes along x (paper) instead of along E."""

    delta: float = 0.0
    mass: float = 1.0
    spread: bool = False

    def rescale(self, factor: float) -> None:
        self.delta *= factor
        self.mass *= factor


def sweep_rows(rows: Rows, x: np.ndarray, p: np.ndarray, dangling: DanglingMass,
               damping: float, p_out: np.ndarray | None = None) -> tuple[float, float]:
    """Update ``x`` (the values of ``rows``' pages) in place, row by row, writing each new
    value times its col_scale into ``p`` (all pages) at once; returns (Σ|Δx|, Σ x_new).
    With ``p_out`` the new values go there and ``p`` stays the old vector: a Jacobi sweep
    (``Stall``)."""
    tele_scalar, tele = ((float(rows.tele), None) if isinstance(rows.tele, float)
                         else (0.0, rows.tele))
    jacobi = p_out is not None
    diff, total, dangling.delta, dangling.mass = _sweep(
        rows.indptr, rows.indices, rows.first, x, p, p_out if jacobi else p, rows.col_scale,
        rows.row_scale, rows.flags, dangling.spread, tele_scalar, tele, damping,
        dangling.delta, dangling.mass, jacobi)
    return diff, total


class PointGaussSeidel:
    """The iterate ``x`` of one equation over all n pages, swept in place by the kernel.

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
        ptr = indptr.astype(np.int32 if narrow else np.int64, copy=False)
        tele = float(tele) if isinstance(tele, float) else np.asarray(tele, dtype=np.float64)
        self._rows = Rows(ptr, indices, 0, col_scale, row_scale, tele,
                          page_flags(ptr, indices, 0, dangling))
        self.x = np.array(x0, dtype=np.float64)
        self._p = self.x if col_scale is None else self.x * col_scale
        self._dangling_pages = dangling
        self._dangling = DanglingMass(
            0.0 if dangling is None else float(self.x[dangling].sum()), float(self.x.sum()),
            spread_along_x and dangling is not None)
        self._damping = damping

    def sweep(self) -> tuple[float, float]:
        """One sweep; returns (Σ|x_new − x_old|, Σ x_new)."""
        return sweep_rows(self._rows, self.x, self._p, self._dangling, self._damping)

    def rescale(self, factor: float) -> None:
        """Multiply the iterate (and what is derived from it) by ``factor``. δ and ‖x‖₁
        are summed anew: carried row by row, their rounding errors add up sweep after
        sweep and held the residual above 1e-12 for good."""
        self.x *= factor
        if self._p is not self.x:
            self._p *= factor
        d = self._dangling_pages
        self._dangling.delta = 0.0 if d is None else float(self.x[d].sum())
        self._dangling.mass = float(self.x.sum())
