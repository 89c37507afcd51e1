"""A DTD URL that answers 200 with an HTML page (a server's "not found" page) is a failed
DTD, not a DTD: the document that needs it ends as an ``entity`` error that says so, nothing
is kept as the DTD (the cache of this run or the warehouse of the next), and the document
loads once the real DTD is served. Real HTTP server on 127.0.0.1, real SQLite, real lxml."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.crawl.admission import Source
from xyro.crawl.frontier import REFRESH
from xyro.service.crawl_run import run_crawl

DOC = b'<?xml version="1.0"?><!DOCTYPE r SYSTEM "/dtd/doc.dtd"><r>a document</r>'
DTD = b"<!ELEMENT r (#PCDATA)>"
NOT_FOUND = b"<!DOCTYPE html><html><head><title>Not found</title></head><body>Sorry</body></html>"


def test_an_html_page_served_for_a_dtd_fails_the_document_and_is_not_kept(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    fixed = False

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/dtd/doc.dtd":
            return (200, {"Content-Type": "application/xml-dtd"}, DTD) if fixed else \
                (200, {"Content-Type": "text/html"}, NOT_FOUND)
        return 200, {"Content-Type": "application/xml"}, DOC
    site = routed_site(respond)
    url = site.base + "/a.xml"
    app = local_app_for(tmp_path, f"seeds={json.dumps([url])}")
    run_crawl(app, max_seconds=30)
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        kind, detail = conn.execute(
            "SELECT kind, detail FROM errors JOIN urls ON urls.id = url_id WHERE url = ?",
            (url,)).fetchone()
        assert kind == "entity" and "HTML page (text/html), not a DTD or entity" in detail
        assert conn.execute("SELECT count(*) FROM xml_versions").fetchone() == (0,)

        fixed = True

        def retry(parts: Any) -> None:   # as the refresh planner retries a failed page
            parts.crawler.frontier.submit(Source.REFRESH, [url], REFRESH)
        run_crawl(app, max_seconds=30, customize=retry)
        assert conn.execute("SELECT type FROM urls WHERE url = ?", (url,)).fetchone() \
            == ("xml",)
    finally:
        conn.close()
