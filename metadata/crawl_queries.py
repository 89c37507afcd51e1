"""Read-side look-ups the crawl engine needs: conditional-GET validators and known URLs.

Each function takes a reader's own connection (``MetadataStore.read_connection()``), so
fetch worker threads never share one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from metadata.records import PageType
from metadata.schema import FETCHED
from metadata.urlkeys import url_hash

# Only fetched URLs have validators, and only they are in the (partial) hash index.
_VALIDATORS = f"SELECT url, etag, last_modified, type FROM urls WHERE hash = ? AND {FETCHED}"


def validators(conn: sqlite3.Connection, url: str) -> tuple[str | None, float | None,
                                                             PageType | None]:
    """(ETag, Last-Modified, type) of ``url`` if it was fetched before, else Nones."""
    for row_url, etag, last_modified, page_type in conn.execute(_VALIDATORS, (url_hash(url),)):
        if row_url == url:  # the hash is only a look-up key: compare the text
            known = PageType(page_type) if page_type != PageType.UNREAD.value else None
            return etag, last_modified, known
    return None, None, None


def known_urls(conn: sqlite3.Connection, batch: int = 50_000) -> Iterator[str]:
    """Every URL in the store, in id order (to rebuild the crawler's seen-set at start)."""
    cursor = conn.execute("SELECT url FROM urls ORDER BY id")
    while rows := cursor.fetchmany(batch):
        for (url,) in rows:
            yield url
