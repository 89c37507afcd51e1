"""URL → id resolution in bulk: in-memory hash map, text check, creation of new rows.

A URL's candidate ids come from an :class:`~metadata.idmap.IdMap` (the hash index holds
fetched URLs only, see :mod:`metadata.schema`); only those rows are read, by id, and their
text compared, so a URL that merely shares a hash is never given another URL's id.

Ids are allocated densely as ``max(id) + 1, ...`` inside the caller's write transaction
(``BEGIN IMMEDIATE`` holds the write lock, so no other connection can allocate meanwhile);
URLs are never deleted, so ids are dense 1..n and stable forever.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat

import numpy as np

from metadata.errors import MetadataError
from metadata.idmap import IdMap
from metadata.urlkeys import HashFn, host_of

# Rows are read by id in chunks of this many (one prepared statement reused).
_CHUNK = 500
_MAX_ID = 2**31 - 1  # child lists store ids as int32

_TEXTS_BY_ID = ("SELECT json_group_array(url), json_group_array(id) FROM urls "
                "WHERE id IN (SELECT value FROM json_each(?))")
_INSERT_JSON = ("INSERT INTO urls (id, hash, host_id, depth, url) SELECT ?1 + key, "
                "value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?2)")
_INSERT_ROW = "INSERT INTO urls (id, hash, host_id, depth, url) VALUES (?, ?, ?, ?, ?)"


def _flat(cands: list[int | list[int] | None]) -> list[int]:
    """The ids :meth:`IdMap.candidates` named (a list where hashes collide)."""
    ids = [c for c in cands if type(c) is int]
    if len(ids) < len(cands):
        ids.extend(i for c in cands if type(c) is list for i in c)
    return ids


def _same_text(url: str, cand: int | list[int], text_of: dict[int, str]) -> int:
    """The id among ``cand`` whose stored text is ``url``, or -1 (a new URL)."""
    for url_id in ([cand] if type(cand) is int else cand):
        if text_of.get(url_id) == url:
            return url_id
    return -1


class UrlResolver:
    """Resolves canonical URLs to ids on one connection, with ``id_map`` (exact).

    There is no URL → id cache in front of the map: measured in the ingest benchmark (1M
    pages), a 200,000-entry cache answered 1.3 of the 8.4 distinct URLs of a page and cost
    more to keep than the look-ups it saved (writer 90 → 83 µs per page without it).
    """

    def __init__(self, conn: sqlite3.Connection, hash_fn: HashFn, id_map: IdMap) -> None:
        self._conn = conn
        self._hash = hash_fn
        self._map = id_map
        self._hosts: dict[str, int] = {}
        self._sql: dict[tuple[str, int], str] = {}  # (columns, n) -> SQL text

    # -- look-ups ------------------------------------------------------------------------
    def lookup(self, urls: Iterable[str]) -> dict[str, int]:
        """Ids of the URLs already stored (unknown URLs are absent from the result)."""
        urls = list(dict.fromkeys(urls))
        if not urls:
            return {}
        self._sync()
        ids, _ = self._from_db(urls, list(map(self._hash, urls)))
        return {url: url_id for url, url_id in zip(urls, ids.tolist()) if url_id >= 0}

    def rows_by_url(self, urls: Iterable[str], columns: str) -> Iterator[tuple]:
        """``(url, columns...)`` of the stored ``urls`` (text compared), in id order."""
        urls = list(urls)
        wanted = set(urls)
        self._sync()
        rows = self._by_ids(_flat(self._map.candidates(list(map(self._hash, urls)))),
                            f"url, {columns}")
        return (row for row in rows if row[0] in wanted)

    def resolve(self, urls: Iterable[str], depth: Mapping[str, int] | int = 0,
                before_bulk: Callable[[], None] | None = None) -> dict[str, int]:
        """Ids of ``urls``, creating unread rows for new ones (call inside a write txn).

        ``depth`` is the crawl depth of a newly created URL: one value, or per URL.
        """
        urls = list(urls if isinstance(urls, dict) else dict.fromkeys(urls))
        depths = (depth if isinstance(depth, int)
                  else list(map(depth.get, urls, repeat(0))))  # type: ignore[union-attr]
        return dict(zip(urls, self.resolve_list(urls, depths, before_bulk).tolist()))

    def resolve_list(self, urls: list[str], depths: Sequence[int] | int = 0,
                     before_bulk: Callable[[], None] | None = None) -> np.ndarray:
        """Ids of the distinct ``urls``, aligned with them (int64), creating unread rows for
        new ones with crawl depth ``depths`` (one value, or one per URL); call inside a write
        transaction.

        Aligned lists rather than URL-keyed dicts: a batch resolves hundreds of thousands of
        URLs, and every dict probe by URL touches a string far away in memory.
        ``before_bulk`` is called before the look-up and the insert, which are long SQLite
        calls without the GIL (:meth:`_texts`, :meth:`_insert_rows`).
        """
        if not urls:
            return np.empty(0, dtype=np.int64)
        hashes = list(map(self._hash, urls))
        max_id = self._sync()
        ids, cands = self._from_db(urls, hashes, before_bulk)
        new = np.flatnonzero(ids < 0)
        if new.size:
            if before_bulk is not None:
                before_bulk()  # no-op if _from_db called it
            at = new.tolist()
            fresh = [urls[i] for i in at]
            if len(set(fresh)) < len(fresh):  # two rows for one URL would break its id
                raise ValueError("resolve_list() needs distinct URLs; use resolve()")
            self._insert(fresh, [hashes[i] for i in at], max_id,
                         depths if isinstance(depths, int) else [depths[i] for i in at],
                         [cands[i] for i in at])
            ids[new] = np.arange(max_id + 1, max_id + 1 + new.size)
        return ids

    def forget(self) -> None:
        """Drop what may name rolled-back rows (after a failed transaction)."""
        self._hosts.clear()
        self._map.reset()

    # -- internals -----------------------------------------------------------------------
    def _from_db(self, urls: list[str], hashes: list[int],
                 before_bulk: Callable[[], None] | None = None) -> tuple[np.ndarray, list]:
        """Ids of the stored ``urls``, aligned with them (-1: new; a URL sharing a stored
        hash but not its text is new), and the map's candidates for each hash.

        Measured against comparing the texts inside SQLite and returning only the pairs that
        differ: that query re-parses each pair's JSON and cost more than reading the texts
        back (ingest benchmark, 86 against 83 µs per page).
        """
        cands = self._map.candidates(hashes)
        if cands.count(None) == len(cands):
            return np.full(len(urls), -1, dtype=np.int64), cands
        if before_bulk is not None:
            before_bulk()
        text_of = self._texts(_flat(cands))
        get = text_of.get
        ids = [-1 if c is None else c if type(c) is int and get(c) == url
               else _same_text(url, c, text_of) for url, c in zip(urls, cands)]
        return np.array(ids, dtype=np.int64), cands

    def _texts(self, ids: list[int]) -> dict[int, str]:
        """Id → URL of the rows ``ids``, read by ONE statement: SQLite walks the rows in id
        order and returns two JSON arrays, so the look-up is a single long call that
        releases the GIL throughout (producers run meanwhile), and rows cost no per-row
        Python containers (nothing for the garbage collector to track). JSON carries every
        text exactly (escapes for quotes, backslashes and control characters; UTF-8 else)."""
        urls, row_ids = self._conn.execute(_TEXTS_BY_ID, (json.dumps(ids),)).fetchone()
        return dict(zip(json.loads(row_ids), json.loads(urls)))

    def _by_ids(self, ids: list[int], columns: str) -> Iterator[tuple]:
        """``SELECT columns`` of the rows ``ids``, in id order (neighbours share pages)."""
        ids.sort()
        execute = self._conn.execute
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            key = (columns, len(chunk))
            sql = self._sql.get(key)
            if sql is None:
                sql = self._sql[key] = (f"SELECT {columns} FROM urls "
                                        f"WHERE id IN ({','.join('?' * len(chunk))})")
            yield from execute(sql, chunk)

    def _sync(self) -> int:
        """The largest stored id, after bringing the map up to it."""
        max_id = self._conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0]
        self._map.sync(self._conn, max_id)
        return max_id

    # -- creation ------------------------------------------------------------------------
    def _insert(self, urls: list[str], hashes: list[int], max_id: int,
                depths: list[int] | int, cands: list) -> None:
        """Rows for the new ``urls`` with ids ``max_id + 1, ...``; the map learns them."""
        first = max_id + 1
        last = max_id + len(urls)
        if last > _MAX_ID:
            raise MetadataError(
                f"URL id space exhausted ({_MAX_ID} URLs, child lists store int32 ids); "
                "prune the store or start a new one")
        hosts = list(map(host_of, urls))
        host_ids = self._host_ids(hosts)
        self._insert_rows(first, list(zip(
            hashes, map(host_ids.__getitem__, hosts),
            repeat(depths, len(urls)) if isinstance(depths, int) else depths, urls)))
        self._map.add(hashes, range(first, last + 1), last, present=cands)

    def _insert_rows(self, first: int, rows: list[tuple[int, int, int, str]]) -> None:
        """INSERT ``(hash, host_id, depth, url)`` rows with ids ``first, first + 1, ...``.

        As ONE statement over a JSON array: SQLite inserts the whole batch in a single call
        that releases the GIL throughout, so producer threads run meanwhile instead of
        taking the GIL between the per-row steps of ``executemany`` (which stalls this
        thread for a switch interval each time). A JSON text without a backslash holds every
        URL verbatim; one that needed an escape goes through ``executemany`` instead, so the
        stored text is always exactly the URL.
        """
        text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
        if "\\" in text:
            self._conn.executemany(_INSERT_ROW,
                                   [(first + i, *row) for i, row in enumerate(rows)])
        else:
            self._conn.execute(_INSERT_JSON, (first, text))

    def _host_ids(self, hosts: list[str]) -> dict[str, int]:
        cache = self._hosts
        missing = list(set(hosts).difference(cache))
        if missing:
            self._conn.executemany("INSERT OR IGNORE INTO hosts (host) VALUES (?)",
                                   [(h,) for h in missing])
            for start in range(0, len(missing), _CHUNK):
                chunk = missing[start:start + _CHUNK]
                sql = f"SELECT host, id FROM hosts WHERE host IN ({','.join('?' * len(chunk))})"
                cache.update(self._conn.execute(sql, chunk))
        return cache
