"""The ``pending`` table (documents waiting for DTDs, paper 003 §4) holds only this crawl's
waiting documents: a row a stopped crawl left is dropped at the start, so a document that no
longer waits (its DOCTYPE gone) is not reported waiting for good. Real HTTP server on
127.0.0.1, real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from metadata import Enqueue, MetadataStore, SetPending
from xyro.service.crawl_run import run_crawl

DOC = b'<?xml version="1.0"?><catalog><item>no DOCTYPE now</item></catalog>'


def test_a_waiting_row_a_stopped_crawl_left_is_dropped_at_the_next_start(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, DOC))
    url = site.base + "/c.xml"
    app = local_app_for(tmp_path, f"seeds={json.dumps([url])}")
    # What a crawl stopped while c.xml waited for its DTD leaves behind: its frontier row
    # (no record is written while it waits) and its pending row.
    with MetadataStore.open(tmp_path / "xyro.db") as store, store.writer() as writer:
        writer.submit(Enqueue(url, 1, enqueued_at=1.0))
        writer.submit(SetPending(url, (site.base + "/c.dtd",), 1.0, "waiting for 1 DTD"))

    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        assert conn.execute("SELECT count(*) FROM pending").fetchone() == (0,)
        assert conn.execute("SELECT type FROM urls WHERE url = ?", (url,)).fetchone() == ("xml",)
    finally:
        conn.close()
