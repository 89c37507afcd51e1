"""The start URLs added with ``xyro seed`` (table ``seeds``, schema version 8), and those the
crawl found where a seed redirected to (``redirected_from``, schema version 9).

Configured seeds live in the configuration; these are the operator's others. They are kept
apart from the frontier for two readers: the scope (empty ``scope.allowed_domains`` means the
hosts of all the seeds, DESIGN.md §2), which must include them at every start, and a crawler
running while they are added, which picks up the rows above the last id it read. A row is
small and written on its own connection, so ``xyro seed`` never touches the ``urls`` table of
a database a crawler is writing (its writer's URL ids would not know the new rows).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

_INSERT = "INSERT INTO seeds (url, priority, added_at) VALUES (?, ?, ?)"

#: The metadata writer's statement for :class:`metadata.records.FoundSeed`: a URL stored as a
#: seed already (by the operator, say) keeps its row.
FOUND_SEED_SQL = ("INSERT OR IGNORE INTO seeds (url, priority, added_at, redirected_from) "
                  "VALUES (?, ?, ?, ?)")


@dataclass(frozen=True, slots=True)
class StoredSeed:
    """One row of ``seeds``: a canonical URL and the frontier priority it was added at;
    ``redirected_from``: the seed whose redirect the crawl followed to it (None: added with
    ``xyro seed``)."""

    id: int
    url: str
    priority: int
    added_at: float
    redirected_from: str | None = None


def add_seeds(conn: sqlite3.Connection, urls: Sequence[str], priority: int, at: float) -> int:
    """Store canonical ``urls`` as seeds in one transaction (``conn`` in autocommit mode). A
    URL seeded again gets a new row (a new id, so a running crawler reads it again and
    queues it once more) at the more urgent of its two priorities. Returns how many URLs
    were not seeds yet."""
    unique = list(dict.fromkeys(urls))
    conn.execute("BEGIN IMMEDIATE")
    try:
        known = dict(conn.execute(
            "SELECT url, priority FROM seeds WHERE url IN (SELECT value FROM json_each(?))",
            (json.dumps(unique),)))
        conn.executemany("DELETE FROM seeds WHERE url = ?", [(u,) for u in known])
        conn.executemany(_INSERT, [(u, min(priority, known.get(u, priority)), at)
                                   for u in unique])
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(unique) - len(known)


def stored_seeds(conn: sqlite3.Connection, after_id: int = 0) -> list[StoredSeed]:
    """The seeds with an id above ``after_id``, oldest first."""
    rows = conn.execute("SELECT id, url, priority, added_at, redirected_from FROM seeds "
                        "WHERE id > ? ORDER BY id", (after_id,)).fetchall()
    return [StoredSeed(*row) for row in rows]
