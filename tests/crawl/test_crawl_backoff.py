"""A verdict on one page (its Content-Type, a 404, a parse error) must not back the host off.

The host's error back-off (30 s, doubling) is for signs that the host is struggling:
timeouts, refused connections, DNS failures. It once also fired on a rejected Content-Type,
which stalled every host of the synthetic web for 30 s at a time (10 pages/s instead of
several hundred). Here one host serves, besides its HTML pages, a PNG, a 404 and a page
that is not HTML at all; with delay 0 the whole site must be crawled at once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pytest_httpserver import HTTPServer

from xyro.app import App
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.service.crawl_run import run_crawl

PAGES = [f"/p{i}.html" for i in range(6)]


def _site(server: HTTPServer) -> None:
    server.expect_request("/robots.txt").respond_with_data("", status=404)
    links = "".join(f'<a href="{p}">{p}</a>' for p in [*PAGES, "/pic.png", "/gone.html",
                                                         "/blob.html"])
    server.expect_request("/").respond_with_data(f"<html><body>{links}</body></html>",
                                                 content_type="text/html")
    server.expect_request("/pic.png").respond_with_data(b"\x89PNG\r\n\x1a\n" + b"\0" * 64,
                                                        content_type="image/png")
    server.expect_request("/gone.html").respond_with_data("no", status=404)
    server.expect_request("/blob.html").respond_with_data(b"\0\1\2" * 100,
                                                          content_type="application/octet-stream")
    for p in PAGES:
        server.expect_request(p).respond_with_data(f"<html><body>{p}</body></html>",
                                                   content_type="text/html")


def test_page_verdicts_do_not_stall_the_host(tmp_path: Path, httpserver: HTTPServer) -> None:
    _site(httpserver)
    seed = httpserver.url_for("/")
    config = load_config(None, {}, [
        f"seeds={json.dumps([seed])}", "scope.allow_private_addresses=true",
        "crawler.politeness.delay_s=0", "crawler.workers=2",
        # /pic.png must reach the server so its Content-Type is judged after the fetch
        "crawler.skip_suffixes=[]",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}"])
    app = App(config, WallClock())
    with app.open_store(create=True):
        pass
    started = time.monotonic()
    summary = run_crawl(app, max_seconds=20)
    seconds = time.monotonic() - started
    served = {req.path for req, _ in httpserver.log}
    assert {"/pic.png", "/gone.html", "/blob.html", *PAGES} <= served
    assert summary.stop_reason == "frontier exhausted"
    assert seconds < 10, f"the host was backed off: the crawl took {seconds:.1f} s"
    errors = summary.stats["errors_by_kind"]
    assert errors.get("content_type", 0) >= 1 and errors.get("http_status", 0) == 1
