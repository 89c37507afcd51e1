"""Both rankings over slices shared by several workers: block Jacobi across the workers,
point Gauss-Seidel inside each worker's block (003 §5.4: the slices "can be handed to
different machines").

The slices of a ``SliceStore`` are grouped into B blocks of consecutive slices (balanced by
links, :func:`block_parts`); a sweep is one task per block, and the tasks of a sweep run at
once, on different workers. A block task (:func:`sweep_block`) reads the vectors as the
previous sweep left them, sweeps its slices in order with the slice-level kernel
(``ranking.slice_sweep.sweep_slice``, the one the one-host sweep calls), so its own pages'
new values are used at once by its following rows and slices (Gauss-Seidel), while the
other blocks' pages keep their values of the previous sweep (Jacobi). With one block it is
the one-host sweep. The fixpoint, the stopping rule (the residual of each ranking, summed
over the blocks: Σ|Δx| / Σx), the renormalization of the importance after each sweep and
the reported error are the one-host ones (``ranking.outofcore``); only the path differs,
so a few more sweeps may be needed when many links cross blocks.

Where the vectors live: in the slices' directory, which every worker sees at the same path
(a shared filesystem). Each vector has two files, one per sweep parity: sweep s reads
parity s−1 and writes its block's pages into parity s, so a task can be run again (its
worker died) and gives the same values: nothing it reads has changed. A task holds the two
gathered vectors (the pre-scaled importance c·PR/OutDeg and the interest: 16 bytes per
page, less than the one-host sweep's 18) and one slice: the slices cut for one host's
budget fit each worker's. What moves per sweep: each task reads the two gathered vectors
whole (16·n bytes) and its slices, and writes 24 bytes per page of its block. The dangling
mass δ and ‖PR‖₁ start each sweep at their values after the previous one; each task
returns its pages' new mass without out-links, and the driver sums δ anew from them (as
``ranking.outofcore`` does: carried, its rounding drift held the residual near 2e-12).

Paper variant: when the importance stalls (``ranking.sweep.Stall``), the driver restarts
both rankings from E and E′ (the first pass again, into the parity files the next sweep
reads) and goes on by Jacobi, the power iteration of eq. 6–7, as ``ranking.outofcore``
does: a task then writes its new pre-scaled values into a second gathered vector (8 more
bytes per page) and keeps δ and ‖PR‖₁ of the sweep's start for every slice, so no block
reads a value of this sweep.

Who runs the tasks is the caller's ``run_tasks(function, items)`` (a list of results, in
order): :func:`serial_tasks` here; a Dask cluster in ``xyro.jobs.rank_cluster``. Both
functions take one picklable item and only read and write files under the store's
directory.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ranking.gauss_seidel import DANGLING, DanglingMass
from ranking.importance import check_dangling, personalization_vector
from ranking.outofcore import CombinedResult, checked_mask
from ranking.results import ConvergenceError, ProgressFn, RankResult, SweepProgress
from ranking.slice_sweep import SliceEquations, SliceLinks, start_slice, sweep_slice
from ranking.slices import SliceStore, StopCheck, read_into, stop_point
from ranking.sweep import SolverParams, Stall

T = TypeVar("T")
R = TypeVar("R")
SliceHook = Callable[[int, int], None]
"""Called on the worker as ``hook(sweep, slice)`` before each slice of a block task (sweep 0:
the first pass): returns to go on, raises to abandon the task (fault injection in tests)."""
RunTasks = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
"""``run_tasks(function, items)``: ``[function(item) for item in items]``, run anywhere, in
any order, at once; raises what a task raised."""


def serial_tasks(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """Run the tasks one after the other in this process."""
    return [function(item) for item in items]


@dataclass(frozen=True)
class BlockJob:
    """What every task of one ranking needs: the store, the equations, and where the
    vectors are (files in the store's directory). Picklable."""

    store: SliceStore
    equations: SliceEquations
    spread: bool                   # the dangling mass goes along x (paper) or E (teleport)
    uniform_teleport: float | None  # E = 1/n everywhere, else the file teleport.bin

    def path(self, name: str, parity: int | None = None) -> Path:
        suffix = "" if parity is None else f"-{parity % 2}"
        return self.store.directory / f"{name}{suffix}.bin"

    @property
    def has_xml(self) -> bool:
        return self.equations.xml_count > 0

    def teleport(self, r0: int, r1: int) -> tuple[np.ndarray | float, int]:
        """E on pages [r0, r1) and the bytes read for it."""
        if self.uniform_teleport is not None:
            return self.uniform_teleport, 0
        return _read(self.path("teleport"), "<f8", r0, r1), 8 * (r1 - r0)


@dataclass(frozen=True)
class BlockRange:
    """The first pass over slices [first, stop) of a job, into the files of ``parity``
    (0; a restart writes those the next sweep reads)."""

    job: BlockJob
    first: int
    stop: int
    parity: int = 0


@dataclass(frozen=True)
class BlockStart:
    dangling_mass: float   # Σ PR₀ over the block's pages without out-links
    xml_mass: float        # Σ PR₀ over its XML pages


@dataclass(frozen=True)
class BlockSweep:
    """Sweep ``sweep`` of slices [first, stop): the state the previous sweep left, already
    renormalized (``factor`` is what multiplies the values in the parity files).
    ``jacobi``: the importance by Jacobi (module doc)."""

    job: BlockJob
    sweep: int
    first: int
    stop: int
    factor: float
    delta: float
    mass: float
    xml_mass: float
    jacobi: bool = False


@dataclass(frozen=True)
class BlockStep:
    """A block's share of one sweep: the step norms and what it moved."""

    importance_diff: float
    importance_total: float
    interest_diff: float
    interest_total: float
    xml_mass: float
    dangling_mass: float   # Σ new importance over the block's pages without out-links
    bytes_read: int
    bytes_written: int
    seconds: float


@dataclass(frozen=True)
class BlockRanking:
    """The result, the blocks and what each sweep cost: its wall time, the longest of its
    tasks' own times (the rest is the engine's), the bytes of files read and written."""

    result: CombinedResult
    blocks: tuple[tuple[int, int], ...]
    sweep_seconds: tuple[float, ...]
    task_seconds: tuple[float, ...] = field(default=())
    bytes_read: tuple[int, ...] = field(default=())
    bytes_written: tuple[int, ...] = field(default=())


class Scratch:
    """Arrays a worker thread reuses from task to task: the gathered vectors, the slice
    parts. A new array per task would be new pages per task, and Dask's workers make that
    dear: its nanny starts them with ``MALLOC_TRIM_THRESHOLD_`` set, which turns glibc's
    adaptive mmap threshold off, so every freed large array goes back to the system and
    the next one faults its pages in again (a block task took twice as long). One pool per
    thread (a worker with T threads runs T blocks at once), dropped by :meth:`release`."""

    _lock = threading.Lock()
    _pools: dict[int, dict[str, np.ndarray]] = {}

    def __init__(self) -> None:
        with Scratch._lock:
            self._pool = Scratch._pools.setdefault(threading.get_ident(), {})

    def array(self, name: str, dtype: str, count: int) -> np.ndarray:
        """An array of ``count`` items of ``dtype`` (contents undefined), reused by name."""
        need = count * np.dtype(dtype).itemsize
        buf = self._pool.get(name)
        if buf is None or buf.nbytes < need:
            self._pool.pop(name, None)
            buf = self._pool[name] = np.empty(max(need, 8), dtype=np.uint8)
        return buf[:need].view(dtype)

    def read(self, name: str, path: Path, dtype: str, r0: int, r1: int) -> np.ndarray:
        """Items [r0, r1) of the raw file ``path``, into the array ``name``."""
        out = self.array(name, dtype, r1 - r0)
        read_into(path, out, np.dtype(dtype).itemsize * r0)
        return out

    def slice_part(self, kind: str, dtype: str, count: int) -> np.ndarray:
        return self.array(f"slice-{kind}", dtype, count)

    @classmethod
    def release(cls) -> int:
        """Drop every thread's arrays (a ranking is over); returns the bytes dropped."""
        with cls._lock:
            dropped = sum(a.nbytes for pool in cls._pools.values() for a in pool.values())
            cls._pools.clear()
        return dropped


def _read(path: Path, dtype: str, r0: int, r1: int) -> np.ndarray:
    size = np.dtype(dtype).itemsize
    return np.fromfile(path, dtype=dtype, count=r1 - r0, offset=size * r0)


def _write(path: Path, dtype: str, r0: int, values: np.ndarray) -> None:
    with open(path, "r+b") as f:
        f.seek(np.dtype(dtype).itemsize * r0)
        np.asarray(values, dtype=dtype).tofile(f)


def block_parts(store: SliceStore, blocks: int) -> tuple[tuple[int, int], ...]:
    """``blocks`` runs of consecutive slices (fewer when there are fewer slices), cut at the
    slice boundary nearest to each j/blocks of the running count of links and pages (what
    a sweep costs)."""
    count = max(1, min(int(blocks), store.count))
    cost = np.array([store.link_count(k) + int(store.bounds[k + 1] - store.bounds[k])
                     for k in range(store.count)], dtype=np.float64)
    ends = np.concatenate([[0.0], np.cumsum(cost)])  # ends[c]: cost of the first c slices
    cuts = [0]
    for j in range(1, count):
        target = ends[-1] * j / count
        c = int(np.searchsorted(ends, target, side="left"))  # ends[c - 1] < target <= ends[c]
        if c > 0 and target - ends[c - 1] < ends[c] - target:
            c -= 1
        # each block keeps at least one slice, and leaves one for each block after it
        cuts.append(min(max(c, cuts[-1] + 1), store.count - (count - j)))
    cuts.append(store.count)
    return tuple((a, b) for a, b in zip(cuts[:-1], cuts[1:]))


def start_block(item: BlockRange, before_slice: SliceHook | None = None) -> BlockStart:
    """First pass over a block: its pages' PR₀ = E, the pre-scaled vector, the flags and
    the interest's starting value, into ``item.parity``; returns its dangling and XML
    mass."""
    job, parity = item.job, item.parity
    dangling = xml_mass = 0.0
    for k in range(item.first, item.stop):
        if before_slice is not None:
            before_slice(0, k)
        links = SliceLinks.load(job.store, k)
        r0, r1 = links.first, links.first + links.rows
        e, _ = job.teleport(r0, r1)
        x0 = np.full(r1 - r0, e) if isinstance(e, float) else e
        scaled, flags = start_slice(links, x0, job.equations.damping)
        xml = _read(job.path("xml"), "?", r0, r1)
        _write(job.path("importance", parity), "<f8", r0, x0)
        _write(job.path("scaled", parity), "<f8", r0, scaled)
        _write(job.path("flags"), "u1", r0, flags)
        if job.has_xml:
            _write(job.path("interest", parity), "<f8", r0, xml / job.equations.xml_count)
        dangling += float(x0[flags & DANGLING > 0].sum())
        xml_mass += float(x0[xml].sum())
    return BlockStart(dangling, xml_mass)


def sweep_block(item: BlockSweep, before_slice: SliceHook | None = None) -> BlockStep:
    """One sweep over a block's slices (module doc). ``before_slice`` (optional) is called
    before each slice; a task abandoned there (or killed) leaves the files of parity s − 1
    as they were, so it can be run again."""
    started = time.perf_counter()
    job, s, n = item.job, item.sweep, item.job.store.n
    scratch = Scratch()
    scaled = scratch.read("scaled", job.path("scaled", s - 1), "<f8", 0, n)
    scaled *= item.factor
    scaled_out = scratch.array("scaled-out", "<f8", n) if item.jacobi else None
    interest = (scratch.read("interest", job.path("interest", s - 1), "<f8", 0, n)
                if job.has_xml else None)
    read = 8 * n * (2 if job.has_xml else 1)
    written = 0
    direct = DanglingMass(item.delta, item.mass, spread=job.spread)
    d_diff = d_total = i_diff = i_total = xml_mass = dangling = 0.0
    for k in range(item.first, item.stop):
        if before_slice is not None:
            before_slice(s, k)
        links = SliceLinks.load(job.store, k, scratch.slice_part)
        r0, r1 = links.first, links.first + links.rows
        x = scratch.read("importance", job.path("importance", s - 1), "<f8", r0, r1)
        x *= item.factor
        flags = scratch.read("flags", job.path("flags"), "u1", r0, r1)
        xml = scratch.read("xml", job.path("xml"), "?", r0, r1)
        e, e_bytes = job.teleport(r0, r1)
        read += links.nbytes + 10 * (r1 - r0) + e_bytes
        step = sweep_slice(links, job.equations, x, e, flags, xml, scaled, interest, direct,
                           item.xml_mass, scaled_out)
        d_diff += step.importance_diff
        d_total += step.importance_total
        i_diff += step.interest_diff
        i_total += step.interest_total
        xml_mass += step.xml_mass
        dangling += step.dangling_mass
        _write(job.path("importance", s), "<f8", r0, step.importance)
        _write(job.path("scaled", s), "<f8", r0,
               (scaled if scaled_out is None else scaled_out)[r0:r1])
        written += 16 * (r1 - r0)
        if step.interest is not None:
            _write(job.path("interest", s), "<f8", r0, step.interest)
            written += 8 * (r1 - r0)
    return BlockStep(d_diff, d_total, i_diff, i_total, xml_mass, dangling, read, written,
                     time.perf_counter() - started)


def prepare_job(store: SliceStore, mask: np.ndarray, e: np.ndarray | float, damping: float,
                dangling: str, interest_from_importance: bool) -> BlockJob:
    """Write what the tasks read besides the slices (XML mask, E when not uniform) and make
    the vector files, at their full size, for the tasks to write their pages into."""
    n = store.n
    has_xml = bool(mask.any())
    eq = SliceEquations(damping, float(mask.sum()) if has_xml else 0.0,
                        interest_from_importance)
    job = BlockJob(store, eq, dangling == "paper", e if isinstance(e, float) else None)
    mask.astype("?").tofile(job.path("xml"))
    if not isinstance(e, float):
        np.asarray(e, dtype="<f8").tofile(job.path("teleport"))
    sizes = [("flags", None, n)] + [(name, parity, 8 * n) for parity in (0, 1)
                                    for name in ("importance", "scaled", "interest")
                                    if has_xml or name != "interest"]
    for name, parity, size in sizes:
        with open(job.path(name, parity), "wb") as f:
            f.truncate(size)
    return job


def rank_blocks(store: SliceStore, xml_mask: np.ndarray, params: SolverParams, *,
                run_tasks: RunTasks = serial_tasks, blocks: int = 1,
                personalization: object | None = None, dangling: str = "paper",
                interest_from_importance: bool = False,
                progress: ProgressFn | None = None,
                check_stop: StopCheck | None = None) -> BlockRanking:
    """Both rankings over the slices, in ``blocks`` blocks whose tasks ``run_tasks`` runs.
    Same results, stopping rule and errors as ``ranking.outofcore.rank_out_of_core``;
    raises ConvergenceError after ``max_iter`` sweeps. The vector files stay in the store's
    directory (the caller removes it)."""
    check_dangling(dangling)
    mask = checked_mask(xml_mask, store.n)
    started = time.perf_counter()
    e = personalization_vector(store.n, personalization)
    job = prepare_job(store, mask, e, params.damping, dangling, interest_from_importance)
    parts = block_parts(store, blocks)
    try:
        return _sweeps(job, parts, params, run_tasks, progress, check_stop, started)
    finally:
        if run_tasks is serial_tasks:
            Scratch.release()


@dataclass
class _Carried:
    """What the driver hands from one sweep to the next: the factor of the parity files,
    δ, ‖PR‖₁, the XML pages' importance (E″), and whether the importance is by Jacobi."""

    factor: float
    delta: float
    mass: float
    xml_mass: float
    jacobi: bool = False

    def task(self, job: BlockJob, sweep: int, part: tuple[int, int]) -> BlockSweep:
        return BlockSweep(job, sweep, part[0], part[1], self.factor, self.delta, self.mass,
                          self.xml_mass, self.jacobi)


def _start(job: BlockJob, parts: tuple[tuple[int, int], ...], run_tasks: RunTasks,
           parity: int = 0, jacobi: bool = False) -> _Carried:
    """The first pass into the files of ``parity``: PR₀ = E. Also the restart when
    Gauss-Seidel stalls (``ranking.sweep.Stall``: from the first iterate, since the power
    iteration crawls from the stalled one), into the files the next sweep reads."""
    starts = run_tasks(start_block, [BlockRange(job, a, b, parity) for a, b in parts])
    return _Carried(1.0, sum(s.dangling_mass for s in starts), 1.0,
                    sum(s.xml_mass for s in starts), jacobi)


def _sweeps(job: BlockJob, parts: tuple[tuple[int, int], ...], params: SolverParams,
            run_tasks: RunTasks, progress: ProgressFn | None, check_stop: StopCheck | None,
            started: float) -> BlockRanking:
    store, n = job.store, job.store.n
    stop_point(check_stop)
    carried = _start(job, parts, run_tasks)
    stall = Stall.at_damping(job.equations.damping) if job.spread else None
    method = "out-of-core"
    res_d: list[float] = []
    res_i: list[float] = []
    seconds: list[float] = []
    longest: list[float] = []
    moved_in: list[int] = []
    moved_out: list[int] = []
    for sweep in range(1, params.max_iter + 1):
        stop_point(check_stop)
        t0 = time.perf_counter()
        steps: list[BlockStep] = run_tasks(
            sweep_block, [carried.task(job, sweep, part) for part in parts])
        seconds.append(time.perf_counter() - t0)
        longest.append(max(s.seconds for s in steps))
        moved_in.append(sum(s.bytes_read for s in steps))
        moved_out.append(sum(s.bytes_written for s in steps))
        d_total = sum(s.importance_total for s in steps)
        i_total = sum(s.interest_total for s in steps)
        for total in (d_total, i_total) if job.has_xml else (d_total,):
            if total <= 0.0 or not math.isfinite(total):
                raise ValueError(f"out-of-core ranking: an iterate vanished (sum {total})")
        res_d.append(sum(s.importance_diff for s in steps) / d_total)
        if job.has_xml:
            res_i.append(sum(s.interest_diff for s in steps) / i_total)
        factor = 1.0 / d_total  # renormalize the importance to ‖PR‖₁ = 1
        carried = _Carried(factor, sum(s.dangling_mass for s in steps) * factor,
                           d_total * factor, sum(s.xml_mass for s in steps) * factor,
                           carried.jacobi)
        if progress is not None:
            progress(SweepProgress("importance", sweep, res_d[-1]))
            if job.has_xml:
                progress(SweepProgress("interest", sweep, res_i[-1]))
        if res_d[-1] < params.tol and (not job.has_xml or res_i[-1] < params.tol):
            elapsed = time.perf_counter() - started
            values = _read(job.path("importance", sweep), "<f8", 0, n)
            values /= values.sum()
            interest = (_read(job.path("interest", sweep), "<f8", 0, n) if job.has_xml
                        else np.zeros(n))
            result = CombinedResult(
                RankResult(values, sweep, res_d[-1], tuple(res_d), elapsed, method),
                RankResult(interest, sweep if job.has_xml else 0,
                           res_i[-1] if job.has_xml else 0.0, tuple(res_i), elapsed,
                           method),
                store.count, elapsed / sweep)
            return BlockRanking(result, parts, tuple(seconds), tuple(longest),
                                tuple(moved_in), tuple(moved_out))
        if res_d[-1] < params.tol:
            stall = None  # the importance has converged: the interest is what goes on
        elif stall is not None and stall(res_d[-1]):
            stop_point(check_stop)
            carried = _start(job, parts, run_tasks, parity=sweep, jacobi=True)
            stall, method = None, "out-of-core, then jacobi"
    name, res = ("importance", res_d) if res_d[-1] >= params.tol else ("interest", res_i)
    raise ConvergenceError(name, params.max_iter, res[-1], params.tol, tuple(res))
