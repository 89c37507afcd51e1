"""A stop while robots.txt is being fetched is no answer from the host: the origin's URLs
stay queued (they were drained as unreachable, recorded as errors and dropped from the
frontier), and the next run crawls them. Real HTTP server on 127.0.0.1, real crawl."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from xyro.service.crawl_run import run_crawl

PAGES = [f"/p{i}.html" for i in range(5)]


class Site:
    def __init__(self) -> None:
        self.stop = threading.Event()
        self.slow_robots = True
        self.paths: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                site.paths.append(self.path)
                body, kind = b"<html><body>page</body></html>", "text/html"
                if self.path == "/robots.txt":
                    body, kind = b"User-agent: *\nAllow: /\n", "text/plain"
                    if site.slow_robots:
                        site.stop.set()  # the operator's SIGTERM, while this fetch runs
                        threading.Event().wait(3.0)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    thread = threading.Thread(target=s.server.serve_forever, daemon=True)
    thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def test_a_stop_during_robots_txt_keeps_the_origins_urls_queued(tmp_path: Path, site: Site,
                                                                 local_app_for: Any) -> None:
    db = tmp_path / "xyro.db"
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + p for p in PAGES])}")
    run_crawl(app, max_seconds=30, stop=site.stop)
    conn = sqlite3.connect(db)
    queued = conn.execute("SELECT count(*) FROM frontier").fetchone()[0]
    errors = conn.execute("SELECT count(*) FROM errors").fetchone()[0]
    conn.close()
    assert (queued, errors) == (len(PAGES), 0)

    site.slow_robots, site.paths = False, []
    summary = run_crawl(app, max_seconds=30)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert sorted(p for p in site.paths if p != "/robots.txt") == sorted(PAGES)
