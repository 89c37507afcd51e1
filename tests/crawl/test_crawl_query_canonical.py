"""A URL's query as it is fetched (xyro.net.urls: canonicalize): sorted, so two orders of
the same parameters (faceted navigation appends filters in the order clicked) are one URL
and one fetch, and a parameter written without "=" keeps that spelling (a JAX-WS endpoint
answers ``?wsdl`` with its WSDL, not ``?wsdl=``). Real HTTP server on 127.0.0.1, real crawl
into real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

FETCHED = ["/svc?wsdl", "/p?a=2&b=1", "/q?x=a+b&y"]


def test_queries_are_fetched_once_per_resource_and_bare_names_kept(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    hrefs = ["/svc?wsdl", "/svc?wsdl#top", "/p?b=1&a=2", "/p?a=2&b=1", "/q?y&x=a b",
             "/q?x=a%20b&y"]
    links = "".join(f'<a href="{h}">l</a>' for h in hrefs).encode()
    site = routed_site(lambda path: (200, {}, links if path == "/" else b"<p>x</p>"))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}")
    summary = run_crawl(app, max_seconds=30)

    assert summary.stop_reason == "frontier exhausted"
    assert sorted(site.requests) == sorted(["/", *FETCHED])   # each once
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        stored = {url for url, in conn.execute("SELECT url FROM urls")}
    finally:
        conn.close()
    assert stored == {site.base + p for p in ["/", *FETCHED]}
