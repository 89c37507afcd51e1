"""Folders: one per time unit, holding the pages due in it (003 §6.6; DESIGN.md §6).

Page i is due in folder ⌊(t_last,i + t_i) / unit⌋. Each time unit the planner pops the
current folder (and any earlier one not yet popped) and re-files the pages after they
are fetched, so the work per unit is O(pages due + pages re-filed) = O(G), not O(N).

Representation (in memory, pure): sorted runs of (folder, id) pairs, as in a
log-structured merge tree. ``file`` sorts its pages by folder into one new run and merges
the newest runs while the older is not at least twice the newer, so there are
O(log(N/G)) runs and each entry is moved O(log(N/G)) times, always contiguously. All due
entries of a run form a prefix, so ``pop`` is one ``searchsorted`` and one contiguous
slice per run. Per-folder containers would cost one Python object per destination
folder, and a unit's G pages spread over min(G, N/G) folders: that, not cache misses,
made the per-unit time grow with N (measured: 1.3 ms of ``np.split`` at N = 10M).
``folder_of[id]`` is the folder a page was last filed in; a page is filed while
``folder_of[id]`` is at least the next folder to pop, so popping writes nothing to the
N-sized array. Re-filing or removing a still-filed page leaves a stale entry in its old
folder; folders count them, and only pops that reach a folder with stale entries filter
through ``folder_of``. :func:`due_by_scan` is the O(N) full scan that must select the
same ids.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

NOT_FILED = int(np.iinfo(np.int64).min)  # folder numbers may be negative (times before the epoch)


def due_folders(last_refresh: ArrayLike, intervals: ArrayLike, unit: float = 1.0) -> NDArray[np.int64]:
    """⌊(t_last + t)/unit⌋ per page; NOT_FILED where t is infinite (never refreshed)."""
    t_last = np.asarray(last_refresh, dtype=np.float64)
    t = np.asarray(intervals, dtype=np.float64)
    if t_last.shape != t.shape:
        raise ValueError(f"last_refresh {t_last.shape} and intervals {t.shape} differ in shape")
    if not unit > 0:
        raise ValueError(f"unit {unit!r} must be positive")
    if np.isnan(t_last).any() or np.isnan(t).any() or (t <= 0).any():
        raise ValueError("last_refresh must not be NaN and intervals must be positive")
    due = t_last + t
    out = np.full(t.shape, NOT_FILED, dtype=np.int64)
    fin = np.isfinite(due)
    out[fin] = np.floor(due[fin] / unit).astype(np.int64)
    return out


def folders_after(last_refresh_s: ArrayLike, interval_units: ArrayLike,
                  unit_s: float) -> NDArray[np.int64]:
    """The folder formula as the planner stores it: t_last in seconds, t_i in time units,
    ⌊(t_last + t_i·unit)/unit⌋ (:func:`due_folders` with t = t_i·unit).

    The metadata writer re-files a fetched page with the same arithmetic
    (``metadata.refresh_queries.folder_after``; it may not import this package), and
    tests/plan/test_plan_folders.py checks that both agree bit for bit.
    """
    t = np.asarray(interval_units, dtype=np.float64) * float(unit_s)
    return due_folders(last_refresh_s, t, unit_s)


def due_by_scan(folder_of: ArrayLike, unit_index: int) -> NDArray[np.int64]:
    """The full-scan check: ids whose folder is ≤ ``unit_index`` (filed ones), ascending."""
    f = np.asarray(folder_of, dtype=np.int64)
    return np.flatnonzero((f != NOT_FILED) & (f <= unit_index))


class Folders:
    """Pages waiting for their refresh, bucketed by due time unit (module doc)."""

    def __init__(self, capacity: int = 0) -> None:
        if capacity < 0:
            raise ValueError(f"capacity {capacity!r} must be >= 0")
        self._folder_of = np.full(capacity, NOT_FILED, dtype=np.int64)
        # Runs: [folders (sorted), ids, offset of the first unpopped entry].
        self._runs: list[list] = []
        self._stale: dict[int, int] = {}  # folder -> entries that no longer count there
        self._next: int | None = None  # lowest folder not yet popped
        self._filed = 0

    def __len__(self) -> int:
        return self._filed

    @property
    def next_unit(self) -> int | None:
        """The first folder that has not been popped (None before the first pop)."""
        return self._next

    def _ids(self, ids: ArrayLike) -> NDArray[np.int64]:
        a = np.atleast_1d(np.asarray(ids))
        if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"page ids must be a 1-D array of integers, got {a.dtype} {a.shape}")
        a = a.astype(np.int64)
        if a.size and a.min() < 0:
            raise ValueError(f"page ids must be >= 0, got {int(a.min())}")
        return a

    def _live(self, values: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which ``folder_of`` values mean "filed" (not NOT_FILED, not already popped)."""
        if self._next is None:
            return values != NOT_FILED
        return (values != NOT_FILED) & (values >= self._next)

    def _mark_stale(self, old: NDArray[np.int64]) -> None:
        if old.size:
            keys, counts = np.unique(old, return_counts=True)
            for key, count in zip(keys.tolist(), counts.tolist()):
                self._stale[key] = self._stale.get(key, 0) + count

    def _grow(self, max_id: int) -> None:
        if max_id >= self._folder_of.size:
            size = max(max_id + 1, 2 * self._folder_of.size)
            grown = np.full(size, NOT_FILED, dtype=np.int64)
            grown[: self._folder_of.size] = self._folder_of
            self._folder_of = grown

    def folder_of(self, ids: ArrayLike) -> NDArray[np.int64]:
        """The folder each page waits in (NOT_FILED if none)."""
        a = self._ids(ids)
        out = np.full(a.size, NOT_FILED, dtype=np.int64)
        inside = a < self._folder_of.size
        values = self._folder_of[a[inside]]
        out[inside] = np.where(self._live(values), values, NOT_FILED)
        return out

    def file(self, ids: ArrayLike, folders: ArrayLike) -> None:
        """File (or re-file) pages into their due folders. A folder already popped is
        replaced by the next one to pop (an overdue page is due now, not lost)."""
        a = self._ids(ids)
        f = np.atleast_1d(np.asarray(folders)).astype(np.int64)
        if f.shape != a.shape:
            raise ValueError(f"{a.size} ids but {f.size} folders; pass one folder per id")
        if a.size == 0:
            return
        if np.unique(a).size != a.size:
            raise ValueError("duplicate page ids in one file() call")
        if (f == NOT_FILED).any():
            raise ValueError("NOT_FILED (never refreshed) cannot be filed; use remove()")
        if self._next is not None:
            f = np.maximum(f, self._next)
        self._grow(int(a.max()))
        old = self._folder_of[a]
        was = self._live(old)
        self._filed += int(a.size - was.sum())
        self._mark_stale(old[was])
        self._folder_of[a] = f
        order = np.argsort(f, kind="stable")
        self._runs.append([f[order], a[order], 0])
        self._merge()

    @staticmethod
    def _size(run: list) -> int:
        return int(run[0].size - run[2])

    def _merge(self) -> None:
        """Merge the newest runs while the older is not at least twice the newer."""
        runs = self._runs
        while len(runs) > 1 and self._size(runs[-2]) <= 2 * self._size(runs[-1]):
            new, old = runs.pop(), runs.pop()
            f = np.concatenate((old[0][old[2]:], new[0][new[2]:]))
            ids = np.concatenate((old[1][old[2]:], new[1][new[2]:]))
            order = np.argsort(f, kind="stable")  # two sorted runs: a linear merge
            runs.append([f[order], ids[order], 0])

    def remove(self, ids: ArrayLike) -> None:
        """Take pages out of their folders (dead pages, or below the importance floor)."""
        a = self._ids(ids)
        a = a[a < self._folder_of.size]
        a = np.unique(a)
        old = self._folder_of[a]
        was = self._live(old)
        self._filed -= int(was.sum())
        self._mark_stale(old[was])
        self._folder_of[a] = NOT_FILED

    def pop(self, unit_index: int) -> NDArray[np.int64]:
        """Empty every folder ≤ ``unit_index`` not yet popped; return their ids ascending.

        The ids are no longer filed: re-file them after the fetch with their new due folder.
        """
        unit_index = int(unit_index)
        ids: list[NDArray[np.int64]] = []
        keys: list[NDArray[np.int64]] = []
        for run in self._runs:
            stop = int(np.searchsorted(run[0], unit_index, side="right"))
            if stop > run[2]:
                keys.append(run[0][run[2]:stop])
                ids.append(run[1][run[2]:stop])
                run[2] = stop
        self._runs = [run for run in self._runs if self._size(run) > 0]
        stale = [k for k in self._stale if k <= unit_index]
        self._next = unit_index + 1 if self._next is None else max(self._next, unit_index + 1)
        if not ids:
            return np.empty(0, dtype=np.int64)
        due = np.concatenate(ids)
        if stale:  # drop entries whose page was re-filed or removed since
            for k in stale:
                del self._stale[k]
            due = np.unique(due[self._folder_of[due] == np.concatenate(keys)])
        else:
            due = np.sort(due)
        self._filed -= int(due.size)
        return due

    def counts(self, first: int, last: int) -> dict[int, int]:
        """Pages due per folder in [first, last] (for ``xyro plan``); O(entries there)."""
        first, last = int(first), int(last)
        keys, ids = [], []
        for run in self._runs:
            live = run[0][run[2]:]
            lo = int(np.searchsorted(live, first, side="left"))
            hi = int(np.searchsorted(live, last, side="right"))
            keys.append(live[lo:hi])
            ids.append(run[1][run[2]:][lo:hi])
        out: dict[int, int] = {}
        if not keys:
            return out
        k, i = np.concatenate(keys), np.concatenate(ids)
        if any(first <= key <= last for key in self._stale):
            keep = self._folder_of[i] == k
            pairs = np.unique(np.stack((k[keep], i[keep])), axis=1)
            k = pairs[0]
        for key, count in zip(*np.unique(k, return_counts=True)):
            out[int(key)] = int(count)
        return out

    def snapshot(self) -> NDArray[np.int64]:
        """folder_of for all known ids, NOT_FILED where not filed (full-scan check, persistence)."""
        return np.where(self._live(self._folder_of), self._folder_of, NOT_FILED)
