"""The summary behind ``xyro status``: counts, queues, due pages, jobs, errors (DESIGN.md §4,
"Status data").

Plain data only (JSON-able, times as POSIX seconds on the crawler's clock); the command line
turns it into text. Every figure is one aggregate query over an indexed column or a small
table, so the summary stays cheap on a large store.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from metadata.views import NEWEST_UNIT_FIRST

#: An ``xml_versions`` row kept for a DTD or an external entity rather than a document: the
#: loader stores those bytes without a C14N signature (``LoaderStage.store_entity``), and
#: reads them back by the same test. Apply it to a URL's latest version.
ENTITY_VERSION = "c14n_signature IS NULL"

_LATEST_KIND = f"""
SELECT sum(NOT is_entity), sum(is_entity) FROM (
  SELECT {ENTITY_VERSION} AS is_entity,
         row_number() OVER (PARTITION BY url_id ORDER BY fetched_at DESC, id DESC) AS rn
  FROM xml_versions)
WHERE rn = 1
"""

_LAST_ERROR = """
SELECT e.at, u.url, e.http_status, e.detail FROM errors e JOIN urls u ON u.id = e.url_id
WHERE e.kind = ? ORDER BY e.at DESC LIMIT 1
"""


def store_status(conn: sqlite3.Connection, current_unit: int | None) -> dict[str, Any]:
    """Plain-data summary (JSON-able). ``due_now`` needs the planner's current unit."""
    q = conn.execute
    by_type = dict(q("SELECT type, count(*) FROM urls GROUP BY type").fetchall())
    frontier = {int(p): int(c) for p, c in
                q("SELECT priority, count(*) FROM frontier GROUP BY priority ORDER BY priority")}
    due_now = None
    if current_unit is not None:
        due_now = q("SELECT count(*) FROM urls WHERE due_unit IS NOT NULL AND due_unit <= ?",
                    (current_unit,)).fetchone()[0]
    jobs = [dict(zip(("name", "started", "finished", "status", "detail"), r)) for r in
            q("SELECT name, started, finished, status, detail FROM job_runs "
              "WHERE id IN (SELECT max(id) FROM job_runs GROUP BY name) ORDER BY name")]
    errors = dict(q("SELECT kind, count(*) FROM errors GROUP BY kind ORDER BY kind").fetchall())
    state = {k: json.loads(v) for k, v in q("SELECT key, value FROM state")}
    return {
        "schema_version": q("PRAGMA user_version").fetchone()[0],
        "urls": sum(by_type.values()),
        "by_type": by_type,
        # Never-loaded pages whose failed fetch is to be tried again (index urls_retry).
        "retrying": q("SELECT count(*) FROM urls WHERE retry IS NOT NULL").fetchone()[0],
        "frontier": frontier,
        "frontier_total": sum(frontier.values()),
        "current_unit": current_unit,
        "due_now": due_now,
        "last_job_runs": jobs,
        "errors_by_kind": errors,
        "errors_last": last_errors(conn, errors),
        "hosts": q("SELECT count(*) FROM hosts").fetchone()[0],
        "xml_versions": q("SELECT count(*) FROM xml_versions").fetchone()[0],
        "warehouse": warehouse_counts(conn),
        "pending": q("SELECT count(*) FROM pending").fetchone()[0],
        "seeds_stored": q("SELECT count(*) FROM seeds").fetchone()[0],
        "seeds_found": q("SELECT count(*) FROM seeds WHERE redirected_from IS NOT NULL"
                         ).fetchone()[0],
        "opic": opic_summary(conn),
        "fetch_units": [dict(zip(_UNIT_COLUMNS, r)) for r in q(
            f"SELECT {', '.join(_UNIT_COLUMNS)} FROM fetch_units "
            f"ORDER BY {NEWEST_UNIT_FIRST} LIMIT 2")],
        "state": state,
    }


_UNIT_COLUMNS = ("unit", "unit_s", "bandwidth", "fetched", "refresh", "discovery", "urgent",
                 "carried_over", "ended")


def opic_summary(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The crawl's last OPIC checkpoint (pages, clock G, time) and its top pages, or None."""
    row = conn.execute("SELECT written_at, pages, clock FROM opic_checkpoint").fetchone()
    if row is None:
        return None
    top = [dict(zip(("url", "estimate", "cash", "history"), r)) for r in conn.execute(
        "SELECT url, opic_estimate, opic_cash, opic_history FROM urls "
        "WHERE opic_estimate IS NOT NULL ORDER BY opic_estimate DESC LIMIT 3")]
    return {"written_at": row[0], "pages": row[1], "clock_g": row[2], "top": top}


def warehouse_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """URLs with stored versions, split by their latest version: XML documents, and DTDs or
    external entities (:data:`ENTITY_VERSION`)."""
    documents, entities = conn.execute(_LATEST_KIND).fetchone()
    return {"documents": int(documents or 0), "dtds_and_entities": int(entities or 0)}


def last_errors(conn: sqlite3.Connection, kinds: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The newest error of each kind: time, URL, HTTP status, detail (one indexed look-up per
    kind, on ``errors(kind, at)``)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        row = conn.execute(_LAST_ERROR, (kind,)).fetchone()
        if row is not None:
            out[kind] = dict(zip(("at", "url", "http_status", "detail"), row))
    return out
