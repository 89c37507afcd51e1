"""URL → id resolution in bulk: cache, hash-indexed look-up, creation of new rows.

Ids are allocated densely as ``max(id) + 1, ...`` inside the caller's write transaction
(``BEGIN IMMEDIATE`` holds the write lock, so no other connection can allocate meanwhile);
URLs are never deleted, so ids are dense 1..n and stable forever.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from metadata.errors import MetadataError
from metadata.hashset import HashSet
from metadata.urlkeys import HashFn, host_of

# Look-ups go to SQLite in chunks of this many hashes (one prepared statement reused).
_CHUNK = 500
_MAX_ID = 2**31 - 1  # child lists store ids as int32


class UrlResolver:
    """Resolves canonical URLs to ids on one connection.

    Optional helpers, both exact: a bounded two-generation cache URL → id for recently seen
    URLs (children repeat a lot: navigation links; when the young generation reaches half of
    ``cache_size`` it becomes the old one, so memory stays bounded and hot URLs survive),
    and a :class:`~metadata.hashset.HashSet` that spares SQLite the look-up of brand-new URLs.
    """

    def __init__(self, conn: sqlite3.Connection, hash_fn: HashFn, cache_size: int = 0,
                 hash_set: HashSet | None = None) -> None:
        self._conn = conn
        self._hash = hash_fn
        self._half = cache_size // 2
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}
        self._hosts: dict[str, int] = {}
        self._set = hash_set
        self._sql: dict[int, str] = {}  # chunk length -> SQL text

    def _query(self, n: int) -> str:
        sql = self._sql.get(n)
        if sql is None:
            sql = f"SELECT id, url FROM urls WHERE hash IN ({','.join('?' * n)})"
            self._sql[n] = sql
        return sql

    def _cached(self, urls: Iterable[str], found: dict[str, int]) -> list[str]:
        """Fill ``found`` from the cache; return the misses."""
        if not self._half:
            return list(urls)
        urls = list(urls)
        young_get, old_get = self._young.get, self._old.get
        miss: list[str] = []
        for url, url_id in zip(urls, map(young_get, urls)):
            if url_id is None:
                url_id = old_get(url)
                if url_id is None:
                    miss.append(url)
                    continue
            found[url] = url_id
        return miss

    def _from_db(self, urls: list[str], hashes: list[int], found: dict[str, int]) -> None:
        """Look ``urls`` up by hash, comparing the text (a colliding row is skipped)."""
        wanted = set(urls)
        execute = self._conn.execute
        for start in range(0, len(hashes), _CHUNK):
            chunk = hashes[start:start + _CHUNK]
            for url_id, url in execute(self._query(len(chunk)), chunk):
                if url in wanted:
                    found[url] = url_id
        if self._half:
            self._remember({u: found[u] for u in urls if u in found})

    def _remember(self, pairs: dict[str, int]) -> None:
        if len(self._young) + len(pairs) > self._half:
            self._old = self._young
            self._young = {}
        self._young.update(pairs)

    def rows_by_url(self, urls: Iterable[str], columns: str) -> dict[str, tuple]:
        """``SELECT columns`` of the stored ``urls`` (by hash, text compared), keyed by URL.

        Bypasses the cache: the caller wants the row, not only the id.
        """
        urls = list(urls)
        wanted = set(urls)
        hash_fn = self._hash
        hashes = [hash_fn(u) for u in urls]
        out: dict[str, tuple] = {}
        execute = self._conn.execute
        for start in range(0, len(hashes), _CHUNK):
            chunk = hashes[start:start + _CHUNK]
            sql = (f"SELECT url, {columns} FROM urls "
                   f"WHERE hash IN ({','.join('?' * len(chunk))})")
            for row in execute(sql, chunk):
                if row[0] in wanted:
                    out[row[0]] = row[1:]
        return out

    def lookup(self, urls: Iterable[str]) -> dict[str, int]:
        """Ids of the URLs already stored (unknown URLs are absent from the result)."""
        found: dict[str, int] = {}
        miss = self._cached(urls, found)
        if miss:
            self._from_db(miss, [self._hash(u) for u in miss], found)
        return found

    def resolve(self, urls: Iterable[str], depth: Mapping[str, int] | int = 0) -> dict[str, int]:
        """Ids of ``urls``, creating unread rows for new ones (call inside a write txn).

        ``depth`` is the crawl depth of a newly created URL: one value, or per URL.
        """
        found: dict[str, int] = {}
        miss = self._cached(urls if isinstance(urls, dict) else dict.fromkeys(urls), found)
        if not miss:
            return found
        hash_fn = self._hash
        hashes = [hash_fn(u) for u in miss]
        max_id = self._conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0]
        if self._set is not None:
            self._set.sync(self._conn, max_id)
            known = self._set.contains(hashes)
            ask = [(u, h) for u, h, k in zip(miss, hashes, known) if k]
            if ask:
                self._from_db([u for u, _ in ask], [h for _, h in ask], found)
        else:
            self._from_db(miss, hashes, found)
        new = [(u, h) for u, h in zip(miss, hashes) if u not in found]
        if new:
            self._insert(new, max_id, depth, found)
        return found

    def _insert(self, new: list[tuple[str, int]], max_id: int,
                depth: Mapping[str, int] | int, found: dict[str, int]) -> None:
        first = max_id + 1
        last = max_id + len(new)
        if last > _MAX_ID:
            raise MetadataError(
                f"URL id space exhausted ({_MAX_ID} URLs, child lists store int32 ids); "
                "prune the store or start a new one")
        hosts = [host_of(u) for u, _ in new]
        host_ids = self._host_ids(hosts)
        urls = [u for u, _ in new]
        ids = range(first, last + 1)
        depths = ([depth] * len(urls) if isinstance(depth, int)
                  else [depth.get(u, 0) for u in urls])
        self._conn.executemany(
            "INSERT INTO urls (id, hash, host_id, depth, url) VALUES (?, ?, ?, ?, ?)",
            zip(ids, [h for _, h in new], map(host_ids.__getitem__, hosts), depths, urls))
        created = dict(zip(urls, ids))
        found.update(created)
        if self._half:
            self._remember(created)
        if self._set is not None:
            self._set.add([h for _, h in new], last)

    def _host_ids(self, hosts: list[str]) -> dict[str, int]:
        cache = self._hosts
        missing = list({h for h in hosts if h not in cache})
        if missing:
            self._conn.executemany("INSERT OR IGNORE INTO hosts (host) VALUES (?)",
                                   [(h,) for h in missing])
            for start in range(0, len(missing), _CHUNK):
                chunk = missing[start:start + _CHUNK]
                sql = f"SELECT host, id FROM hosts WHERE host IN ({','.join('?' * len(chunk))})"
                cache.update(self._conn.execute(sql, chunk))
        return cache

    def forget(self) -> None:
        """Drop cached ids (after a rolled-back transaction they may not exist)."""
        self._young.clear()
        self._old.clear()
        self._hosts.clear()
        if self._set is not None:
            self._set.reset()
