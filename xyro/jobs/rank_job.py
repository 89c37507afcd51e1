"""Glue between the ranking package and its callers (`xyro rank`): load, choose in-memory or
out-of-core from the memory budget, run both rankings, rescale to mean 1 (DESIGN.md §5).

The memory budget bounds the whole process (DESIGN.md §5 "Scale": a memory budget picks S),
not only the ranking's arrays: for a graph read from the store, what the ranking may use is
the budget less what the process already holds (its resident set, measured) and less the
compiled sweep kernel still to be loaded (:data:`KERNEL_BYTES`). A graph that does not fit
in that is never held whole: it is streamed from the store in chunks into slice files
(:func:`rank_stream`). ``rank_graph`` (a CSR already in memory, e.g. ``--edges``) compares
its own arrays with the budget as before.

Stopping (a daemon's SIGTERM while the job runs): every entry point takes an optional
``check_stop`` callable, called between two steps of every long loop — reading the graph
(handed on to the reader), spooling, slicing, each slice of each out-of-core sweep, each
in-memory sweep. It returns to go on, or raises (the caller's exception) to abandon the run;
temporary files go with the work directory.

Killed outright (SIGKILL, the OOM killer), a ranking removes nothing: its work folders stay
beside the database, gigabytes each at 200M links. Each ranking therefore starts by removing
those of processes that are gone (:func:`remove_stale_folders`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ranking.graph import INT32_MAX as MAX_PAGES, LinkGraph
from ranking.importance import direct_importance
from ranking.interest import inverse_interest
from ranking.outofcore import rank_out_of_core
from ranking.results import ProgressFn
from ranking.results import SweepProgress
from ranking.slices import (MIN_SLICE_BYTES, RESIDENT_BYTES_PER_PAGE, ArrayCsrSource,
                            FolderOwner, LinkChunk, SliceStore, StopCheck, folder_owner,
                            folder_prefix, is_unowned_folder, machine_tag, min_budget_bytes,
                            process_start, release_free_heap, slice_room, spool_chunks,
                            stop_point)
from ranking.sweep import SolverParams

log = logging.getLogger(__name__)

IN_MEMORY_BYTES_PER_LINK = 24  # out- and in-link CSR, self-link split, transpose temporaries
IN_MEMORY_BYTES_PER_PAGE = 120
# numba's compiled sweep kernels and LLVM, loaded from the kernel cache at the first sweep:
# measured +48 MB of resident set (the compiler itself, on a cold cache, is more).
KERNEL_BYTES = 64 << 20
MIN_RANKING_SHARE = 4      # the ranking gets at least budget / 4, however big the process
STREAM_CHUNK_LINKS = 1 << 20  # links per chunk read from the store (~16 bytes each in flight)
# A work folder named before owners were (no pid in its name) is a left-over once nothing in
# it changed for this long: a live ranking writes there at least once a sweep (its importance
# file), and a sweep takes seconds to minutes.
UNOWNED_STALE_S = 86_400.0


@dataclass(frozen=True)
class RankParams:
    solver: SolverParams = field(default_factory=SolverParams)
    dangling: str = "paper"
    interest_from_importance: bool = False   # E″ instead of E′
    memory_budget_bytes: int = 2 << 30
    work_dir: Path | None = None             # slices go here when out of core
    shared_dir: Path | None = None           # on a cluster: slices here (None: work_dir)


@dataclass(frozen=True)
class RankReport:
    """importance: N·PR (mean 1); interest: mean 1 (all ones when there is no XML page)."""

    importance: np.ndarray
    interest: np.ndarray
    importance_iterations: int
    interest_iterations: int
    importance_residuals: tuple[float, ...]
    interest_residuals: tuple[float, ...]
    seconds: float
    out_of_core: bool
    slices: int


class Cluster(Protocol):
    """Where the sweeps run when not on this host (``rank_cluster.ClusterSession``)."""

    def slice_budget(self, budget: int, n: int, m: int) -> int:
        """The budget the slices of a graph of n pages and m links are cut under, for the
        workers that sweep them."""
        ...

    def rank(self, store: SliceStore, mask: np.ndarray, params: RankParams,
             progress: ProgressFn | None = None,
             check_stop: StopCheck | None = None) -> RankReport:
        ...


class LinkStream(Protocol):
    """A graph read once, in page order (e.g. :class:`metadata.graph.LinkStream`)."""

    n: int
    xml_mask: np.ndarray
    chunks: Iterable[LinkChunk]


def in_memory_bytes(n: int, m: int) -> int:
    return IN_MEMORY_BYTES_PER_LINK * m + IN_MEMORY_BYTES_PER_PAGE * n


def process_rss_bytes() -> int:
    """This process's resident set now (Linux ``/proc/self/statm``); 0 where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def ranking_bytes(budget: int, in_use: int) -> int:
    """What the ranking may add to a process holding ``in_use`` bytes under ``budget``:
    the rest, less the kernel still to load, and never less than budget / 4 (a daemon
    bigger than its budget still ranks, in smaller slices)."""
    return max(budget - in_use - KERNEL_BYTES, budget // MIN_RANKING_SHARE)


def slice_budget(budget: int, n: int) -> int:
    """What this process may cut the slices of ``n`` pages under, given ``budget`` (the
    configured ``ranking.memory_budget_mb``): :func:`ranking_bytes` with its resident set
    measured now. ValueError when that is too little, naming the budget as configured,
    what is subtracted from it, and a budget that would do."""
    in_use = process_rss_bytes()
    usable = ranking_bytes(budget, in_use)
    if slice_room(usable, n) >= MIN_SLICE_BYTES:
        return usable
    need = min_budget_bytes(n)
    # The ranking gets the budget less in_use and the kernel, never less than a quarter of
    # it; a resident set differs from run to run, so leave it a quarter more room.
    enough = min(need + in_use + in_use // 4 + KERNEL_BYTES, MIN_RANKING_SHARE * need)
    robust = "" if enough == MIN_RANKING_SHARE * need else (
        f" (room for a resident set a quarter larger; "
        f"{_mb(MIN_RANKING_SHARE * need)} would do whatever it holds)")
    floor = ", its floor of a quarter" if usable > budget - in_use - KERNEL_BYTES else ""
    raise ValueError(
        f"ranking.memory_budget_mb = {budget / 2**20:g} is too small to rank {n:,} pages "
        f"out of core: this process already holds {in_use / 2**20:.0f} MB (its resident "
        f"set) and the compiled sweeps take {KERNEL_BYTES >> 20} MB, which leaves the "
        f"ranking {usable / 2**20:.1f} MB{floor}: too little for its pages "
        f"({RESIDENT_BYTES_PER_PAGE} bytes each stay resident, beside a slice: {_mb(need)} "
        f"MB); set ranking.memory_budget_mb to at least {_mb(enough)}{robust}")


def _mb(size: int) -> int:
    """``size`` bytes in MiB, rounded up."""
    return -(-size // 2**20)


def fits_in_memory(n: int, m: int, budget: int) -> bool:
    """True when a graph of ``n`` pages and ``m`` links can be ranked whole, in memory,
    by this process under ``budget`` (see :func:`ranking_bytes`)."""
    return in_memory_bytes(n, m) <= ranking_bytes(budget, process_rss_bytes())


def mean_one(values: np.ndarray) -> np.ndarray:
    total = float(values.sum())
    return values * (len(values) / total) if total > 0 else np.ones_like(values)


def _checked(progress: ProgressFn | None, check_stop: StopCheck | None) -> ProgressFn | None:
    """``progress`` that also calls ``check_stop`` after every sweep."""
    if check_stop is None:
        return progress

    def report(p: SweepProgress) -> None:
        if progress is not None:
            progress(p)
        check_stop()
    return report


def rank_graph(indptr: np.ndarray, indices: np.ndarray, xml_mask: np.ndarray,
               params: RankParams = RankParams(),
               progress: ProgressFn | None = None,
               check_stop: StopCheck | None = None,
               cluster: Cluster | None = None) -> RankReport:
    """Rank an out-link CSR (``indptr`` int64[n+1], ``indices`` int32[m], url-id order).

    With a ``cluster``, always out of core, on its workers (the slices go to
    ``params.shared_dir``)."""
    stop_point(check_stop)
    remove_stale_folders([params.work_dir, _slices_dir(params, cluster)])
    graph = LinkGraph.from_csr(indptr, indices)
    stop_point(check_stop)
    progress = _checked(progress, check_stop)
    mask = np.asarray(xml_mask, dtype=bool)
    if mask.shape != (graph.n,):
        raise ValueError(f"xml_mask has shape {mask.shape}, expected ({graph.n},)")
    has_xml = bool(mask.any())
    if cluster is None and in_memory_bytes(graph.n, graph.m) <= params.memory_budget_bytes:
        imp = direct_importance(graph, params.solver, dangling=params.dangling,
                                progress=progress)
        if has_xml:
            inter = inverse_interest(graph, mask, params.solver, progress=progress,
                                     importance=imp.values if params.interest_from_importance
                                     else None)
            inter_values, inter_it, inter_res = inter.values, inter.iterations, inter.residuals
            seconds = imp.seconds + inter.seconds
        else:
            inter_values, inter_it, inter_res = np.zeros(graph.n), 0, ()
            seconds = imp.seconds
        return RankReport(mean_one(imp.values), mean_one(inter_values), imp.iterations,
                          inter_it, imp.residuals, inter_res, seconds, False, 1)
    budget = (params.memory_budget_bytes if cluster is None
              else cluster.slice_budget(params.memory_budget_bytes, graph.n, graph.m))
    with tempfile.TemporaryDirectory(prefix=folder_prefix("slices"),
                                     dir=_slices_dir(params, cluster)) as work:
        store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), Path(work),
                                 budget, check_stop=check_stop)
        return _rank_slices(store, mask, params, progress, check_stop, cluster)


def remove_stale_folders(directories: Iterable[Path | None]) -> None:
    """Remove the work folders that rankings killed outright left in ``directories`` (None:
    the system's temporary folder), with one INFO line of what was freed.

    Only this user's folders named by :func:`ranking.slices.folder_prefix`, made on this
    machine by a process that is gone: no longer running, or its pid now another process's
    (a different start). Never a live process's: another ``xyro rank --edges`` may work in
    the same folder. A folder of the older naming (no owner in it) goes once nothing in it
    changed for :data:`UNOWNED_STALE_S`. Plain ``tmp…`` folders (what older versions
    called the slices of a graph ranked from memory) are anyone's name, and stay."""
    removed: list[str] = []
    freed = 0
    for directory in dict.fromkeys(Path(d or tempfile.gettempdir()).resolve()
                                   for d in directories):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if not _left_over(entry):
                continue
            size, _ = _tree_stats(entry.path)
            if _remove_tree(entry.path):
                removed.append(entry.path)
                freed += size
    if removed:
        log.info("removed %d work folder(s) of rankings killed before they finished, "
                 "%.1f MB freed: %s", len(removed), freed / 2**20, ", ".join(removed))


def _left_over(entry: os.DirEntry[str]) -> bool:
    """True when ``entry`` is a work folder of this user left by a ranking that is gone."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
        if entry.stat(follow_symlinks=False).st_uid != os.getuid():
            return False
    except OSError:
        return False
    owner = folder_owner(entry.name)
    if owner is not None:
        return owner.machine == machine_tag() and not _running(owner)
    if is_unowned_folder(entry.name):
        return time.time() - _tree_stats(entry.path)[1] > UNOWNED_STALE_S
    return False


def _running(owner: FolderOwner) -> bool:
    """True while the process that made a folder runs (on this machine)."""
    if not 0 < owner.pid < 2**31:
        return False
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: running
    started = process_start(owner.pid)
    return owner.started is None or started is None or started == owner.started


def _tree_stats(path: str) -> tuple[int, float]:
    """The bytes of the files under ``path`` and the latest change of anything there."""
    size, newest = 0, 0.0
    for root, _, files in os.walk(path):
        for name in (None, *files):  # None: the folder itself
            try:
                st = os.lstat(root if name is None else os.path.join(root, name))
            except OSError:
                continue
            newest = max(newest, st.st_mtime)
            size += 0 if name is None else st.st_size
    return size, newest


def _remove_tree(path: str) -> bool:
    """Remove ``path``; False, with a warning, if it could not be."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return False  # another ranking removed it first
    except OSError as exc:
        log.warning("could not remove %s, left by a ranking killed before it finished (%s): "
                    "remove it by hand", path, exc)
        return False
    return True


def _slices_dir(params: RankParams, cluster: Cluster | None) -> Path | None:
    """Where the slices go: the shared directory for a cluster, else the work directory."""
    if cluster is None:
        return params.work_dir
    # absolute: the workers do not share this process's working directory
    shared = params.shared_dir or params.work_dir or Path(tempfile.gettempdir())
    return Path(shared).resolve()


def read_csr(read_links: Callable[[int], AbstractContextManager[LinkStream]],
             check_stop: StopCheck | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A graph small enough to rank in memory, read from a :class:`LinkStream` as an out-link
    CSR: (indptr int64[n+1], indices int32[m], xml_mask bool[n]).

    Chunk by chunk (:data:`STREAM_CHUNK_LINKS` links), never one scan into one list of
    rows: each chunk is a stop point, and no step holds the GIL for long (a whole-graph
    export spends a second or more of 20M links in single C calls, ``zip(*rows)`` and the
    like, during which no other thread runs: not the crawl, not the signal handler). Faster
    too: 2.5 s instead of 4.1 s for 2M pages and 20M links."""
    with read_links(STREAM_CHUNK_LINKS) as links:
        mask = np.asarray(links.xml_mask, dtype=bool)
        indptr = np.zeros(links.n + 1, dtype=np.int64)  # out-degrees, prefix sums below
        parts: list[np.ndarray] = []
        for rows, degrees, children in links.chunks:
            stop_point(check_stop)
            indptr[np.asarray(rows, dtype=np.int64) + 1] = degrees
            parts.append(np.asarray(children, dtype=np.int32))
    stop_point(check_stop)
    indices = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    del parts
    np.cumsum(indptr, out=indptr)
    return indptr, indices, mask


def rank_stream(read_links: Callable[[int], AbstractContextManager[LinkStream]],
                params: RankParams = RankParams(),
                progress: ProgressFn | None = None,
                check_stop: StopCheck | None = None,
                cluster: Cluster | None = None) -> RankReport:
    """Rank a graph too big to hold whole, out of core (DESIGN.md §5 "Scale", 003 §5.3).

    ``read_links(max_links)`` opens the graph as a :class:`LinkStream` of chunks of about
    ``max_links`` links (a read snapshot of the store). The chunks are spooled to a file
    while the stream is open, so the snapshot lasts one scan; the slices are then cut from
    that file under what the budget leaves once the process's own resident set is counted
    (:func:`slice_budget`: ValueError if too little), and both rankings run over them. At no
    time is more than a chunk, the per-page vectors and one slice in memory. ``check_stop``
    is called between chunks and slices (``read_links`` is expected to check it as it
    reads, if it can).

    With a ``cluster``, the slices go to ``params.shared_dir``, cut under what the budget
    leaves on its workers, and the sweeps run there."""
    remove_stale_folders([params.work_dir, _slices_dir(params, cluster)])
    in_use = process_rss_bytes()
    chunk = max(1, min(STREAM_CHUNK_LINKS,
                       ranking_bytes(params.memory_budget_bytes, in_use) // 64))
    with tempfile.TemporaryDirectory(prefix=folder_prefix("rank"), dir=params.work_dir) as work, \
            tempfile.TemporaryDirectory(prefix=folder_prefix("slices"),
                                        dir=_slices_dir(params, cluster)) as shared:
        with read_links(chunk) as links:
            if cluster is None:  # a budget too small fails now, not after the spooling
                slice_budget(params.memory_budget_bytes, links.n)
            mask = np.asarray(links.xml_mask, dtype=bool)
            source = spool_chunks(links.chunks, links.n, Path(work), check_stop)
        release_free_heap()
        budget = (slice_budget(params.memory_budget_bytes, source.n) if cluster is None
                  else cluster.slice_budget(params.memory_budget_bytes, source.n, source.m))
        store = SliceStore.build(source, Path(shared), budget, check_stop=check_stop)
        shutil.rmtree(source.indices_path.parent)
        log.info("link graph read and cut into %d slices for the out-of-core sweeps%s",
                 store.count, "" if cluster is None else " on the cluster")
        report = _rank_slices(store, mask, params, progress, check_stop, cluster)
    release_free_heap()
    return report


def _rank_slices(store: SliceStore, mask: np.ndarray, params: RankParams,
                 progress: ProgressFn | None, check_stop: StopCheck | None = None,
                 cluster: Cluster | None = None) -> RankReport:
    if cluster is not None:
        return cluster.rank(store, mask, params, progress, check_stop)
    both = rank_out_of_core(store, mask, params.solver, dangling=params.dangling,
                            interest_from_importance=params.interest_from_importance,
                            progress=progress, check_stop=check_stop)
    return RankReport(mean_one(both.importance.values), mean_one(both.interest.values),
                      both.importance.iterations, both.interest.iterations,
                      both.importance.residuals, both.interest.residuals,
                      both.importance.seconds, True, both.slices)


def load_edge_list(path: Path | str) -> tuple[LinkGraph, np.ndarray]:
    """The graph and XML mask of a bare ``.npz`` edge list with ``n``, ``src``, ``dst`` (and
    an optional ``xml`` mask; none: no XML page). ValueError saying what is wrong."""
    try:
        data = np.load(path, allow_pickle=False)
        problem = None if isinstance(data, np.lib.npyio.NpzFile) else "one bare array"
    except ValueError:  # numpy's guess: pickled data (allow_pickle stays off)
        problem = "not a numpy archive"
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        problem = str(exc)
    if problem is not None:
        raise ValueError(f"{path} is not a readable .npz edge list ({problem}); give a file "
                         "saved by numpy.savez with arrays n, src, dst")
    with data:
        try:
            return _edge_arrays(path, data)
        except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
            # np.load reads only the zip directory; a member is read (and its CRC or
            # compressed stream checked) when its array is asked for
            raise ValueError(f"{path} is not a readable .npz edge list ({exc}); give a file "
                             "saved by numpy.savez with arrays n, src, dst") from None


def _edge_arrays(path: Path | str, data: Any) -> tuple[LinkGraph, np.ndarray]:
    """The arrays of an open .npz edge list, checked (:func:`load_edge_list`)."""
    missing = {"n", "src", "dst"} - set(data.files)
    if missing:
        raise ValueError(f"{path}: missing arrays {sorted(missing)}; need n, src, dst")
    arrays = {name: data[name] for name in ("n", "src", "dst", "xml") if name in data.files}
    for name, value in arrays.items():   # a member without numpy's header reads as bytes
        if not isinstance(value, np.ndarray):
            raise ValueError(f"{path}: {name} is not a numpy array; give a file saved by "
                             "numpy.savez with arrays n, src, dst")
    n_array = arrays["n"]
    if n_array.shape != () or n_array.dtype.kind not in "iu" or int(n_array) < 0:
        raise ValueError(f"{path}: n must be one whole number ≥ 0 (the page count), got "
                         f"an array of shape {n_array.shape} and type {n_array.dtype}")
    n = int(n_array)
    if n > MAX_PAGES:   # before any array of n entries is made (a few bytes asked for 24 GB)
        raise ValueError(f"{path}: n = {n} pages, more than the {MAX_PAGES} a graph may hold "
                         "(32-bit page ids)")
    graph = LinkGraph.from_edges(arrays["src"], arrays["dst"], n)
    mask = arrays.get("xml", np.zeros(n, dtype=bool))
    if mask.dtype != bool and not (mask.dtype.kind in "iu" and np.isin(mask, (0, 1)).all()):
        # "false" as a string, or NaN, converted to True: every page silently XML
        raise ValueError(f"{path}: xml must be booleans (or 0/1), got type {mask.dtype}")
    if mask.shape != (n,):
        raise ValueError(f"{path}: xml must hold one flag per page ({n}), got shape "
                         f"{mask.shape}")
    return graph, mask.astype(bool)


def rank_edges_file(path: Path | str, params: RankParams = RankParams(),
                    progress: ProgressFn | None = None,
                    cluster: Cluster | None = None) -> RankReport:
    """Rank a bare edge list .npz with ``n``, ``src``, ``dst`` (and optional ``xml`` mask)."""
    graph, mask = load_edge_list(path)
    return rank_graph(graph.indptr, graph.indices, mask, params, progress, cluster=cluster)
