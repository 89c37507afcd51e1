"""Read-side look-ups the crawl engine needs: conditional-GET validators and known URLs.

Each function takes a reader's own connection (``MetadataStore.read_connection()``), so
fetch worker threads never share one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from metadata.records import PageType
from metadata.schema import CHILD_DTYPE, FETCHED
from metadata.urlkeys import url_hash

# Only fetched URLs have validators, and only they are in the (partial) hash index.
_VALIDATORS = (f"SELECT url, etag, last_modified, type, last_access, signature FROM urls "
               f"WHERE hash = ? AND {FETCHED}")
_CHUNK = 500  # ids per query (SQLite's bound variables)


@dataclass(frozen=True, slots=True)
class PriorFetch:
    """What the store knows of a URL's previous fetch: the conditional-GET validators, its
    type, and when it was last accessed with which signature (to judge the new fetch's
    interval against a published date, DESIGN.md §6). All None for a URL never fetched."""

    etag: str | None = None
    last_modified: float | None = None
    page_type: PageType | None = None
    last_access: float | None = None
    signature: bytes | None = None


NEVER_FETCHED = PriorFetch()


def prior_fetch(conn: sqlite3.Connection, url: str) -> PriorFetch:
    """The :class:`PriorFetch` of ``url``: one indexed row, read once per fetch."""
    for row_url, etag, last_modified, page_type, last_access, signature in conn.execute(
            _VALIDATORS, (url_hash(url),)):
        if row_url == url:  # the hash is only a look-up key: compare the text
            if page_type == PageType.OUTSIDE.value:   # read for its links, no document kept:
                return NEVER_FETCHED                  # a 304 now would leave it without one
            if page_type == PageType.ERROR.value:
                # Never loaded: a 304 would repeat the error without a look at the body, which
                # may load now (its DTD back, a limit raised). No validators, a full fetch.
                etag = last_modified = None
            known = PageType(page_type) if page_type != PageType.UNREAD.value else None
            return PriorFetch(etag, last_modified, known, last_access, signature)
    return NEVER_FETCHED


def validators(conn: sqlite3.Connection, url: str) -> tuple[str | None, float | None,
                                                             PageType | None]:
    """(ETag, Last-Modified, type) of ``url`` if it was fetched before, else Nones."""
    prior = prior_fetch(conn, url)
    return prior.etag, prior.last_modified, prior.page_type


def known_urls(conn: sqlite3.Connection, batch: int = 50_000) -> Iterator[str]:
    """Every URL in the store, in id order (to rebuild the crawler's seen-set at start)."""
    cursor = conn.execute("SELECT url FROM urls ORDER BY id")
    while rows := cursor.fetchmany(batch):
        for (url,) in rows:
            yield url


def recent_hosts(conn: sqlite3.Connection, since: float,
                 now: float) -> list[tuple[str, float, float, float]]:
    """(host[:port], last fetch start, robots.txt Crawl-delay or 0, paused until or 0) of
    every host fetched after ``since`` or paused past ``now``: a restart counts each host's
    politeness delay from its last request and keeps its pause."""
    rows = conn.execute("SELECT host, last_fetch, crawl_delay, paused_until FROM hosts "
                        "WHERE last_fetch > ? OR paused_until > ?", (since, now))
    return [(h, float(t or 0.0), float(d or 0.0), float(p or 0.0)) for h, t, d, p in rows]


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """A page the store shows fetched: its id, URL, last fetch (start time, HTTP status)."""

    url_id: int
    url: str
    last_access: float
    http_status: int | None


def fetched_pages(conn: sqlite3.Connection, batch: int = 50_000) -> Iterator[FetchedPage]:
    """Every fetched page but those fetched for their links alone (type ``outside``, the
    global estimate's: no OPIC visit), in no particular order."""
    cursor = conn.execute(f"SELECT id, url, last_access, http_status FROM urls "
                          f"WHERE {FETCHED} AND type != 'outside'")
    while rows := cursor.fetchmany(batch):
        for row in rows:
            yield FetchedPage(*row)


def outside_pages(conn: sqlite3.Connection) -> Iterator[tuple[str, int]]:
    """(URL, link depth) of every page fetched for its links alone (type ``outside``)."""
    yield from conn.execute("SELECT url, depth FROM urls WHERE type = 'outside'")


def child_lists(conn: sqlite3.Connection, url_ids: Sequence[int]
                ) -> dict[int, tuple[np.ndarray, bool]]:
    """For each of ``url_ids``: its stored child ids (page order, empty without a ``links``
    row) and whether its last fetch read content (a 200 or a 304: an observation at its
    ``last_access``; a failed fetch or a redirect writes none and leaves the links as the
    last good read stored them)."""
    found: dict[int, tuple[np.ndarray, bool]] = {}
    for start in range(0, len(url_ids), _CHUNK):
        chunk = list(url_ids[start:start + _CHUNK])
        sql = (f"SELECT u.id, l.children, EXISTS (SELECT 1 FROM observations o "
               f"WHERE o.url_id = u.id AND o.access = u.last_access) FROM urls u "
               f"LEFT JOIN links l ON l.src = u.id "
               f"WHERE u.id IN ({','.join('?' * len(chunk))})")
        for url_id, blob, read in conn.execute(sql, chunk):
            found[url_id] = (np.frombuffer(blob or b"", dtype=CHILD_DTYPE), bool(read))
    return found


def urls_by_id(conn: sqlite3.Connection, url_ids: Iterable[int]) -> dict[int, str]:
    """The URL of each of ``url_ids`` (ids that name no row are left out)."""
    unique = list(dict.fromkeys(url_ids))
    found: dict[int, str] = {}
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start:start + _CHUNK]
        found.update(conn.execute(f"SELECT id, url FROM urls WHERE id IN "
                                  f"({','.join('?' * len(chunk))})", chunk))
    return found


_UNFETCHED = ("SELECT url_id, max(at) AS at FROM errors WHERE kind = ? OR detail LIKE ? "
              "GROUP BY url_id")


def fetch_summary(conn: sqlite3.Connection, kind: str, detail_like: str
                  ) -> tuple[int, float | None]:
    """(pages whose last record was a fetch, the latest record's time) over the pages of
    :func:`fetched_pages`; records of no fetch as in :func:`unfetched_records`. Two scans in
    SQLite, no row handed to Python: a cheap check before a replay reads them all."""
    count, latest = conn.execute(f"SELECT count(*), max(last_access) FROM urls "
                                 f"WHERE {FETCHED} AND type != 'outside'").fetchone()
    (unfetched,) = conn.execute(
        f"SELECT count(*) FROM urls u JOIN ({_UNFETCHED}) e ON e.url_id = u.id "
        f"AND e.at = u.last_access WHERE u.{FETCHED} AND u.type != 'outside'",
        (kind, detail_like)).fetchone()
    return int(count) - int(unfetched), latest


def unfetched_records(conn: sqlite3.Connection, kind: str, detail_like: str
                      ) -> dict[int, float]:
    """Pages with a record that was no fetch (errors of ``kind``, or whose detail matches
    the LIKE pattern ``detail_like``): url id → the latest such record's time."""
    rows = conn.execute(_UNFETCHED, (kind, detail_like))
    return {int(url_id): float(at) for url_id, at in rows}
