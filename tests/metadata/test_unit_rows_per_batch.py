"""The crawl submits its unit's running row with nearly every page (xyro.crawl.unit_budget):
a batch writes one row per unit, the last submitted, with its page records (real SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from metadata import FetchRecord, MetadataStore, PageType, UnitSpent
from metadata.apply import BatchApplier
from metadata.connection import connect
from metadata.idmap import IdMap
from metadata.resolver import UrlResolver
from metadata.urlkeys import url_hash

UNIT_S = 3600.0
# Counts the rows the batch writes into fetch_units (a test-only table and trigger).
_COUNT_WRITES = """
CREATE TABLE unit_writes (n INTEGER NOT NULL);
INSERT INTO unit_writes VALUES (0);
CREATE TRIGGER count_unit_writes AFTER INSERT ON fetch_units
BEGIN UPDATE unit_writes SET n = n + 1; END;
"""


def _running(unit: int, fetched: int, at: float) -> UnitSpent:
    return UnitSpent(unit, UNIT_S, 1000, fetched, 0, fetched, 0, None, False, at)


def test_a_batch_writes_the_last_row_of_each_unit_once(tmp_path: Path) -> None:
    path = tmp_path / "xyro.db"
    MetadataStore.open(path).close()
    ops: list = []
    for i in range(1, 301):  # the dispatcher's row, then the page's record
        ops.append(_running(7, i, 100.0 + i))
        ops.append(FetchRecord(f"http://h.example/p{i}.html", 100.5 + i, PageType.HTML, 200,
                               b"%16d" % i))
    ops += [UnitSpent(7, UNIT_S, 1000, 300, 0, 300, 0, 12, True, 7200.0),
            _running(8, 1, 7200.5)]
    conn = connect(path)
    try:
        conn.executescript(_COUNT_WRITES)
        conn.execute("BEGIN IMMEDIATE")
        BatchApplier(conn, UrlResolver(conn, url_hash, IdMap()), 3, None).apply(ops)
        conn.execute("COMMIT")
    finally:
        conn.close()
    conn = sqlite3.connect(path)
    try:
        (writes,) = conn.execute("SELECT n FROM unit_writes").fetchone()
        rows = conn.execute("SELECT unit, fetched, carried_over, ended FROM fetch_units "
                            "ORDER BY unit").fetchall()
        (records,) = conn.execute("SELECT sum(accesses) FROM urls").fetchone()
    finally:
        conn.close()
    assert rows == [(7, 300, 12, 1), (8, 1, None, 0)]
    assert records == 300
    assert writes == 2  # not one per page
