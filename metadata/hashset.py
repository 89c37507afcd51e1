"""The writer's exact in-memory set of every stored URL hash: "is this URL surely new?"

Half the children of a fetched page are typically URLs never seen before; asking SQLite about
each costs an index probe that finds nothing. This set answers "no row has this hash" from
memory (8 bytes per URL: a sorted int64 array plus a small set of recent additions), so only
URLs whose hash is present go to SQLite, where their text is compared. The set is exact on
hashes (no false negatives), so it never makes a known URL look new.

It follows rows created by other connections (``MetadataStore.url_ids``) through the dense
id allocation: :meth:`sync` loads the hashes of ids above the last one it saw.
"""

from __future__ import annotations

import sqlite3

import numpy as np

_MERGE_AT = 200_000  # recent hashes merged into the sorted array past this many
_LOAD_CHUNK = 500_000


class HashSet:
    """Exact set of the ``urls.hash`` values of one database (used by the writer only)."""

    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.int64)
        self._recent: set[int] = set()
        self._max_id = -1  # -1: not loaded yet

    def sync(self, conn: sqlite3.Connection, max_id: int) -> None:
        """Catch up with rows up to ``max_id`` (call inside the writer's transaction)."""
        if self._max_id < 0:
            self._sorted = _load_sorted(conn)
            self._recent = set()
        elif max_id > self._max_id:
            rows = conn.execute("SELECT hash FROM urls WHERE id > ?", (self._max_id,))
            self._recent.update(h for (h,) in rows)
            self._maybe_merge()
        self._max_id = max_id

    def contains(self, hashes: list[int]) -> list[bool]:
        if not hashes:
            return []
        arr = np.fromiter(hashes, dtype=np.int64, count=len(hashes))
        srt = self._sorted
        if srt.size:
            pos = np.searchsorted(srt, arr)
            np.minimum(pos, srt.size - 1, out=pos)
            hit = (srt[pos] == arr).tolist()
        else:
            hit = [False] * len(hashes)
        recent = self._recent
        if recent:
            return [h or (x in recent) for h, x in zip(hit, hashes)]
        return hit

    def add(self, hashes: list[int], max_id: int) -> None:
        """Record hashes of rows just inserted, ids up to ``max_id``."""
        self._recent.update(hashes)
        self._max_id = max_id
        self._maybe_merge()

    def reset(self) -> None:
        """Forget everything (after a rollback); the next :meth:`sync` reloads."""
        self._sorted = np.empty(0, dtype=np.int64)
        self._recent = set()
        self._max_id = -1

    def _maybe_merge(self) -> None:
        if len(self._recent) < _MERGE_AT:
            return
        new = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
        new.sort()
        self._sorted = np.insert(self._sorted, np.searchsorted(self._sorted, new), new)
        self._recent = set()

    @property
    def nbytes(self) -> int:
        return int(self._sorted.nbytes) + 40 * len(self._recent)


def _load_sorted(conn: sqlite3.Connection) -> np.ndarray:
    """Every hash, ascending (read in index order, so no sort is needed)."""
    cur = conn.execute("SELECT hash FROM urls INDEXED BY urls_hash ORDER BY hash")
    parts = []
    while rows := cur.fetchmany(_LOAD_CHUNK):
        parts.append(np.array(rows, dtype=np.int64).ravel())
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
