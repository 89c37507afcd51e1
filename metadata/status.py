"""The summary behind ``xyro status``: counts, queues, due pages, jobs, errors."""

from __future__ import annotations

import json
import sqlite3


def store_status(conn: sqlite3.Connection, current_unit: int | None) -> dict:
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
        "frontier": frontier,
        "frontier_total": sum(frontier.values()),
        "current_unit": current_unit,
        "due_now": due_now,
        "last_job_runs": jobs,
        "errors_by_kind": errors,
        "hosts": q("SELECT count(*) FROM hosts").fetchone()[0],
        "xml_versions": q("SELECT count(*) FROM xml_versions").fetchone()[0],
        "pending": q("SELECT count(*) FROM pending").fetchone()[0],
        "state": state,
    }
