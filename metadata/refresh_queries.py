"""Read-side queries the refresh planner needs (DESIGN.md §4, §6).

Each function takes a reader's own connection (``MetadataStore.read_connection()``). Times
are POSIX seconds; ``urls.rate`` is changes per second. Bulk columns come back as numpy
arrays in URL-id order so the planner can hand them to the pure ``refresh`` package.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from metadata.urlkeys import url_hash

_CHUNK = 500

#: Page types the refresh planner keeps fresh (fetched documents).
PLANNED_TYPES = ("html", "xml")


@dataclass(frozen=True, eq=False)
class PlannedPages:
    """Fetched HTML/XML pages with what the planner needs, ascending id.

    NaN stands for SQL NULL in the float columns; ``due_unit`` uses ``NO_UNIT`` for NULL.
    """

    ids: np.ndarray            # int64
    host_id: np.ndarray        # int64
    is_xml: np.ndarray         # bool
    importance: np.ndarray     # float64, direct rank (mean 1)
    interest: np.ndarray       # float64, inverse rank (mean 1)
    rate: np.ndarray           # float64, changes per second
    rate_source: list[str | None]
    last_access: np.ndarray    # float64, POSIX seconds
    due_unit: np.ndarray       # int64
    interval_units: np.ndarray  # float64


NO_UNIT = np.iinfo(np.int64).min


def _f(value: float | None) -> float:
    return np.nan if value is None else float(value)


def planned_pages(conn: sqlite3.Connection) -> PlannedPages:
    """Every fetched HTML/XML page (accesses > 0), one full scan of ``urls``."""
    rows = conn.execute(
        "SELECT id, host_id, type, importance, interest, rate, rate_source, last_access, "
        "due_unit, interval_units FROM urls "
        f"WHERE type IN ({','.join('?' * len(PLANNED_TYPES))}) AND accesses > 0 ORDER BY id",
        PLANNED_TYPES).fetchall()
    n = len(rows)
    cols = list(zip(*rows)) if rows else [()] * 10
    return PlannedPages(
        ids=np.fromiter(cols[0], dtype=np.int64, count=n),
        host_id=np.fromiter(cols[1], dtype=np.int64, count=n),
        is_xml=np.fromiter((t == "xml" for t in cols[2]), dtype=bool, count=n),
        importance=np.fromiter((_f(v) for v in cols[3]), dtype=np.float64, count=n),
        interest=np.fromiter((_f(v) for v in cols[4]), dtype=np.float64, count=n),
        rate=np.fromiter((_f(v) for v in cols[5]), dtype=np.float64, count=n),
        rate_source=list(cols[6]),
        last_access=np.fromiter((_f(v) for v in cols[7]), dtype=np.float64, count=n),
        due_unit=np.fromiter((NO_UNIT if v is None else int(v) for v in cols[8]),
                             dtype=np.int64, count=n),
        interval_units=np.fromiter((_f(v) for v in cols[9]), dtype=np.float64, count=n))


def max_observation_id(conn: sqlite3.Connection) -> int:
    """The newest observation row id (0 when there is none)."""
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM observations").fetchone()[0])


def observed_since(conn: sqlite3.Connection, after_id: int, up_to_id: int) -> list[int]:
    """URL ids with an observation whose row id lies in (after_id, up_to_id]."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT url_id FROM observations WHERE id > ? AND id <= ?",
        (after_id, up_to_id))]


def observations_of(conn: sqlite3.Connection, url_ids: Iterable[int], up_to_id: int
                    ) -> dict[int, list[tuple[float, int, float | None]]]:
    """Per URL id its observations (access, changed, last_modified), oldest first."""
    out: dict[int, list[tuple[float, int, float | None]]] = {}
    ids = list(url_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        sql = ("SELECT url_id, access, changed, last_modified FROM observations "
               f"WHERE url_id IN ({','.join('?' * len(chunk))}) AND id <= ? "
               "ORDER BY url_id, access, id")
        for url_id, access, changed, lm in conn.execute(sql, (*chunk, up_to_id)):
            out.setdefault(url_id, []).append((access, changed, lm))
    return out


def due_ids(conn: sqlite3.Connection, unit: int) -> list[int]:
    """Pages filed in a folder ≤ ``unit`` (uses the partial index ``urls_due``)."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM urls WHERE due_unit IS NOT NULL AND due_unit <= ?", (unit,))]


def unread_ranked(conn: sqlite3.Connection, limit: int) -> list[int]:
    """Up to ``limit`` unread URL ids, highest OPIC cash first, then importance, then id.

    One scan of the unread pages (no index orders them): O(unread) per call.
    """
    if limit <= 0:
        return []
    return [r[0] for r in conn.execute(
        "SELECT id FROM urls WHERE type = 'unread' ORDER BY opic_cash IS NULL, "
        "opic_cash DESC, importance IS NULL, importance DESC, id LIMIT ?", (limit,))]


def urls_of(conn: sqlite3.Connection, url_ids: Iterable[int]) -> dict[int, str]:
    """URL text per id."""
    out: dict[int, str] = {}
    ids = list(url_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        out.update(conn.execute(
            f"SELECT id, url FROM urls WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def url_row(conn: sqlite3.Connection, url: str) -> dict | None:
    """The ``urls`` row of ``url`` as a dict (with its host name), or None if unknown."""
    cur = conn.execute(
        "SELECT u.*, h.host AS host FROM urls u JOIN hosts h ON h.id = u.host_id "
        "WHERE u.hash = ?", (url_hash(url),))
    names = [d[0] for d in cur.description]
    for row in cur:
        record = dict(zip(names, row))
        if record["url"] == url:  # the hash is only a look-up key
            return record
    return None


def host_names(conn: sqlite3.Connection, host_ids: Iterable[int]) -> dict[int, str]:
    ids = list(host_ids)
    out: dict[int, str] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        out.update(conn.execute(
            f"SELECT id, host FROM hosts WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def state_value(conn: sqlite3.Connection, key: str, default: object = None) -> object:
    """A JSON value from the ``state`` table."""
    row = conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
    return default if row is None else json.loads(row[0])
