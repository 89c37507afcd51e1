"""``storage.fsync`` reaches the warehouse the crawl writes: a stored version's blob is on
disk before its row can commit (xyro/loader/warehouse.py), and an operator may trade that for
speed. Real HTTP server on 127.0.0.1, real SQLite, a real warehouse folder."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from xyro.service.crawl_run import run_crawl

DOC = b'<?xml version="1.0"?><catalog><item>kept through a power loss</item></catalog>'


@pytest.mark.parametrize("setting, synced_blob", [((), True), (("storage.fsync=false",), False)],
                         ids=["default", "off"])
def test_the_crawl_syncs_each_stored_blob_unless_told_not_to(
        setting: tuple[str, ...], synced_blob: bool, tmp_path: Path, local_app_for: Any,
        routed_site: Any, fsync_log: list[str]) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, DOC))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/c.xml'])}", *setting)
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        (key,) = conn.execute("SELECT storage_key FROM xml_versions").fetchone()
    finally:
        conn.close()
    blob_folder = str(tmp_path / "warehouse" / key[:5])
    assert (blob_folder in fsync_log) is synced_blob
    assert any(Path(p).parent == Path(blob_folder) for p in fsync_log) is synced_blob
