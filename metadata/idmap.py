"""Exact in-memory map of every stored URL hash to its id: how new URLs are told apart.

The ``urls_hash`` index holds fetched URLs only (schema version 3), so the URLs discovered
but not fetched yet — most of the table — are found through this map: hash → id for every
row, 12 bytes per URL (sorted ``int64`` hashes beside their ``int32`` ids, plus a dict of
recent additions merged in bulk). The writer keeps one, and ``MetadataStore.url_ids``
another; for them

* a hash absent from the map is surely new: no SQLite look-up at all;
* a hash present gives candidate ids; the caller reads those rows **by id** (a rowid
  look-up, in id order) and compares the text, so a colliding URL never gets a wrong id.

Two stored URLs may share a hash (a 64-bit collision, or a test's colliding hash
function): the first id stays in the arrays, the others go to a small ``extra`` dict, and
every one of them is a candidate. The map follows rows created by other connections
through the dense id allocation: :meth:`sync` loads the rows with ids above the last one it
saw. A map that may hold ids of rolled-back rows must be :meth:`reset`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from itertools import chain

import numpy as np

# Recent entries are merged into the sorted arrays past this many (or an eighth of them:
# a merge copies the arrays, so a larger map merges less often).
_MERGE_AT = 200_000


class IdMap:
    """Exact map ``urls.hash`` → ``urls.id`` of one database (one thread at a time)."""

    def __init__(self, merge_at: int = _MERGE_AT) -> None:
        self._merge_at = merge_at
        self._clear()

    def _clear(self) -> None:
        self._hashes = np.empty(0, dtype=np.int64)
        self._ids = np.empty(0, dtype=np.int32)
        self._recent: dict[int, int] = {}
        self._extra: dict[int, list[int]] = {}  # hash -> further ids sharing it
        self._max_id = -1  # -1: not loaded yet

    def sync(self, conn: sqlite3.Connection, max_id: int) -> None:
        """Catch up with the rows up to ``max_id``, the largest id ``conn`` sees."""
        if self._max_id < 0:
            self._load(conn, max_id)
        elif max_id > self._max_id:
            rows = conn.execute("SELECT hash, id FROM urls WHERE id > ? AND id <= ? ORDER BY id",
                                (self._max_id, max_id)).fetchall()
            self.add([h for h, _ in rows], [i for _, i in rows], max_id)
        self._max_id = max(max_id, 0)

    def candidates(self, hashes: Sequence[int]) -> list[int | list[int] | None]:
        """For each hash: None (no row has it), its id, or a list of ids when it collides."""
        if not hashes:
            return []
        found = self._lookup_sorted(hashes)
        recent = self._recent
        if recent:
            get = recent.get
            found = [i if i is not None else get(h) for i, h in zip(found, hashes)]
        extra = self._extra
        if extra:
            found = [[i, *extra[h]] if i is not None and h in extra else i
                     for i, h in zip(found, hashes)]
        return found

    def add(self, hashes: Sequence[int], ids: Sequence[int], max_id: int,
            present: Sequence[object] | None = None) -> None:
        """Record rows just inserted (or seen), ids up to ``max_id``.

        ``present``, when the caller just asked :meth:`candidates`: its answer for each hash
        (None: absent), which spares looking the hashes up again.
        """
        recent = self._recent
        if present is None:
            present = (self._lookup_sorted(hashes) if self._hashes.size
                       else [None] * len(hashes))
        if (present.count(None) == len(present) and len(set(hashes)) == len(hashes)
                and recent.keys().isdisjoint(hashes)):
            recent.update(zip(hashes, ids))  # the usual case: new, distinct hashes
        else:
            for h, url_id, old in zip(hashes, ids, present):
                if old is None:
                    old = recent.setdefault(h, url_id)
                if old != url_id:
                    self._extra.setdefault(h, []).append(url_id)
        self._max_id = max_id
        if len(recent) >= max(self._merge_at, self._hashes.size // 8):
            self._merge()

    def reset(self) -> None:
        """Forget everything (after a rollback); the next :meth:`sync` reloads."""
        self._clear()

    def __len__(self) -> int:
        return int(self._hashes.size) + len(self._recent) + sum(map(len, self._extra.values()))

    # -- internals ------------------------------------------------------------------------
    def _lookup_sorted(self, hashes: Sequence[int]) -> list[int | None]:
        srt = self._hashes
        if not srt.size:
            return [None] * len(hashes)
        arr = np.fromiter(hashes, dtype=np.int64, count=len(hashes))
        order = np.argsort(arr, kind="stable")  # sorted keys: binary searches stay in cache
        keys = arr[order]
        pos = np.searchsorted(srt, keys)
        np.minimum(pos, srt.size - 1, out=pos)
        hit = srt[pos] == keys
        out = np.full(arr.size, -1, dtype=np.int64)
        out[order[hit]] = self._ids[pos[hit]]
        return [None if i < 0 else i for i in out.tolist()]

    def _merge(self) -> None:
        recent = self._recent
        new_h = np.fromiter(recent.keys(), dtype=np.int64, count=len(recent))
        new_i = np.fromiter(recent.values(), dtype=np.int32, count=len(recent))
        order = np.argsort(new_h)
        new_h, new_i = new_h[order], new_i[order]
        at = np.searchsorted(self._hashes, new_h)
        self._hashes = np.insert(self._hashes, at, new_h)
        self._ids = np.insert(self._ids, at, new_i)
        self._recent = {}

    def _load(self, conn: sqlite3.Connection, max_id: int) -> None:
        """Every (hash, id) up to ``max_id``: one scan of the table, sorted here (the hash
        index holds fetched URLs only); duplicates of a hash go to ``extra``."""
        rows = conn.execute("SELECT hash, id FROM urls WHERE id <= ?", (max_id,))
        pairs = np.fromiter(chain.from_iterable(rows), dtype=np.int64).reshape(-1, 2)
        order = np.argsort(pairs[:, 0], kind="stable")  # rows come in id order: ties stay so
        all_h, all_i = pairs[order, 0], pairs[order, 1].astype(np.int32)
        del pairs, order
        self._clear()
        dup = np.zeros(all_h.size, dtype=bool)
        dup[1:] = all_h[1:] == all_h[:-1]
        for h, url_id in zip(all_h[dup].tolist(), all_i[dup].tolist()):
            self._extra.setdefault(h, []).append(url_id)
        self._hashes, self._ids = all_h[~dup], all_i[~dup]
