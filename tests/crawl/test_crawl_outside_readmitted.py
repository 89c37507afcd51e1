"""A page fetched for its links alone (type ``outside``: out of scope when the global
PageRank estimate chose it, DESIGN.md §5) is fetched as a page once the scope admits it: its
document stored, with no conditional request (its first fetch kept no document that a 304
could stand for). Its links, known since that first fetch, stay unread pages for the refresh
planner's discovery share, as every known unread page. Real HTTP server on 127.0.0.1, real
SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.crawl.admission import Source
from xyro.crawl.frontier import DISCOVERY
from xyro.service.crawl_run import run_crawl

DOC = b'<?xml version="1.0"?><catalog><item href="/e.xml">a link</item></catalog>'
CHILD = b'<?xml version="1.0"?><catalog><item>the child</item></catalog>'


def _types(db: Path) -> dict[str, tuple[str, int]]:
    conn = sqlite3.connect(db)
    try:
        return {url.rsplit("/", 1)[1]: (kind, versions) for url, kind, versions in conn.execute(
            "SELECT url, type, (SELECT count(*) FROM xml_versions v WHERE v.url_id = urls.id) "
            "FROM urls WHERE url LIKE '%.xml'")}
    finally:
        conn.close()


def test_a_page_read_for_its_links_is_fetched_as_a_page_once_in_scope(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml",
                                           "ETag": '"v1"'}, CHILD if path == "/e.xml" else DOC))
    url = site.base + "/d.xml"
    seeds = f"seeds={json.dumps([url])}"
    outside = local_app_for(tmp_path, seeds, 'scope.allowed_domains=["elsewhere.test"]')

    def choose(parts: Any) -> None:   # as a round of the estimate queues it
        parts.crawler.frontier.submit(Source.GLOBAL_ESTIMATE, [url], DISCOVERY)
    run_crawl(outside, max_seconds=30, customize=choose)
    assert _types(tmp_path / "xyro.db")["d.xml"] == ("outside", 0)
    assert site.requests == ["/d.xml"]

    grown = local_app_for(tmp_path, seeds, 'scope.allowed_domains=["127.0.0.1"]')
    assert run_crawl(grown, max_seconds=30).stop_reason == "frontier exhausted"
    assert _types(tmp_path / "xyro.db") == {"d.xml": ("xml", 1), "e.xml": ("unread", 0)}
    assert site.requests == ["/d.xml", "/d.xml"]
    assert "If-None-Match" not in site.headers[1]
