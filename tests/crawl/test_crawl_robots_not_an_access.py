"""A URL robots.txt forbids is never asked of its server, and the store says so: an ERROR
record of kind ``robots`` without an access (no access count or time, not counted in its
host's fetches), so SQL on ``urls``, ``hosts`` and the views agrees with the server's own
log of requests. Real HTTP server on 127.0.0.1, real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

ROBOTS = "User-agent: *\nDisallow: /private/\n"


def test_a_url_robots_txt_forbids_is_an_error_but_not_an_access(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    page = (b'<html><body><a href="/private/a.html">a</a><a href="/private/b.html">b</a>'
            b'<a href="/open.html">o</a></body></html>')
    site = routed_site(lambda path: (200, {}, page if path == "/" else b"<html></html>"),
                       robots=ROBOTS)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}")
    run_crawl(app, max_seconds=30)
    assert sorted(site.requests) == ["/", "/open.html"]
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        rows = conn.execute("SELECT type, accesses, first_access, last_access FROM urls "
                            "WHERE url LIKE '%/private/%'").fetchall()
        assert rows == [("error", 0, None, None)] * 2
        assert conn.execute("SELECT count(*) FROM errors WHERE kind = 'robots'").fetchone() \
            == (2,)
        assert conn.execute("SELECT sum(fetches), sum(errors) FROM hosts").fetchone() == (2, 2)
        assert conn.execute("SELECT sum(accesses) FROM urls").fetchone() == (2,)
    finally:
        conn.close()
