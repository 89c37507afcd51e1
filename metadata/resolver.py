"""URL → id resolution in bulk: cache, hash-indexed look-up, creation of new rows.

Ids are allocated densely as ``max(id) + 1, ...`` inside the caller's write transaction
(``BEGIN IMMEDIATE`` holds the write lock, so no other connection can allocate meanwhile);
URLs are never deleted, so ids are dense 1..n and stable forever.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from metadata.errors import MetadataError
from metadata.urlkeys import HashFn, host_of

# Look-ups go to SQLite in chunks of this many hashes (one prepared statement reused).
_CHUNK = 500
_MAX_ID = 2**31 - 1  # child lists store ids as int32


class UrlResolver:
    """Resolves canonical URLs to ids on one connection, with a bounded two-generation cache.

    The cache maps URL → id for recently seen URLs (children repeat a lot: navigation
    links); when the young generation reaches half of ``cache_size`` it becomes the old one,
    so memory stays bounded and hot URLs survive.
    """

    def __init__(self, conn: sqlite3.Connection, hash_fn: HashFn, cache_size: int = 0) -> None:
        self._conn = conn
        self._hash = hash_fn
        self._half = cache_size // 2
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}
        self._hosts: dict[str, int] = {}
        self._sql = {}  # chunk length -> SQL text

    def _remember(self, url: str, url_id: int) -> None:
        if not self._half:
            return
        if len(self._young) >= self._half:
            self._old = self._young
            self._young = {}
        self._young[url] = url_id

    def _query(self, n: int) -> str:
        sql = self._sql.get(n)
        if sql is None:
            sql = f"SELECT id, url FROM urls WHERE hash IN ({','.join('?' * n)})"
            self._sql[n] = sql
        return sql

    def lookup(self, urls: Iterable[str]) -> dict[str, int]:
        """Ids of the URLs already stored (unknown URLs are absent from the result)."""
        found: dict[str, int] = {}
        miss: list[str] = []
        young, old = self._young, self._old
        for url in urls:
            url_id = young.get(url)
            if url_id is None:
                url_id = old.get(url)
            if url_id is None:
                miss.append(url)
            else:
                found[url] = url_id
        if not miss:
            return found
        wanted = set(miss)
        hashes = [self._hash(u) for u in miss]
        execute = self._conn.execute
        for start in range(0, len(hashes), _CHUNK):
            chunk = hashes[start:start + _CHUNK]
            for url_id, url in execute(self._query(len(chunk)), chunk):
                if url in wanted:  # same hash, other text: a collision, skipped
                    found[url] = url_id
                    self._remember(url, url_id)
        return found

    def resolve(self, urls: Iterable[str], depth: Mapping[str, int] | int = 0) -> dict[str, int]:
        """Ids of ``urls``, creating unread rows for new ones (call inside a write txn).

        ``depth`` is the crawl depth of a newly created URL: one value, or per URL.
        """
        urls = list(dict.fromkeys(urls))
        found = self.lookup(urls)
        new = [u for u in urls if u not in found]
        if not new:
            return found
        first = (self._conn.execute("SELECT max(id) FROM urls").fetchone()[0] or 0) + 1
        if first + len(new) - 1 > _MAX_ID:
            raise MetadataError(
                f"URL id space exhausted ({_MAX_ID} URLs, child lists store int32 ids); "
                "prune the store or start a new one")
        host_ids = self._host_ids({host_of(u) for u in new})
        hash_fn = self._hash
        rows = []
        for offset, url in enumerate(new):
            url_id = first + offset
            d = depth if isinstance(depth, int) else depth.get(url, 0)
            rows.append((url_id, hash_fn(url), host_ids[host_of(url)], d, url))
            found[url] = url_id
            self._remember(url, url_id)
        self._conn.executemany(
            "INSERT INTO urls (id, hash, host_id, depth, url) VALUES (?, ?, ?, ?, ?)", rows)
        return found

    def _host_ids(self, hosts: set[str]) -> dict[str, int]:
        cache = self._hosts
        missing = [h for h in hosts if h not in cache]
        if missing:
            self._conn.executemany("INSERT OR IGNORE INTO hosts (host) VALUES (?)",
                                   [(h,) for h in missing])
            for start in range(0, len(missing), _CHUNK):
                chunk = missing[start:start + _CHUNK]
                sql = f"SELECT host, id FROM hosts WHERE host IN ({','.join('?' * len(chunk))})"
                cache.update(self._conn.execute(sql, chunk))
        return {h: cache[h] for h in hosts}

    def forget(self) -> None:
        """Drop cached ids (after a rolled-back transaction they may not exist)."""
        self._young.clear()
        self._old.clear()
        self._hosts.clear()
