"""A kill never leaves an XML page recorded as fetched without its version: the version goes
to the writer before the page's record (they may fall in two transactions), so what SIGKILL
leaves, a prefix of the ops, holds the version whenever it holds the record. The other way
round, the page's next fetch was conditional (its ETag stored), a 304 loaded nothing, and the
document stayed missing from the warehouse.

Real HTTP server on 127.0.0.1, real crawl, real SQLite; the kill as in
test_unit_budget_crash.py: every op submitted after its moment is dropped."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from metadata import FetchRecord
from xyro.app import build_crawler
from xyro.service.crawl_run import queue_seeds

DOC = b'<?xml version="1.0"?><doc>one</doc>'


def test_a_kill_after_an_xml_pages_record_keeps_its_version(
        tmp_path: Path, local_app_for: Any, routed_site: Any, kill_point: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml",
                                           "ETag": '"v1"'}, DOC))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/doc.xml'])}")
    stop = threading.Event()
    with app.open_store() as store:
        parts = build_crawler(app, store)
        kill = kill_point(parts, stop, lambda op: isinstance(op, FetchRecord)
                          and op.url.endswith("/doc.xml"))   # right after the page's record
        queue_seeds(parts.crawler.frontier, app.config.seeds)
        parts.crawler.run(max_seconds=30, stop=stop)
        parts.close()
    assert kill.dead
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        (kind, versions), = conn.execute(
            "SELECT u.type, (SELECT count(*) FROM xml_versions v WHERE v.url_id = u.id) "
            "FROM urls u WHERE u.url LIKE '%/doc.xml'")
    finally:
        conn.close()
    assert (kind, versions) == ("xml", 1)
