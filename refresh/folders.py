"""Folders: one per time unit, holding the pages due in it (003 §6.6; DESIGN.md §6).

Page i is due in folder ⌊(t_last,i + t_i) / unit⌋. Each time unit the planner pops the
current folder (and any earlier one not yet popped) and re-files the pages after they
are fetched, so the work per unit is O(pages due + pages re-filed) = O(G), not O(N).

Representation (in memory, pure): ``folder_of[id]`` (NOT_FILED: none) plus, per folder, a
list of id arrays appended to as pages are filed. Re-filing only rewrites ``folder_of``;
the stale entry left in the old folder is dropped when that folder is popped (its
``folder_of`` no longer points there). Folders are popped in order through a heap of
folder numbers. :func:`due_by_scan` is the O(N) full scan that must select the same ids.
"""

from __future__ import annotations

import heapq

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
        self._bins: dict[int, list[NDArray[np.int64]]] = {}
        self._heap: list[int] = []
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
        out[inside] = self._folder_of[a[inside]]
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
        self._filed += int((self._folder_of[a] == NOT_FILED).sum())
        self._folder_of[a] = f
        order = np.argsort(f, kind="stable")
        fs, as_ = f[order], a[order]
        starts = np.flatnonzero(np.diff(fs, prepend=fs[0] - 1))
        for start, stop in zip(starts, np.append(starts[1:], fs.size)):
            key = int(fs[start])
            if key not in self._bins:
                self._bins[key] = []
                heapq.heappush(self._heap, key)
            self._bins[key].append(as_[start:stop])

    def remove(self, ids: ArrayLike) -> None:
        """Take pages out of their folders (dead pages, or below the importance floor)."""
        a = self._ids(ids)
        a = a[a < self._folder_of.size]
        a = np.unique(a)
        self._filed -= int((self._folder_of[a] != NOT_FILED).sum())
        self._folder_of[a] = NOT_FILED

    def pop(self, unit_index: int) -> NDArray[np.int64]:
        """Empty every folder ≤ ``unit_index`` not yet popped; return their ids ascending.

        The ids are no longer filed: re-file them after the fetch with their new due folder.
        """
        unit_index = int(unit_index)
        parts: list[NDArray[np.int64]] = []
        while self._heap and self._heap[0] <= unit_index:
            key = heapq.heappop(self._heap)
            for chunk in self._bins.pop(key):
                parts.append(chunk[self._folder_of[chunk] == key])
        self._next = unit_index + 1 if self._next is None else max(self._next, unit_index + 1)
        if not parts:
            return np.empty(0, dtype=np.int64)
        due = np.unique(np.concatenate(parts))
        self._folder_of[due] = NOT_FILED
        self._filed -= int(due.size)
        return due

    def counts(self, first: int, last: int) -> dict[int, int]:
        """Pages due per folder in [first, last] (for ``xyro plan``); O(entries there)."""
        out: dict[int, int] = {}
        for key in range(int(first), int(last) + 1):
            chunks = self._bins.get(key)
            if chunks:
                ids = np.concatenate(chunks)
                out[key] = int(np.unique(ids[self._folder_of[ids] == key]).size)
        return out

    def snapshot(self) -> NDArray[np.int64]:
        """A copy of folder_of for all known ids (for the full-scan check, persistence)."""
        return self._folder_of.copy()
