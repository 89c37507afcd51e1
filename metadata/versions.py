"""Read and maintenance queries on the XML version data (``xml_versions``, ``pending``).

Reads take a reader's own connection. :func:`prune_versions` writes: call it inside
``MetadataStore.atomic()`` while the crawl writer is idle (it returns the storage keys
that lost their last reference, for the warehouse to delete after the commit).
"""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple

from metadata.schema import FETCHED
from metadata.urlkeys import url_hash

# A URL with versions was fetched (an XmlVersion op marks it so), hence in the hash index.
_LATEST = f"""
SELECT v.c14n_signature, v.md5, v.storage_key, u.last_access, v.dtd_url, v.valid
FROM xml_versions v
JOIN urls u ON u.id = v.url_id
WHERE u.hash = ? AND u.url = ? AND u.{FETCHED} ORDER BY v.fetched_at DESC, v.id DESC LIMIT 1
"""

_PRUNE = """
DELETE FROM xml_versions WHERE id IN (
  SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY url_id
                  ORDER BY fetched_at DESC, id DESC) AS n FROM xml_versions)
  WHERE n > ?)
RETURNING storage_key
"""


class LatestVersion(NamedTuple):
    """What the loader compares a new fetch with: the newest stored version of a URL."""

    c14n_signature: bytes | None   # None: a DTD or entity, kept by its bytes
    md5: bytes
    storage_key: str
    last_access: float | None      # the URL's, not the version's
    dtd_url: str | None
    valid: bool | None


def latest_version(conn: sqlite3.Connection, url: str) -> LatestVersion | None:
    """The newest stored version of ``url``, or None."""
    row = conn.execute(_LATEST, (url_hash(url), url)).fetchone()
    return None if row is None else LatestVersion(
        row[0], row[1], row[2], row[3], row[4], None if row[5] is None else bool(row[5]))


def prune_versions(conn: sqlite3.Connection, keep: int) -> set[str]:
    """Keep the newest ``keep`` versions of each URL; the keys no row references any more."""
    if keep < 1:
        raise ValueError(f"versions to keep per URL must be >= 1, got {keep}")
    dropped = {row[0] for row in conn.execute(_PRUNE, (keep,))}
    if not dropped:
        return set()
    still = referenced_keys(conn, dropped)
    return dropped - still


def referenced_keys(conn: sqlite3.Connection, keys: set[str] | None = None) -> set[str]:
    """Storage keys referenced by some version (all of them, or those among ``keys``)."""
    if keys is None:
        return {row[0] for row in conn.execute("SELECT DISTINCT storage_key FROM xml_versions")}
    found: set[str] = set()
    items = list(keys)
    for start in range(0, len(items), 500):
        chunk = items[start:start + 500]
        sql = (f"SELECT DISTINCT storage_key FROM xml_versions "
               f"WHERE storage_key IN ({','.join('?' * len(chunk))})")
        found.update(row[0] for row in conn.execute(sql, chunk))
    return found


def pending_documents(conn: sqlite3.Connection) -> list[tuple[str, list[str], float, str]]:
    """Documents waiting for DTDs/entities: (url, waiting_for, since, reason)."""
    rows = conn.execute("SELECT u.url, p.waiting_for, p.since, p.reason FROM pending p "
                        "JOIN urls u ON u.id = p.url_id ORDER BY p.since")
    return [(url, json.loads(waiting), since, reason) for url, waiting, since, reason in rows]


def forget_pending(conn: sqlite3.Connection) -> int:
    """Empty ``pending`` at a crawl's start: the rows are a stopped crawl's, whose waiting
    documents lived in its memory. Each is fetched again from its frontier row and files its
    row anew if it still waits (one that lost its DOCTYPE, or is gone, would otherwise be
    reported waiting for good). Returns the rows removed."""
    return conn.execute("DELETE FROM pending").rowcount
