"""One slice of one sweep, both rankings in one scan: the kernel the one-host out-of-core
ranking (``ranking.outofcore``) and a cluster worker (``ranking.blocks``) both call
(003 §5.3–5.4: each slice can be handed to a different machine).

Given a slice (its in- and out-links, ``SliceLinks``), the vector parts it reads (the
pre-scaled importance c·PR/OutDeg and the interest of all pages, the slice's own
importance, flags and XML mask) and the equations' constants (``SliceEquations``: damping,
teleport, XML count), :func:`sweep_slice` computes the slice's new direct importance from
its in-links, then its new interest from its out-links, point Gauss-Seidel for both (the
kernel of ``ranking.gauss_seidel``): every new value is written at once into the vectors
the following rows and slices gather from. It returns the slice's new values and the step
norms the stopping rule sums (Σ|Δx|, Σx for each ranking, the slice's XML mass of
importance, which E″ needs, and its mass on pages without out-links, from which the caller
sums δ anew after each sweep). Within a sweep δ, the dangling mass, is carried in and out
in ``DanglingMass``.

Jacobi (``scaled_out``): the paper variant can stall under Gauss-Seidel (``ranking.sweep.
Stall``), and the callers then switch the direct importance to the power iteration of
eq. 6–7: the slice reads the sweep-start pre-scaled vector and writes its new values into
``scaled_out``, and δ and ‖PR‖₁ stay those of the sweep's start (q is the same for every
slice). The interest equation is linear and stays Gauss-Seidel.

:func:`start_slice` is the first pass over a slice: its pages' share of the pre-scaled
vector and their flags (no out-link, self-link).

Who owns the vectors is the caller's business: one host keeps them resident for all slices
(Gauss-Seidel across the whole sweep); a worker reads them from a shared directory at the
start of its block and writes its slices' parts back (Gauss-Seidel inside its block, block
Jacobi across workers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ranking.gauss_seidel import (DANGLING, SELF_LINK, DanglingMass, Rows, page_flags,
                                  sweep_rows)
from ranking.slices import SliceStore


@dataclass(frozen=True)
class SliceLinks:
    """Slice k's links as ``SliceStore.load`` gives them: pages [first, first + rows)."""

    first: int
    in_ptr: np.ndarray
    in_idx: np.ndarray
    out_ptr: np.ndarray
    out_idx: np.ndarray

    @classmethod
    def load(cls, store: SliceStore, k: int,
             into: Callable[[str, str, int], np.ndarray] | None = None) -> SliceLinks:
        """Slice k of ``store`` (``into``: buffers to read it into, ``SliceStore.load``)."""
        return cls(int(store.bounds[k]), *store.load(k, into))

    @property
    def rows(self) -> int:
        return len(self.out_ptr) - 1

    @property
    def nbytes(self) -> int:
        return int(self.in_ptr.nbytes + self.in_idx.nbytes + self.out_ptr.nbytes
                   + self.out_idx.nbytes)

    def scaled_inverse_degree(self, damping: float) -> np.ndarray:
        """c/OutDeg of the slice's pages (0 where a page has no out-link)."""
        return damping * inverse_degree(self.out_ptr)


@dataclass(frozen=True)
class SliceEquations:
    """The constants of both equations. ``xml_count``: the number of XML pages (0: no
    interest is computed); ``interest_from_importance``: E″ instead of E′."""

    damping: float
    xml_count: float
    interest_from_importance: bool = False


@dataclass(frozen=True)
class SliceStep:
    """What one slice of a sweep gives back: its new values and the step norms."""

    importance: np.ndarray          # the slice's new importance (not yet renormalized)
    interest: np.ndarray | None     # the slice's new interest (None: no XML page)
    importance_diff: float          # Σ |Δ importance| over the slice
    importance_total: float         # Σ importance (new) over the slice
    interest_diff: float
    interest_total: float
    xml_mass: float                 # Σ importance (new) over the slice's XML pages
    dangling_mass: float = 0.0      # Σ importance (new) over its pages without out-links


def inverse_degree(out_ptr: np.ndarray) -> np.ndarray:
    degree = np.diff(out_ptr).astype(np.float64)
    return np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)


def start_slice(links: SliceLinks, importance: np.ndarray,
                damping: float) -> tuple[np.ndarray, np.ndarray]:
    """The slice's pre-scaled vector c·PR/OutDeg (from its ``importance``) and its page
    flags (DANGLING: no out-link; SELF_LINK)."""
    inv_deg = inverse_degree(links.out_ptr)
    scaled = damping * importance * inv_deg
    flags = page_flags(links.out_ptr, links.out_idx, links.first, inv_deg == 0)
    return scaled, flags


def sweep_slice(links: SliceLinks, eq: SliceEquations, importance: np.ndarray,
                teleport: np.ndarray | float, flags: np.ndarray, xml: np.ndarray,
                scaled: np.ndarray, interest: np.ndarray | None, direct: DanglingMass,
                xml_mass: float, scaled_out: np.ndarray | None = None) -> SliceStep:
    """One slice of one sweep, direct importance then inverse interest.

    Per-slice inputs (the slice's pages): ``importance`` (updated in place: the new values
    come back in the step), ``teleport`` (E, a scalar when uniform), ``flags``
    (``start_slice``), ``xml`` (bool mask). Whole-graph inputs, gathered by page id and
    updated in place on the slice's pages: ``scaled`` (c·PR/OutDeg) and ``interest`` (None
    when ``eq.xml_count`` is 0). ``direct``: δ and ‖PR‖₁ carried from row to row (updated);
    ``xml_mass``: the XML pages' share of the importance at the end of the previous sweep
    (normalized), the denominator of E″. ``scaled_out`` (whole graph): a Jacobi sweep of
    the importance (module doc); ``scaled`` and ``direct`` are then only read."""
    c, r0, r1 = eq.damping, links.first, links.first + links.rows
    c_inv_deg = links.scaled_inverse_degree(c)
    tele_d = (1.0 - c) * teleport
    rows = Rows(links.in_ptr, links.in_idx, r0, c_inv_deg, None, tele_d, flags)
    d_diff, d_total = sweep_rows(rows, importance, scaled,
                                 direct if scaled_out is None else replace(direct), c,
                                 scaled_out)
    mass = float(importance[xml].sum())
    dangling = float(importance[flags & DANGLING > 0].sum())
    if interest is None or eq.xml_count <= 0:
        return SliceStep(importance, None, d_diff, d_total, 0.0, 0.0, mass, dangling)
    e_i = (np.where(xml, importance, 0.0) / xml_mass if eq.interest_from_importance
           else xml / eq.xml_count)
    rows = Rows(links.out_ptr, links.out_idx, r0, None, c_inv_deg, (1.0 - c) * e_i,
                flags & SELF_LINK)
    part = interest[r0:r1]
    i_diff, i_total = sweep_rows(rows, part, interest, DanglingMass(), c)
    return SliceStep(importance, part, d_diff, d_total, i_diff, i_total, mass, dangling)
