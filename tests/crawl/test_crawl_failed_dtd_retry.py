"""A document whose DTD failed is an ``entity`` error that says why, and loads when fetched
again once its DTD is served:

- a DTD URL answering 200 with an HTML page (a server's "not found" page) is a failed DTD,
  not a DTD: nothing is kept as the DTD (in the cache of this run or the warehouse of the
  next);
- the document is fetched again without validators: the server's 304 would repeat the
  failure for good without a look at the body, which loads now.

Real HTTP server on 127.0.0.1 that honours If-None-Match, real SQLite, the real loader."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from xyro.crawl.admission import Source
from xyro.crawl.frontier import REFRESH
from xyro.service.crawl_run import run_crawl

DOC = b'<?xml version="1.0"?><!DOCTYPE r SYSTEM "/dtd/doc.dtd"><r>a document</r>'
DTD = b"<!ELEMENT r (#PCDATA)>"
NOT_FOUND = b"<!DOCTYPE html><html><head><title>Not found</title></head><body>Sorry</body></html>"
FAILURES = {
    "html-page": ((200, {"Content-Type": "text/html"}, NOT_FOUND),
                  "HTML page (text/html), not a DTD or entity"),
    "server-error": ((500, {}, b"down"), "500"),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_document_whose_dtd_failed_loads_once_the_dtd_is_back(
        failure: str, tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    answer, said = FAILURES[failure]
    fixed = False

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/dtd/doc.dtd":
            return (200, {"Content-Type": "application/xml-dtd"}, DTD) if fixed else answer
        if site.headers[-1].get("If-None-Match") == '"v1"':
            return 304, {"ETag": '"v1"'}, b""
        return 200, {"Content-Type": "application/xml", "ETag": '"v1"'}, DOC
    site = routed_site(respond)
    url = site.base + "/a.xml"
    app = local_app_for(tmp_path, f"seeds={json.dumps([url])}")
    run_crawl(app, max_seconds=30)
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        kind, detail = conn.execute(
            "SELECT kind, detail FROM errors JOIN urls ON urls.id = url_id WHERE url = ?",
            (url,)).fetchone()
        assert kind == "entity" and said in detail, detail
        assert conn.execute("SELECT count(*) FROM xml_versions").fetchone() == (0,)

        fixed = True

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
