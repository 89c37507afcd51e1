"""Read-side look-ups the crawl engine needs: conditional-GET validators and known URLs.

Each function takes a reader's own connection (``MetadataStore.read_connection()``), so
fetch worker threads never share one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from metadata.records import PageType
from metadata.schema import FETCHED
from metadata.urlkeys import url_hash

# Only fetched URLs have validators, and only they are in the (partial) hash index.
_VALIDATORS = (f"SELECT url, etag, last_modified, type, last_access, signature FROM urls "
               f"WHERE hash = ? AND {FETCHED}")


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
