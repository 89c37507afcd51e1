"""A crawl killed between writing a document's blob and committing its version row leaves
a blob nothing references; the next crawl removes such files before it writes any (nothing
half-written outlives a crash; the warehouse: paper 003 §2). Real HTTP server on 127.0.0.1,
real SQLite, a real warehouse folder; the kill is the state it leaves (the warehouse marked
as written to, an orphan blob and a temporary file)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from xyro.app import WAREHOUSE_WRITING
from xyro.errors import UsageError
from xyro.loader import Warehouse
from xyro.service.crawl_run import run_crawl

DOC = b'<?xml version="1.0"?><catalog><item>one</item></catalog>'


def _state(db: Path) -> Any:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT value FROM state WHERE key = ?",
                           (WAREHOUSE_WRITING,)).fetchone()
    finally:
        conn.close()
    return None if row is None else json.loads(row[0])


def test_blobs_a_killed_crawl_left_without_rows_are_removed_at_the_next_start(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, DOC))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/c.xml'])}")
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    db, warehouse = tmp_path / "xyro.db", Warehouse(tmp_path / "warehouse")
    kept = list(warehouse.keys())
    assert len(kept) == 1 and _state(db) == 0   # a clean stop says so

    # What a SIGKILL leaves: the mark of a crawl writing, a blob without its row, a .tmp.
    orphan = warehouse.put(b"<doc>written, never committed</doc>")
    tmp = warehouse.path_of(orphan).parent / ".tmp-killed"
    tmp.write_bytes(b"half")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE state SET value = '1' WHERE key = ?", (WAREHOUSE_WRITING,))
    conn.close()

    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    assert list(warehouse.keys()) == kept and not tmp.exists()
    assert _state(db) == 0


def test_a_second_database_may_not_share_the_warehouse(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    # The crash sweep (and the prune) delete what their database does not reference: on a
    # shared warehouse that is the other database's documents. The second one is refused.
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, DOC))
    seeds = f"seeds={json.dumps([site.base + '/c.xml'])}"
    first = local_app_for(tmp_path, seeds)
    assert run_crawl(first, max_seconds=30).stop_reason == "frontier exhausted"
    stored = list(Warehouse(tmp_path / "warehouse").keys())
    other = tmp_path / "other"
    other.mkdir()
    second = local_app_for(other, seeds, f"storage.warehouse_dir={tmp_path / 'warehouse'}")
    conn = sqlite3.connect(other / "xyro.db")
    with conn:   # as if the second crawl had been killed: its start sweeps
        conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, '1')",
                     (WAREHOUSE_WRITING,))
    conn.close()
    with pytest.raises(UsageError, match="holds the documents of another database"):
        run_crawl(second, max_seconds=30)
    assert list(Warehouse(tmp_path / "warehouse").keys()) == stored
    # The first database still owns it, across its restarts.
    assert run_crawl(first, max_seconds=30).stop_reason == "frontier exhausted"
    assert list(Warehouse(tmp_path / "warehouse").keys()) == stored


def test_a_missing_warehouse_is_not_replaced_by_an_empty_one(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    # A warehouse on a mount that failed to mount: a new empty folder in its place would
    # take the new versions, hidden once the mount comes back, the archive split in two.
    import shutil
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, DOC))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/c.xml'])}")
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    warehouse = tmp_path / "warehouse"
    shutil.move(warehouse, tmp_path / "unmounted")
    with pytest.raises(UsageError, match="does not hold this database's documents") as refused:
        run_crawl(app, max_seconds=30)
    assert "1 stored version(s)" in str(refused.value)
    assert not (warehouse / ".xyro-database").exists()
    shutil.move(tmp_path / "unmounted", warehouse)   # mounted again: the crawl goes on
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
