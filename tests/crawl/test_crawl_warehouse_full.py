"""A warehouse that cannot take a document (a full disk, a folder gone read-only) stops the
crawl with one clear error; the document is not recorded as an ERROR and stays queued, so
the crawl after the operator's fix stores it (DESIGN.md §7: nothing already stored is lost,
nothing half-done is recorded). Real HTTP server on 127.0.0.1, real SQLite, a real
warehouse folder whose blob folder is blocked by a file (as root, permissions would not)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from xyro.errors import AccessError
from xyro.loader import Warehouse
from xyro.service.crawl_run import run_crawl

PLAIN = b'<?xml version="1.0"?><catalog><item>kept for later</item></catalog>'
# Held until its DTD arrives, then stored by the load that resumes it.
WITH_DTD = b'<?xml version="1.0"?><!DOCTYPE r SYSTEM "r.dtd"><r>kept for later</r>'
DTD = b"<!ELEMENT r (#PCDATA)>"


@pytest.mark.parametrize("doc", [PLAIN, WITH_DTD], ids=["plain", "held-for-its-dtd"])
def test_a_warehouse_that_cannot_write_stops_the_crawl_and_loses_nothing(
        doc: bytes, tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"},
                                     DTD if path == "/r.dtd" else doc))
    url = site.base + "/c.xml"
    app = local_app_for(tmp_path, f"seeds={json.dumps([url])}")
    warehouse = Warehouse(tmp_path / "warehouse")
    blocker = warehouse.root / warehouse.key_of(doc)[:2]
    warehouse.root.mkdir(parents=True, exist_ok=True)
    blocker.write_bytes(b"not a folder")   # the blob's folder cannot be made: as a full disk

    with pytest.raises(AccessError, match="the crawl stopped: cannot write a document to the "
                                          "warehouse"):
        run_crawl(app, max_seconds=30)
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        assert conn.execute("SELECT type, accesses FROM urls WHERE url = ?",
                            (url,)).fetchone() == ("unread", 0)
        assert conn.execute("SELECT count(*) FROM errors").fetchone() == (0,)
        assert conn.execute("SELECT url FROM frontier JOIN urls ON urls.id = url_id "
                            "WHERE url = ?", (url,)).fetchone() == (url,)
        assert conn.execute("SELECT status FROM job_runs WHERE name = 'crawl'").fetchone() \
            == ("error",)
    finally:
        conn.close()

    blocker.unlink()   # the operator frees the space
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        assert conn.execute("SELECT type FROM urls WHERE url = ?", (url,)).fetchone() == ("xml",)
        assert conn.execute("SELECT count(*) FROM xml_versions JOIN urls ON urls.id = url_id "
                            "WHERE url = ?", (url,)).fetchone() == (1,)
    finally:
        conn.close()
    assert warehouse.get(warehouse.key_of(doc)) == doc
