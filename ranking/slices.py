"""The link matrix cut into S slices on disk, for the out-of-core ranking (003 §5.3).

Slice k covers the page range [b_k, b_{k+1}) and holds, as raw files in a work directory:
- the in-links of its pages (CSR, row = destination i, entries = sources j): the direct
  ranking's new values for the slice are computed from these;
- the out-links of its pages (CSR, row = source i, entries = destinations j): the inverse
  ranking's new values for the slice are computed from these.
Storing each slice in both orientations (4 bytes per link each) lets both rankings update
the same page range in the same pass, Gauss-Seidel style, in ONE scan of the slices. The
paper stores one orientation and accumulates the inverse ranking's partial sums over all
slices, which makes the inverse a Jacobi iteration; we pay 4 more bytes per link on disk to
keep Gauss-Seidel for both.

Resident while ranking: 18 bytes per page (the direct vector pre-scaled by c/OutDeg, the
interest vector, the XML mask, the page flags: the gathers need random access to them) plus
one slice. The
direct importance itself lives on disk and is read and written one slice at a time. The
memory budget picks S so that the largest slice fits beside the resident vectors.

The graph is read from a ``CsrSource`` chunk by chunk (never whole), so a graph kept in
files can be sliced without loading it. A graph that arrives as a one-shot stream of link
chunks (a database scan, in page order) is first spooled to the two files of a
``FileCsrSource`` (:func:`spool_chunks`, one pass, 4 bytes per link written sequentially):
cutting slices needs every page's in-degree before the first slice is written, so ``build``
reads its source twice, and a stream can be read once.

Stopping: the long loops here (one per chunk or slice) call an optional ``check_stop``
callable between two steps. It returns when the work may go on and raises (an exception of
the caller's choosing, e.g. a daemon's stop) to abandon it; the files written so far stay in
the work directory, which the caller removes.

Work folders are named after the process that makes them (:func:`folder_prefix`): a
process killed outright (SIGKILL, the OOM killer) removes nothing, and the name lets a
later ranking tell its folders from a live process's (:func:`folder_owner`).
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import socket
import tempfile
from dataclasses import dataclass
from functools import cache
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import numpy as np
from scipy.sparse import _sparsetools as sparsetools

RESIDENT_BYTES_PER_PAGE = 18
# Per page of the slice being swept: both row pointers (int64, 16), the per-row vectors of
# both rankings (scaled inverse degree, importance, personalization and teleport terms, the
# temporaries of numpy expressions: ~12 float64) and the flags. 192 keeps the 20M-page /
# 200M-link benchmark at 0.98x its 1 GB budget (11 slices, tests/bench/pagerank.py, out of
# core), numba's compiled kernel (~120 MB) included.
SLICE_BYTES_PER_PAGE = 192
SLICE_BYTES_PER_LINK = 4    # one int32 per link, per orientation
USABLE_FRACTION = 0.8       # of the budget; the rest is for numpy temporaries and Python
# Sorting a slice's in-links (SliceStore._sort_bucket) holds its int32 indices, charged
# above, plus one piece of its bucket: per pair, first the pair read and its two columns
# (16), then the piece sorted by row (4) and the int64 places it goes to, with their
# temporary (16). A piece takes at most an eighth of the slice's room, out of the budget's
# share kept for temporaries.
SORT_BYTES_PER_PAIR = 20
SORT_PIECE_SHARE = 8

StopCheck = Callable[[], None]
"""Called between two steps of a long loop: returns to go on, raises to abandon the work."""


# xyro-<kind>-<pid>[.<start>]-<machine>-<mkdtemp's 8 random characters>
_OWNED_FOLDER = re.compile(r"xyro-(?:rank|slices|links)-(\d+)(?:\.(\d+))?-(.+)-[a-z0-9_]{8}")
_UNOWNED_FOLDER = re.compile(r"xyro-(?:rank|slices|links)-[a-z0-9_]{8}")  # before owners


@dataclass(frozen=True)
class FolderOwner:
    """The process that made a work folder, as its name says (:func:`folder_prefix`)."""

    pid: int
    started: int | None  # its start, in clock ticks after boot (Linux), when known
    machine: str         # :func:`machine_tag` of where it ran


def folder_prefix(kind: str) -> str:
    """The start of the name of a new work folder of ``kind`` ("rank", "slices", "links"):
    ``xyro-<kind>-<pid>.<start>-<machine>-``. The start (:func:`process_start`) tells
    this process from a later one given the same pid (a container's daemon gets the same
    pid at each restart); the machine tells which host's pids these are, in a folder
    several hosts share (``ranking.cluster_dir``)."""
    pid = os.getpid()
    started = process_start(pid)
    owner = str(pid) if started is None else f"{pid}.{started}"
    return f"xyro-{kind}-{owner}-{machine_tag()}-"


def folder_owner(name: str) -> FolderOwner | None:
    """Who made the work folder called ``name``; None if the name is not of
    :func:`folder_prefix` (see :func:`is_unowned_folder` for the names used before)."""
    match = _OWNED_FOLDER.fullmatch(name)
    if match is None:
        return None
    pid, started, machine = match.groups()
    return FolderOwner(int(pid), None if started is None else int(started), machine)


def is_unowned_folder(name: str) -> bool:
    """True for a work folder named as before owners were written into the names."""
    return _UNOWNED_FOLDER.fullmatch(name) is not None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (Linux ``/proc``: field 22
    of its stat, after the command name in parentheses); None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@cache
def machine_tag() -> str:
    """This host and pid namespace, as a name part: the host name (letters, digits, dots
    and dashes only; at most 48 characters) and, on Linux, the pid namespace's inode (two
    containers may share a host name but not their pids)."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:48] or "_"
    try:
        namespace = re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))
    except OSError:
        namespace = ""
    return f"{host}.{namespace}" if namespace else host


def read_into(path: Path, out: np.ndarray, offset: int) -> None:
    """Fill ``out`` from ``path`` at byte ``offset`` (no new array); OSError if short."""
    view = memoryview(out).cast("B")
    with open(path, "rb", buffering=0) as f:
        f.seek(offset)
        done = 0
        while done < len(view):
            got = f.readinto(view[done:])
            if not got:
                raise OSError(f"{path}: {len(view) - done} bytes missing at {offset + done}")
            done += got


def release_free_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``; a no-op
    elsewhere). Freed numpy buffers under glibc's dynamic mmap threshold (up to 32 MB) and
    a closed SQLite connection's page cache stay resident otherwise, and would count
    against the budget of what comes next."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def stop_point(check_stop: StopCheck | None) -> None:
    """A place where a long loop may be abandoned: calls ``check_stop`` when given."""
    if check_stop is not None:
        check_stop()


class CsrSource(Protocol):
    """Out-link CSR readable by row ranges."""

    n: int
    m: int

    def pointers(self, start: int, stop: int) -> np.ndarray:
        """indptr[start:stop+1] as int64."""
        ...

    def rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(indptr[start:stop+1] as int64, the int32 indices of those rows)."""
        ...


@dataclass(frozen=True)
class ArrayCsrSource:
    """A CSR held in arrays (or memory maps)."""

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    @property
    def m(self) -> int:
        return len(self.indices)

    def pointers(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.indptr[start:stop + 1], dtype=np.int64)

    def rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        ptr = self.pointers(start, stop)
        return ptr, np.asarray(self.indices[int(ptr[0]):int(ptr[-1])], dtype=np.int32)


@dataclass(frozen=True)
class FileCsrSource:
    """A CSR in two raw little-endian files: int64 indptr[n+1] and int32 indices[m].

    Read with explicit file reads, not memory maps, so pages read do not stay resident."""

    indptr_path: Path
    indices_path: Path

    @property
    def n(self) -> int:
        return os.path.getsize(self.indptr_path) // 8 - 1

    @property
    def m(self) -> int:
        return os.path.getsize(self.indices_path) // 4

    def pointers(self, start: int, stop: int) -> np.ndarray:
        return np.fromfile(self.indptr_path, dtype="<i8", count=stop - start + 1,
                           offset=8 * start)

    def rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        ptr = self.pointers(start, stop)
        count = int(ptr[-1] - ptr[0])
        return ptr, np.fromfile(self.indices_path, dtype="<i4", count=count,
                                offset=4 * int(ptr[0]))


LinkChunk = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A piece of an out-link CSR in a stream: (rows, out-degrees, destinations).

``rows``: 0-based page ids, increasing within the chunk and from chunk to chunk (pages
without out-links may be absent); ``degrees[k]``: the number of out-links of ``rows[k]``;
``destinations``: their out-links, row after row, in page order (Σ degrees of them)."""


def spool_chunks(chunks: Iterable[LinkChunk], n: int, directory: Path,
                 check_stop: StopCheck | None = None) -> FileCsrSource:
    """Write a stream of link chunks over ``n`` pages as a ``FileCsrSource`` (003 §5.3).

    One pass: each chunk's destinations are appended to the indices file as they come, and
    only the out-degrees (8 bytes per page) and one chunk are held in memory. The files go
    to a new folder under ``directory`` (the caller removes it). Raises ValueError on a
    chunk that is malformed, out of order or names a page outside [0, n). ``check_stop``
    is called before each chunk is read."""
    if n < 1:
        raise ValueError(f"n={n}: the graph has no pages, nothing to rank")
    folder = Path(tempfile.mkdtemp(prefix=folder_prefix("links"), dir=directory))
    indptr = np.zeros(n + 1, dtype=np.int64)  # out-degrees first, prefix sums at the end
    after = -1  # the last row seen
    with open(folder / "indices.bin", "wb") as f:
        stop_point(check_stop)
        for rows, degrees, destinations in chunks:
            rows, degrees, destinations = _checked_chunk(rows, degrees, destinations, n, after)
            if len(rows):
                indptr[rows + 1] = degrees
                after = int(rows[-1])
            destinations.astype("<i4", copy=False).tofile(f)
            stop_point(check_stop)
    np.cumsum(indptr, out=indptr)
    indptr.astype("<i8", copy=False).tofile(folder / "indptr.bin")
    return FileCsrSource(folder / "indptr.bin", folder / "indices.bin")


def _checked_chunk(rows: object, degrees: object, destinations: object, n: int,
                   after: int) -> LinkChunk:
    """The chunk as (int64, int64, int32) arrays; ValueError naming what is wrong."""
    r = np.asarray(rows, dtype=np.int64)
    d = np.asarray(degrees, dtype=np.int64)
    dst = np.asarray(destinations)
    if r.ndim != 1 or d.shape != r.shape or dst.ndim != 1:
        raise ValueError(f"a link chunk has {r.shape} rows, {d.shape} degrees and "
                         f"{dst.shape} destinations: expected three 1-D arrays, one degree "
                         "per row")
    if dst.size and not np.issubdtype(dst.dtype, np.integer):
        raise ValueError(f"link destinations must be integer page ids, got {dst.dtype}")
    if len(r) and (int(r[0]) <= after or bool(np.any(r[1:] <= r[:-1]))):
        raise ValueError(f"link chunk rows must increase (row {int(r[0])} after {after}); "
                         "stream the pages in id order")
    if len(r) and int(r[-1]) >= n:
        raise ValueError(f"link chunk row {int(r[-1])} is outside the graph's n={n} pages")
    if bool(np.any(d < 0)) or int(d.sum()) != len(dst):
        raise ValueError(f"link chunk degrees sum to {int(d.sum())} but it holds {len(dst)} "
                         "destinations")
    if dst.size and (int(dst.min()) < 0 or int(dst.max()) >= n):
        bad = int(dst.min()) if int(dst.min()) < 0 else int(dst.max())
        raise ValueError(f"a link points to page {bad}, outside the graph's n={n} pages "
                         "(ids must be in [0, n))")
    return r, d, dst.astype(np.int32, copy=False)


POINTER_PIECE_ROWS = 1 << 20
MIN_SLICE_BYTES = 64 * SLICE_BYTES_PER_PAGE  # SliceStore.build cuts no smaller slices


def slice_room(budget_bytes: int, n: int) -> int:
    """What ``budget_bytes`` leaves for one slice beside the resident vectors of ``n``
    pages; ``SliceStore.build`` refuses a budget that leaves less than MIN_SLICE_BYTES."""
    return int(budget_bytes * USABLE_FRACTION) - RESIDENT_BYTES_PER_PAGE * n


def min_budget_bytes(n: int) -> int:
    """The budget to ask for ``n`` pages: it leaves 16 MiB for a slice beside the resident
    vectors (MIN_SLICE_BYTES would do, in thousands of tiny slices)."""
    return math.ceil((RESIDENT_BYTES_PER_PAGE * n + (1 << 24)) / USABLE_FRACTION) + 1


def budget_for_slices(n: int, m: int, count: int) -> int:
    """A budget under which ``SliceStore.build`` cuts a graph of ``n`` pages and ``m`` links
    into about ``count`` slices (at least; more where single rows are heavy)."""
    per_slice = (SLICE_BYTES_PER_PAGE * n + 2 * SLICE_BYTES_PER_LINK * m) / max(1, count)
    usable = max(per_slice, 64 * SLICE_BYTES_PER_PAGE)
    return int((RESIDENT_BYTES_PER_PAGE * n + usable) / USABLE_FRACTION) + 1


def row_cuts(source: CsrSource, row_cost: int, link_cost: int, piece_cost: int) -> np.ndarray:
    """Row boundaries so that each piece costs at most about ``piece_cost`` bytes.

    A row costs ``row_cost`` + ``link_cost`` per out-link (greedy, by reading indptr in
    pieces). A single row costlier than ``piece_cost`` becomes a piece of its own."""
    cuts, base_rows, base_links = [0], 0, 0
    for start in range(0, source.n, POINTER_PIECE_ROWS):
        stop = min(source.n, start + POINTER_PIECE_ROWS)
        ptr = source.pointers(start, stop)
        rows = np.arange(start, stop + 1, dtype=np.int64)
        while True:
            cost = (rows - base_rows) * row_cost + (ptr - base_links) * link_cost
            over = int(np.searchsorted(cost, piece_cost, side="right"))
            if over > len(rows) - 1:
                break
            cut = max(int(rows[over]) - 1, cuts[-1] + 1)
            cuts.append(cut)
            base_rows, base_links = cut, int(ptr[cut - start])
    if cuts[-1] != source.n:
        cuts.append(source.n)
    return np.asarray(cuts, dtype=np.int64)


@dataclass(frozen=True)
class _CombinedPointers:
    """Pointers counting a row's out-links plus in-links (in-degree prefix sums in memory)."""

    source: CsrSource
    in_prefix: np.ndarray

    @property
    def n(self) -> int:
        return self.source.n

    def pointers(self, start: int, stop: int) -> np.ndarray:
        return self.source.pointers(start, stop) + self.in_prefix[start:stop + 1]


@dataclass(frozen=True)
class SliceStore:
    """S slices on disk under ``directory``; ``bounds`` int64[S+1] page ranges."""

    directory: Path
    n: int
    m: int
    bounds: np.ndarray

    @property
    def count(self) -> int:
        return len(self.bounds) - 1

    def _path(self, kind: str, k: int) -> Path:
        return self.directory / f"{kind}-{k:05d}.bin"

    def link_count(self, k: int) -> int:
        """Links of slice k, in-links and out-links (each link is in two slices' counts)."""
        return (os.path.getsize(self._path("in-idx", k))
                + os.path.getsize(self._path("out-idx", k))) // SLICE_BYTES_PER_LINK

    def load(self, k: int, into: Callable[[str, str, int], np.ndarray] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Slice k: (in_indptr, in_indices, out_indptr, out_indices), local int64 pointers.

        ``into(kind, dtype, count)`` (optional) gives the array to read each part into (a
        reusable buffer: ``ranking.blocks.Scratch``); new arrays otherwise. OSError naming
        the file if the slice is not a valid CSR of its rows over the n pages: the sweep
        kernels index without bounds checks, and a slice file cut short on disk (a short
        write, a full disk, a stale network read) would read memory out of bounds."""
        parts = []
        for kind, dtype in (("in-ptr", "<i8"), ("in-idx", "<i4"), ("out-ptr", "<i8"),
                            ("out-idx", "<i4")):
            path = self._path(kind, k)
            if into is None:
                parts.append(np.fromfile(path, dtype=dtype))
                continue
            size = np.dtype(dtype).itemsize
            out = into(kind, dtype, os.path.getsize(path) // size)
            read_into(path, out, 0)
            parts.append(out)
        rows = int(self.bounds[k + 1] - self.bounds[k])
        self._check_csr(k, "in", parts[0], parts[1], rows)
        self._check_csr(k, "out", parts[2], parts[3], rows)
        return parts[0], parts[1], parts[2], parts[3]

    def _check_csr(self, k: int, side: str, ptr: np.ndarray, idx: np.ndarray,
                   rows: int) -> None:
        """OSError unless (``ptr``, ``idx``), slice k's ``side`` part, is a CSR of ``rows``
        rows over pages [0, n): O(rows + links), vectorised."""
        ptr_path, idx_path = self._path(f"{side}-ptr", k), self._path(f"{side}-idx", k)
        if len(ptr) != rows + 1:
            problem = (f"{ptr_path} holds {len(ptr)} row pointers, not the {rows + 1} of "
                       f"its {rows} pages")
        elif ptr[0] != 0 or bool(np.any(ptr[1:] < ptr[:-1])):
            problem = f"{ptr_path}: its row pointers do not rise from 0"
        elif ptr[-1] != len(idx):
            problem = (f"{idx_path} holds {len(idx)} links, but {ptr_path} counts "
                       f"{int(ptr[-1])}")
        elif len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= self.n):
            problem = f"{idx_path} names pages outside [0, {self.n})"
        else:
            return
        raise self._damaged(k, problem)

    def _damaged(self, k: int, problem: str) -> OSError:
        """The error for slice k's files found not to be what was written to them."""
        return OSError(f"slice {k} of the out-of-core ranking is damaged: {problem}; the file "
                       "is not what was written to it (a short write, a full disk, a stale "
                       f"network read?): check the disk of {self.directory.parent}, then "
                       "rank again (each ranking cuts its slices anew)")

    @classmethod
    def build(cls, source: CsrSource, directory: Path, budget_bytes: int,
              chunk_links: int = 1 << 22, check_stop: StopCheck | None = None) -> SliceStore:
        """Cut the graph into slices that fit the memory budget (three streaming passes;
        ``check_stop`` is called before each chunk, each slice and each piece of a bucket).

        The first pass counts in-degrees, which give the slice bounds and each slice's
        in-link row pointers; the second writes the out-link CSRs and appends each in-link,
        as a (destination, source) pair, to its slice's bucket file; the third turns each
        bucket into its in-link CSR (:meth:`_sort_bucket`)."""
        n, m = source.n, source.m
        usable = slice_room(budget_bytes, n)
        chunk_links = max(1, min(chunk_links, usable // 64))
        if usable < MIN_SLICE_BYTES:
            raise ValueError(f"memory budget of {budget_bytes} bytes is too small for {n} pages "
                             f"out of core ({RESIDENT_BYTES_PER_PAGE} bytes per page stay "
                             f"resident); give at least {min_budget_bytes(n)} bytes")
        directory = Path(tempfile.mkdtemp(prefix=folder_prefix("slices"), dir=directory))
        in_prefix = np.zeros(n + 1, dtype=np.int64)
        chunks = row_cuts(source, 0, 1, chunk_links)
        for a, b in zip(chunks[:-1], chunks[1:]):
            stop_point(check_stop)
            _, idx = source.rows(int(a), int(b))
            counts = np.bincount(idx)
            in_prefix[1:len(counts) + 1] += counts
        np.cumsum(in_prefix, out=in_prefix)
        bounds = row_cuts(_CombinedPointers(source, in_prefix), SLICE_BYTES_PER_PAGE,
                          SLICE_BYTES_PER_LINK, usable)
        store = cls(directory, n, m, bounds)
        for k in range(store.count):
            a, b = int(bounds[k]), int(bounds[k + 1])
            (in_prefix[a:b + 1] - in_prefix[a]).astype("<i8").tofile(store._path("in-ptr", k))
            store._path("out-ptr", k).touch()
            store._path("out-idx", k).touch()
        del in_prefix
        store._write_out_slices_and_buckets(source, chunks, check_stop)
        release_free_heap()  # that pass's chunks, before a slice's in-links are sorted
        piece = max(1, min(chunk_links, usable // (SORT_PIECE_SHARE * SORT_BYTES_PER_PAIR)))
        for k in range(store.count):
            stop_point(check_stop)
            store._sort_bucket(k, piece, check_stop)
        return store

    def _write_out_slices_and_buckets(self, source: CsrSource, chunks: np.ndarray,
                                      check_stop: StopCheck | None = None) -> None:
        bases = [int(source.pointers(int(r), int(r))[0]) for r in self.bounds[:-1]]
        for a, b in zip(chunks[:-1].tolist(), chunks[1:].tolist()):
            stop_point(check_stop)
            ptr, idx = source.rows(a, b)
            first = int(np.searchsorted(self.bounds, a, side="right")) - 1
            last = int(np.searchsorted(self.bounds, b - 1, side="right")) - 1
            for k in range(first, last + 1):
                r0, r1 = max(a, int(self.bounds[k])), min(b, int(self.bounds[k + 1]))
                continued = r0 > int(self.bounds[k])  # its first pointer is already written
                local = ptr[r0 - a + int(continued):r1 - a + 1] - bases[k]
                with open(self._path("out-ptr", k), "ab") as f:
                    local.astype("<i8").tofile(f)
                with open(self._path("out-idx", k), "ab") as f:
                    idx[int(ptr[r0 - a] - ptr[0]):int(ptr[r1 - a] - ptr[0])].tofile(f)
            sources = np.repeat(np.arange(a, b, dtype=np.int32), np.diff(ptr))
            owner = np.searchsorted(self.bounds, idx, side="right") - 1
            order = np.argsort(owner, kind="stable")
            splits = np.cumsum(np.bincount(owner, minlength=self.count))[:-1]
            for k, (d, s) in enumerate(zip(np.split(idx[order], splits),
                                           np.split(sources[order], splits))):
                if len(d):
                    with open(self._path("bucket", k), "ab") as f:
                        np.stack([d, s], axis=1).astype("<i4").tofile(f)

    def _sort_bucket(self, k: int, piece_links: int,
                     check_stop: StopCheck | None = None) -> None:
        """Turn slice k's bucket of (destination, source) pairs into its in-link CSR.

        A counting sort: the row pointers are on disk already (``build`` wrote them from
        the in-degrees) and the bucket is read in pieces of ``piece_links`` pairs, each
        piece's sources scattered to their rows' next free places in one int32 array. So
        the sort holds 4 bytes per in-link, what ``row_cuts`` charged the slice, plus one
        piece (SORT_BYTES_PER_PAIR each), not the whole bucket and its copies. A row's
        sources keep the bucket's order, which is source order: the order the sweeps'
        float sums have always been taken in. OSError if the bucket does not match the
        in-degrees counted (the file is not what was written to it)."""
        ptr = np.fromfile(self._path("in-ptr", k), dtype="<i8")
        bucket = self._path("bucket", k)
        nnz, size = int(ptr[-1]), bucket.stat().st_size if bucket.exists() else 0
        if size != 8 * nnz:
            raise self._damaged(k, f"{bucket} holds {size} bytes, not the {8 * nnz} of its "
                                f"{nnz} in-links")
        idx = np.empty(nnz, dtype="<i4")
        fill = ptr[:-1].copy()  # each row's next free place in idx
        for start in range(0, nnz, piece_links):
            stop_point(check_stop)
            if not _scatter_piece(bucket, start, min(piece_links, nnz - start),
                                  int(self.bounds[k]), fill, idx):
                raise self._damaged(k, f"{bucket} names pages outside the slice's "
                                    f"[{int(self.bounds[k])}, {int(self.bounds[k + 1])})")
        if not np.array_equal(fill, ptr[1:]):
            raise self._damaged(k, f"{bucket} does not hold the in-degrees counted")
        idx.tofile(self._path("in-idx", k))
        bucket.unlink(missing_ok=True)


def _scatter_piece(bucket: Path, start: int, count: int, r0: int, fill: np.ndarray,
                   idx: np.ndarray) -> bool:
    """Place the ``count`` (destination, source) pairs of ``bucket`` from pair ``start`` on,
    destinations in rows [r0, r0 + len(fill)): each source at its row's next free place in
    ``idx``, in the bucket's order (``fill``, those places, is advanced). False, nothing
    placed, if a destination is outside the rows (the C sort below does no bounds checks).

    The piece is first sorted by row with scipy's linear counting sort (stable), then
    moved into place as whole runs: a row's run starts at its next free place."""
    rows = len(fill)
    pairs = np.fromfile(bucket, dtype="<i4", count=2 * count, offset=8 * start)
    if len(pairs) != 2 * count:
        raise OSError(f"{bucket}: {4 * (2 * count - len(pairs))} bytes missing at {8 * start}")
    dest = pairs[0::2] - np.int32(r0)
    if count and (int(dest.min()) < 0 or int(dest.max()) >= rows):
        return False
    sources = pairs[1::2].copy()
    del pairs
    run_ptr = np.empty(rows + 1, dtype=np.int32)
    runs = np.empty(count, dtype=np.int32)
    sparsetools.coo_tocsr(rows, rows, count, dest, sources, np.zeros(count, np.int8),
                          run_ptr, runs, np.empty(count, np.int8))
    del dest, sources
    run_lengths = np.diff(run_ptr)
    places = np.repeat(fill - run_ptr[:-1], run_lengths)
    places += np.arange(count)
    idx[places] = runs
    fill += run_lengths
    return True
