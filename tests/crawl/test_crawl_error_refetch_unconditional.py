"""A document that failed to load (type ``error``: its DTD answered 500) is fetched again
without validators: the server's 304 would repeat the failure without a look at the body,
which loads now that its DTD is back. Real HTTP server on 127.0.0.1 that honours
If-None-Match, real SQLite, the real loader."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.crawl.admission import Source
from xyro.crawl.frontier import REFRESH
from xyro.service.crawl_run import run_crawl

DOC = (b'<?xml version="1.0"?><!DOCTYPE r SYSTEM "/doc.dtd"><r>kept once the DTD is '
       b'back</r>')
DTD = b"<!ELEMENT r (#PCDATA)>"


def test_a_document_that_failed_is_fetched_again_in_full(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    dtd_up = False

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/doc.dtd":
            return (200, {"Content-Type": "application/xml-dtd"}, DTD) if dtd_up else \
                (500, {}, b"down")
        if site.headers[-1].get("If-None-Match") == '"v1"':
            return 304, {"ETag": '"v1"'}, b""
        return 200, {"Content-Type": "application/xml", "ETag": '"v1"'}, DOC
    site = routed_site(respond)
    url = site.base + "/a.xml"
    app = local_app_for(tmp_path, f"seeds={json.dumps([url])}")
    run_crawl(app, max_seconds=30)
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        assert conn.execute("SELECT type FROM urls WHERE url = ?", (url,)).fetchone() \
            == ("error",)

        dtd_up = True

        def retry(parts: Any) -> None:   # as the refresh planner retries a failed page
            parts.crawler.frontier.submit(Source.REFRESH, [url], REFRESH)
        run_crawl(app, max_seconds=30, customize=retry)
        assert conn.execute("SELECT type FROM urls WHERE url = ?", (url,)).fetchone() \
            == ("xml",)
        assert conn.execute("SELECT count(*) FROM xml_versions JOIN urls ON urls.id = url_id "
                            "WHERE url = ?", (url,)).fetchone() == (1,)
    finally:
        conn.close()
    fetches = [h for p, h in zip(site.requests, site.headers) if p == "/a.xml"]
    assert len(fetches) == 2 and "If-None-Match" not in fetches[1]
