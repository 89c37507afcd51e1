"""Direct importance and inverse interest together, out of core, in one scan per sweep
(003 §5.3: matrix slicing, Gauss-Seidel iterations, combined computation).

Each sweep reads the slices of a ``SliceStore`` in order and hands each to the slice-level
kernel ``ranking.slice_sweep.sweep_slice`` (the one a cluster worker calls too,
``ranking.blocks``). For slice k (pages [b_k, b_{k+1})): the direct ranking computes the
slice's new importance from its in-links and the resident pre-scaled vector c·PR/OutDeg;
the inverse ranking computes the slice's new interest from its out-links and the resident
interest vector. Both write each page's new value back at once
(point Gauss-Seidel, the kernel of ``ranking.gauss_seidel``), so the following pages and
slices use it. The importance vector itself is on disk and is read and written one slice at
a time; the dangling mass δ and ‖PR‖₁ are carried from slice to slice, and summed anew from
the new values after each sweep. A first pass reads the out-links once for the pre-scaled
vector and the page flags (no out-link, self-link).

Paper variant: where pages link only to themselves beside much mass without out-links,
Gauss-Seidel sweeps can oscillate or crawl (``ranking.sweep.Stall``, which says why). As in
memory, the importance and the interest then start again from E and E′ and the importance
goes on by Jacobi, the power iteration of eq. 6–7: every slice of a sweep reads the
sweep-start pre-scaled vector and the same δ, and the new one (8 more bytes per page while
it lasts) replaces it at the sweep's end. ``max_iter`` counts the sweeps of both; the method
then reads "out-of-core, then jacobi".

Same equations, stopping rule and variants as the in-memory solvers (``ranking.importance``,
``ranking.interest``, residuals as in ``ranking.sweep``). With E″ (interest personalized by
XML importance) the personalization is taken from the latest importance at each sweep: it
settles when the importance does, so one scan still serves both. Without any XML page the
interest is undefined (no E′): the sweeps then compute the importance alone and the interest
comes back as zeros after 0 iterations, as the in-memory glue reports it.

An optional ``check_stop`` callable is called before every slice is read (first pass and
sweeps): it raises to abandon the ranking (see ``ranking.slices.StopCheck``), so a caller
that must stop waits at most one slice, not one sweep.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ranking.importance import check_dangling, personalization_vector
from ranking.results import ConvergenceError, ProgressFn, RankResult, SweepProgress
from ranking.slices import SliceStore, StopCheck, stop_point
from ranking.gauss_seidel import DANGLING, DanglingMass
from ranking.slice_sweep import SliceEquations, SliceLinks, start_slice, sweep_slice
from ranking.sweep import SolverParams, Stall


@dataclass(frozen=True)
class CombinedResult:
    importance: RankResult
    interest: RankResult
    slices: int
    seconds_per_sweep: float


@dataclass
class _Totals:
    diff: float = 0.0
    total: float = 0.0
    xml_mass: float = 0.0
    dangling: float = 0.0   # Σ new importance over the pages without out-links

    def add(self, diff: float, total: float) -> None:
        self.diff += diff
        self.total += total


class _Importance:
    """The direct importance, kept on disk as float64 (values times 1/scale)."""

    def __init__(self, store: SliceStore, e: np.ndarray | float) -> None:
        self.path = store.directory / "importance.bin"
        self.n = store.n
        self.reset(e)

    def reset(self, e: np.ndarray | float) -> None:
        """Back to PR₀ = E."""
        x0 = np.full(self.n, e) if isinstance(e, float) else np.asarray(e, dtype=np.float64)
        x0.tofile(self.path)
        self.scale = 1.0  # stored values times this = the current iterate

    def read(self, r0: int, r1: int) -> np.ndarray:
        return np.fromfile(self.path, dtype="<f8", count=r1 - r0, offset=8 * r0) * self.scale

    def write(self, r0: int, values: np.ndarray) -> None:
        with open(self.path, "r+b") as f:
            f.seek(8 * r0)
            # no copy when already little-endian float64 (a slice-sized temporary otherwise)
            np.asarray(values, dtype="<f8").tofile(f)


def rank_out_of_core(store: SliceStore, xml_mask: np.ndarray, params: SolverParams, *,
                     personalization: object | None = None, dangling: str = "paper",
                     interest_from_importance: bool = False,
                     progress: ProgressFn | None = None,
                     check_stop: StopCheck | None = None) -> CombinedResult:
    """Both rankings over the slices; raises ConvergenceError after ``max_iter`` sweeps."""
    check_dangling(dangling)
    mask = checked_mask(xml_mask, store.n)
    has_xml = bool(mask.any())
    started = time.perf_counter()
    c, n = params.damping, store.n
    e = personalization_vector(n, personalization)
    importance = _Importance(store, e)
    state = _start(store, importance, mask, c, dangling == "paper", check_stop)
    stall = Stall.at_damping(c) if dangling == "paper" else None
    method = "out-of-core"
    res_d: list[float] = []
    res_i: list[float] = []
    eq = SliceEquations(c, float(mask.sum()) if has_xml else 0.0, interest_from_importance)
    for sweep in range(1, params.max_iter + 1):
        d_tot, i_tot = _sweep(store, eq, importance, e, mask, state, check_stop)
        for totals in (d_tot, i_tot) if has_xml else (d_tot,):
            if totals.total <= 0.0 or not math.isfinite(totals.total):
                raise ValueError(f"out-of-core ranking: an iterate vanished (sum {totals.total})")
        res_d.append(d_tot.diff / d_tot.total)
        if has_xml:
            res_i.append(i_tot.diff / i_tot.total)
        importance.scale *= state.renormalize(d_tot)
        if progress is not None:
            progress(SweepProgress("importance", sweep, res_d[-1]))
            if has_xml:
                progress(SweepProgress("interest", sweep, res_i[-1]))
        if res_d[-1] < params.tol and (not has_xml or res_i[-1] < params.tol):
            seconds = time.perf_counter() - started
            values = importance.read(0, n)
            values /= values.sum()
            return CombinedResult(
                RankResult(values, sweep, res_d[-1], tuple(res_d), seconds, method),
                RankResult(state.interest, sweep if has_xml else 0,
                           res_i[-1] if has_xml else 0.0, tuple(res_i), seconds, method),
                store.count, seconds / sweep)
        if res_d[-1] < params.tol:
            stall = None  # the importance has converged: the interest is what goes on
        elif stall is not None and stall(res_d[-1]):
            importance.reset(e)
            state = _start(store, importance, mask, c, True, check_stop, jacobi=True)
            stall, method = None, "out-of-core, then jacobi"
    name, res = ("importance", res_d) if res_d[-1] >= params.tol else ("interest", res_i)
    raise ConvergenceError(name, params.max_iter, res[-1], params.tol, tuple(res))


def checked_mask(xml_mask: object, n: int) -> np.ndarray:
    """The XML mask as bool[n]; unlike the in-memory interest, it may mark no page."""
    mask = np.asarray(xml_mask)
    if mask.shape != (n,):
        raise ValueError(f"xml_mask has shape {mask.shape}, expected ({n},) for n={n} pages")
    if mask.dtype != np.bool_:
        raise ValueError(f"xml_mask must be a bool array, got dtype {mask.dtype}")
    return mask


@dataclass
class _State:
    """What the sweeps keep resident besides the slices: the pre-scaled vector c·PR/OutDeg,
    the page flags, δ and ‖PR‖₁, the interest and the XML pages' importance (E″).
    ``scaled_out``: Jacobi sweeps of the importance (``ranking.slice_sweep``) write the new
    pre-scaled vector there (8 bytes per page more), and it replaces ``scaled`` at the end
    of the sweep."""

    scaled: np.ndarray
    flags: np.ndarray
    direct: DanglingMass
    interest: np.ndarray
    xml_mass: float
    scaled_out: np.ndarray | None = None

    def renormalize(self, d_tot: _Totals) -> float:
        """End of a sweep: scale the importance to ‖PR‖₁ = 1 and return the factor. δ is
        summed anew from the new values (as ``ranking.gauss_seidel.PointGaussSeidel.
        rescale`` does): carried row by row, its rounding drift held the residual near
        2e-12."""
        factor = 1.0 / d_tot.total
        if self.scaled_out is not None:
            self.scaled, self.scaled_out = self.scaled_out, self.scaled
        self.scaled *= factor
        self.direct = DanglingMass(d_tot.dangling * factor, d_tot.total * factor,
                                   self.direct.spread)
        self.xml_mass = d_tot.xml_mass * factor
        return factor


def _start(store: SliceStore, importance: _Importance, mask: np.ndarray, damping: float,
           spread: bool, check_stop: StopCheck | None, jacobi: bool = False) -> _State:
    """The state of the first sweep, from the importance file as ``PR₀ = E``: also the
    restart when Gauss-Seidel stalls (``ranking.sweep.Stall``: from the first iterate,
    since the power iteration crawls from the stalled one)."""
    n = store.n
    scaled, flags = _first_pass(store, importance, damping, check_stop)
    direct = DanglingMass(float(importance.read(0, n)[flags & DANGLING > 0].sum()), 1.0,
                          spread=spread)
    xml_count = float(mask.sum())  # E′ = mask/xml_count, built per slice (no n-vector)
    interest = mask / xml_count if xml_count > 0 else np.zeros(n)
    xml_mass = sum(float(importance.read(int(a), int(b))[mask[int(a):int(b)]].sum())
                   for a, b in zip(store.bounds[:-1], store.bounds[1:]))
    return _State(scaled, flags, direct, interest, xml_mass,
                  np.empty(n) if jacobi else None)


def _sweep(store: SliceStore, eq: SliceEquations, importance: _Importance,
           e: np.ndarray | float, mask: np.ndarray, state: _State,
           check_stop: StopCheck | None) -> tuple[_Totals, _Totals]:
    """One sweep over all slices; returns the importance's and the interest's totals."""
    d_tot, i_tot = _Totals(), _Totals()
    interest = state.interest if eq.xml_count > 0 else None
    for k in range(store.count):
        stop_point(check_stop)
        links = SliceLinks.load(store, k)
        r0, r1 = links.first, links.first + links.rows
        step = sweep_slice(links, eq, importance.read(r0, r1),
                           e if isinstance(e, float) else e[r0:r1], state.flags[r0:r1],
                           mask[r0:r1], state.scaled, interest, state.direct,
                           state.xml_mass, state.scaled_out)
        d_tot.add(step.importance_diff, step.importance_total)
        d_tot.xml_mass += step.xml_mass
        d_tot.dangling += step.dangling_mass
        importance.write(r0, step.importance / importance.scale)
        i_tot.add(step.interest_diff, step.interest_total)
    return d_tot, i_tot


def _first_pass(store: SliceStore, importance: _Importance, damping: float,
                check_stop: StopCheck | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The pre-scaled vector c·PR/OutDeg and the page flags (no out-link, self-link)."""
    scaled = np.empty(store.n)
    flags = np.empty(store.n, dtype=np.uint8)
    for k in range(store.count):
        stop_point(check_stop)
        links = SliceLinks.load(store, k)
        r0, r1 = links.first, links.first + links.rows
        scaled[r0:r1], flags[r0:r1] = start_slice(links, importance.read(r0, r1), damping)
    return scaled, flags

