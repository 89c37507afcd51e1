"""Schema versions and in-place migration (DESIGN.md §4).

Every database starts at version 1 (:data:`V1_DDL`, kept verbatim: the first released
layout) and is brought forward by the steps in :data:`MIGRATIONS`, one transaction each,
each recorded in the ``migrations`` table and in ``PRAGMA user_version``. A fresh file and a
years-old file take the same path, so the upgrade code is exercised on every ``init``.

Version 2 improves on version 1 in two ways:

* child lists: v1 stored one ``links`` row per link (src, pos, dst) — about ten rows and
  ~30 bytes of b-tree per link. v2 stores one row per page with the ordered child ids as a
  BLOB of little-endian int32 (``links.children``), so a fetch writes one row, and the CSR
  export is ``np.frombuffer`` over the concatenated blobs;
* it adds the XML version data (``xml_versions``), the status data of documents waiting for
  DTDs/entities (``pending``), and a partial index on the refresh folder (``due_unit``).

Version 3 makes ``urls_hash`` partial: it indexes only URLs fetched at least once
(``first_access IS NOT NULL``). Every fetched page brings about five links never seen
before; indexing each new URL was one random insert into a b-tree that outgrew the caches
(measured at 3M URLs: 5 µs per URL, over a third of the writer's time, plus the index pages
rewritten into the WAL at every commit). A new URL is now found through the in-memory
:class:`~metadata.idmap.IdMap` of the writer (and of ``MetadataStore.url_ids``); readers
that look a URL up by its hash want fetched pages (validators, XML versions) and add the
same condition so SQLite uses the index. A page enters the index once, at its first fetch.

Version 4 serves the refresh planner's per-unit work in O(G + pages changed) (DESIGN.md §6):

* ``urls.weight``, the planner's refresh weight key (written only by the planner,
  ``SetWeights``): √(r·λ) > 0 (λ in changes per time unit) for a page with an estimated
  rate, −√r for a page on the prior rate (its weight is √(r·prior), the prior being in the
  ``state`` table), NULL for pages not refreshed. The partial index ``urls_weight`` lets the
  planner find the pages whose weight lies between two values: the pages that cross a
  clamp edge when the water level K moves (:mod:`refresh.waterlevel`);
* ``urls_unread``: the unread URLs in discovery order (OPIC cash, then importance, both
  descending with NULLs last, then id), so a unit's ρ·G discovery pages are the first
  entries of an index instead of a sort of every unread row.

Version 5 adds ``opic_checkpoint``: one row holding the crawl's whole OPIC state (000/004,
DESIGN.md §5) as the crawl last checkpointed it (a compressed ``.npz``: per-page cash,
history and the adaptive records, the clock G, V's cash, and the pages' URLs), so a restarted
crawl continues from it with the total cash conserved. ``urls.opic_cash``/``opic_history``
and the new ``urls.opic_estimate`` (the page's share of importance, summing to 1) are
refreshed from the same checkpoint for SQL.

We keep our own integer-versioned table rather than sqlite-utils' name-keyed ``Migrations``
helper because a file written by a *newer* Xyro must be refused, which needs ordered versions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

import numpy as np

from metadata.errors import StoreUnusableError
from metadata.refresh_queries import ERROR_TRIES, LASTING_ERRORS
from metadata.views import VIEWS

CURRENT_VERSION = 11

# Wall-clock time of an upgrade, computed by SQLite: the record of when a file was migrated
# is about the real world, not the crawler's clock line.
_SQL_NOW = "(julianday('now') - 2440587.5) * 86400.0"

V1_DDL = """
CREATE TABLE migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  REAL NOT NULL
);
CREATE TABLE state (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE hosts (
    id          INTEGER PRIMARY KEY,
    host        TEXT NOT NULL UNIQUE,
    fetches     INTEGER NOT NULL DEFAULT 0,
    errors      INTEGER NOT NULL DEFAULT 0,
    last_fetch  REAL
);
CREATE TABLE urls (
    id             INTEGER PRIMARY KEY,
    hash           INTEGER NOT NULL,
    type           TEXT NOT NULL DEFAULT 'unread',
    host_id        INTEGER NOT NULL,
    depth          INTEGER NOT NULL DEFAULT 0,
    url            TEXT NOT NULL,
    first_access   REAL,
    last_access    REAL,
    last_change    REAL,
    last_modified  REAL,
    etag           TEXT,
    signature      BLOB,
    http_status    INTEGER,
    content_type   TEXT,
    size           INTEGER,
    accesses       INTEGER NOT NULL DEFAULT 0,
    changes        INTEGER NOT NULL DEFAULT 0,
    unchanged      INTEGER NOT NULL DEFAULT 0,
    baseline_at    REAL,
    dead_count     INTEGER NOT NULL DEFAULT 0,
    importance     REAL,
    interest       REAL,
    opic_cash      REAL,
    opic_history   REAL,
    rate           REAL,
    rate_source    TEXT,
    due_unit       INTEGER,
    interval_units REAL
);
CREATE INDEX urls_hash ON urls(hash);
CREATE TABLE links (
    src  INTEGER NOT NULL,
    pos  INTEGER NOT NULL,
    dst  INTEGER NOT NULL,
    PRIMARY KEY (src, pos)
) WITHOUT ROWID;
CREATE TABLE observations (
    id             INTEGER PRIMARY KEY,
    url_id         INTEGER NOT NULL,
    prev_access    REAL,
    access         REAL NOT NULL,
    changed        INTEGER NOT NULL,
    last_modified  REAL
);
CREATE INDEX observations_url ON observations(url_id);
CREATE TABLE frontier (
    url_id       INTEGER PRIMARY KEY,
    priority     INTEGER NOT NULL,
    enqueued_at  REAL NOT NULL,
    not_before   REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE job_runs (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,
    started   REAL NOT NULL,
    finished  REAL,
    status    TEXT NOT NULL,
    detail    TEXT
);
CREATE TABLE errors (
    id           INTEGER PRIMARY KEY,
    url_id       INTEGER NOT NULL,
    host_id      INTEGER NOT NULL,
    at           REAL NOT NULL,
    kind         TEXT NOT NULL,
    http_status  INTEGER,
    detail       TEXT
);
CREATE INDEX errors_kind_at ON errors(kind, at);
"""

V2_DDL = """
CREATE TABLE links_v2 (
    src       INTEGER PRIMARY KEY,
    n         INTEGER NOT NULL,
    children  BLOB NOT NULL
);
CREATE TABLE xml_versions (
    id               INTEGER PRIMARY KEY,
    url_id           INTEGER NOT NULL,
    md5              BLOB NOT NULL,
    c14n_signature   BLOB,
    fetched_at       REAL NOT NULL,
    size             INTEGER NOT NULL,
    storage_key      TEXT NOT NULL,
    valid            INTEGER,
    validation_error TEXT,
    dtd_url          TEXT,
    schema_url       TEXT
);
CREATE INDEX xml_versions_url ON xml_versions(url_id, fetched_at);
CREATE TABLE pending (
    url_id       INTEGER PRIMARY KEY,
    waiting_for  TEXT NOT NULL,
    since        REAL NOT NULL,
    reason       TEXT NOT NULL
);
CREATE INDEX urls_due ON urls(due_unit) WHERE due_unit IS NOT NULL;
"""


CHILD_DTYPE = "<i4"  # a child list BLOB (schema v2): little-endian int32 ids, page order


def pack_children(ids: Sequence[int] | np.ndarray) -> bytes:
    """Child ids as the v2 BLOB (:data:`CHILD_DTYPE`), page order kept."""
    return np.asarray(ids, dtype=CHILD_DTYPE).tobytes()


def _create_v1(conn: sqlite3.Connection) -> None:
    for statement in V1_DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    for statement in V2_DDL.split(";"):
        if statement.strip():
            conn.execute(statement)
    rows = conn.execute("SELECT src, dst FROM links ORDER BY src, pos")
    batch: list[tuple[int, int, bytes]] = []
    current, kids = None, []
    for src, dst in rows:
        if src != current:
            if current is not None:
                batch.append((current, len(kids), pack_children(kids)))
            current, kids = src, []
        kids.append(dst)
    if current is not None:
        batch.append((current, len(kids), pack_children(kids)))
    conn.executemany("INSERT INTO links_v2 (src, n, children) VALUES (?, ?, ?)", batch)
    conn.execute("DROP TABLE links")
    conn.execute("ALTER TABLE links_v2 RENAME TO links")


#: The partial hash index of version 3; queries using it must say ``first_access IS NOT NULL``.
FETCHED = "first_access IS NOT NULL"


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    conn.execute("DROP INDEX urls_hash")
    conn.execute(f"CREATE INDEX urls_hash ON urls(hash) WHERE {FETCHED}")


V4_DDL = """
ALTER TABLE urls ADD COLUMN weight REAL;
CREATE INDEX urls_weight ON urls(weight) WHERE weight IS NOT NULL;
CREATE INDEX urls_unread ON urls(opic_cash DESC, importance DESC) WHERE type = 'unread';
"""


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    for statement in V4_DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


V5_DDL = """
CREATE TABLE opic_checkpoint (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    written_at  REAL NOT NULL,
    pages       INTEGER NOT NULL,
    clock       REAL NOT NULL,
    data        BLOB NOT NULL
);
ALTER TABLE urls ADD COLUMN opic_estimate REAL
"""


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    for statement in V5_DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


V6_DDL = """
CREATE TABLE fetch_units (
    unit          INTEGER PRIMARY KEY,
    unit_s        REAL NOT NULL,
    bandwidth     INTEGER NOT NULL,
    fetched       INTEGER NOT NULL,
    refresh       INTEGER NOT NULL,
    discovery     INTEGER NOT NULL,
    urgent        INTEGER NOT NULL,
    carried_over  INTEGER,
    ended         INTEGER NOT NULL,
    updated_at    REAL NOT NULL
)
"""


def _v5_to_v6(conn: sqlite3.Connection) -> None:
    conn.execute(V6_DDL)


V7_DDL = """
ALTER TABLE urls ADD COLUMN lm_reliable INTEGER;
CREATE INDEX urls_lm_host ON urls(host_id, lm_reliable) WHERE lm_reliable IS NOT NULL
"""


def _v6_to_v7(conn: sqlite3.Connection) -> None:
    for statement in V7_DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


#: The start URLs added with ``xyro seed``, kept apart from the frontier: a scope derived from
#: the seeds (empty ``scope.allowed_domains``) includes their hosts at every start, and a
#: running crawler picks up rows added while it runs (ids above the last it read, never
#: reused: AUTOINCREMENT, so a row an operator deletes cannot hide a later one).
V8_DDL = """
CREATE TABLE seeds (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    url       TEXT NOT NULL UNIQUE,
    priority  INTEGER NOT NULL,
    added_at  REAL NOT NULL
)
"""


def _v7_to_v8(conn: sqlite3.Connection) -> None:
    conn.execute(V8_DDL)


#: A seed the crawl found itself: the target a seed redirected to, outside a scope derived
#: from the seeds (``redirected_from`` the seed; NULL for the operator's own seeds).
V9_DDL = "ALTER TABLE seeds ADD COLUMN redirected_from TEXT"


def _v8_to_v9(conn: sqlite3.Connection) -> None:
    conn.execute(V9_DDL)


#: Never-loaded pages whose fetch failed and is to be tried again (``urls.retry`` 1, set by
#: the writer), in the order their retries fall due: ``refresh_queries.retries_due``. The
#: pages that failed before this version are marked as the writer would have marked them.
#: Each host's robots.txt Crawl-delay, for the first request after a restart.
V10_DDL = f"""
ALTER TABLE hosts ADD COLUMN crawl_delay REAL;
ALTER TABLE urls ADD COLUMN retry INTEGER;
CREATE INDEX urls_retry ON urls(last_access) WHERE retry IS NOT NULL;
UPDATE urls SET retry = 1 WHERE type = 'error' AND accesses < {ERROR_TRIES} AND id NOT IN (
  SELECT url_id FROM errors WHERE id IN (SELECT max(id) FROM errors GROUP BY url_id)
  AND kind IN ({", ".join(repr(k) for k in LASTING_ERRORS)}))
"""


def _v9_to_v10(conn: sqlite3.Connection) -> None:
    for statement in V10_DDL.split(";"):   # executescript would commit the migration
        if statement.strip():
            conn.execute(statement)


#: Each host's pause (Retry-After, back-off after failures) as last set, so a restart keeps it.
V11_DDL = "ALTER TABLE hosts ADD COLUMN paused_until REAL"


def _v10_to_v11(conn: sqlite3.Connection) -> None:
    conn.execute(V11_DDL)


#: version reached -> (name, step from the previous version)
MIGRATIONS: dict[int, tuple[str, Callable[[sqlite3.Connection], None]]] = {
    1: ("initial schema", _create_v1),
    2: ("child lists as int32 blobs; xml_versions, pending, due index", _v1_to_v2),
    3: ("hash index on fetched URLs only", _v2_to_v3),
    4: ("refresh weight key and its index; unread URLs in discovery order", _v3_to_v4),
    5: ("the OPIC checkpoint of the crawl (000/004: cash, history, clock)", _v4_to_v5),
    6: ("the crawl bandwidth spent per refresh time unit", _v5_to_v6),
    7: ("each page's Last-Modified verdict, for its host's", _v6_to_v7),
    8: ("the start URLs added with xyro seed", _v7_to_v8),
    9: ("seeds found where a seed redirected to", _v8_to_v9),
    10: ("never-loaded pages whose failed fetch is tried again; hosts' Crawl-delay",
         _v9_to_v10),
    11: ("hosts' pauses (Retry-After, back-off), kept across restarts", _v10_to_v11),
}


def file_version(conn: sqlite3.Connection, path: str) -> int:
    """Schema version of an open file: 0 for an empty file; refuses foreign databases (any
    tables without Xyro's, whatever their ``user_version``: other programs set it too)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if tables and not (version and {"migrations", "urls"} <= tables):
        raise StoreUnusableError(
            f"{path} is an SQLite database but not a Xyro metadata store (tables: "
            f"{', '.join(sorted(tables)[:5])}, user_version {version}); point storage at "
            "another file")
    return int(version)


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring ``conn``'s file to :data:`CURRENT_VERSION` in place; return the version found.

    ``conn`` must be in autocommit mode (isolation_level None). Each step runs in its own
    ``BEGIN IMMEDIATE`` transaction, so a crash mid-upgrade leaves the previous version.
    """
    found = file_version(conn, path)
    if found > CURRENT_VERSION:
        raise StoreUnusableError(
            f"{path} has metadata schema version {found}, newer than this Xyro supports "
            f"({CURRENT_VERSION}); upgrade Xyro or use a backup made by this version")
    for version in range(found + 1, CURRENT_VERSION + 1):
        name, step = MIGRATIONS[version]
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= version:
                conn.execute("ROLLBACK")
                continue
            step(conn)
            conn.execute(
                f"INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, {_SQL_NOW})",
                (version, name))
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    if found < CURRENT_VERSION or not _views_current(conn):
        create_views(conn)
    return found


def _views_current(conn: sqlite3.Connection) -> bool:
    """True if every view exists with this Xyro's SQL (SQLite keeps the CREATE statement)."""
    stored = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type='view'"))
    return all(stored.get(name) == f"CREATE VIEW {name} AS {sql}"
               for name, sql in VIEWS.items())


def create_views(conn: sqlite3.Connection) -> None:
    """Drop and recreate every ``v_*`` view (after a migration their SQL may have changed)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name, sql in VIEWS.items():
            conn.execute(f"DROP VIEW IF EXISTS {name}")
            conn.execute(f"CREATE VIEW IF NOT EXISTS {name} AS {sql}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
