"""A URL's query is fetched in the order and spelling its link gave (xyro.net.urls:
canonicalize): a JAX-WS endpoint answers ``?wsdl`` and not ``?wsdl=``, and some servers read
parameters by position. Real HTTP server on 127.0.0.1, real crawl into real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

LINKED = ["/svc?wsdl", "/p?b=1&a=2", "/q?x=a%20b&y"]


def test_queries_are_fetched_and_stored_as_linked(tmp_path: Path, local_app_for: Any,
                                                  routed_site: Any) -> None:
    hrefs = [*LINKED, "/svc?wsdl#top", "/q?x=a b&y"]   # the same resources, spelt otherwise
    links = "".join(f'<a href="{h}">l</a>' for h in hrefs).encode()
    site = routed_site(lambda path: (200, {}, links if path == "/" else b"<p>x</p>"))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}")
    summary = run_crawl(app, max_seconds=30)

    assert summary.stop_reason == "frontier exhausted"
    assert sorted(site.requests) == sorted(["/", *LINKED])   # each once, as linked
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        stored = {url for url, in conn.execute("SELECT url FROM urls")}
    finally:
        conn.close()
    assert stored == {site.base + p for p in ["/", *LINKED]}
