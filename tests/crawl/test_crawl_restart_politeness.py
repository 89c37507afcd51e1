"""A restart keeps each host's delay (DESIGN.md §7): the first request of a new process,
robots.txt included, comes no sooner after the last request of the one before than the
delay allows, so a crash loop under systemd's Restart= cannot hammer a host. Real HTTP
server on 127.0.0.1 (its own request times), real crawls, real SQLite."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from xyro.service.crawl_run import run_crawl

DELAY_S = 1.0


class LoggedSite:
    """Every request (robots.txt too) with its arrival time; /p{i} links to /p{i+1};
    robots.txt is ``robots`` (a 404 when empty)."""

    def __init__(self, robots: str = "") -> None:
        self.log: list[tuple[float, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                site.log.append((time.monotonic(), self.path))
                if self.path == "/robots.txt" and not robots:
                    self.send_error(404)
                    return
                if self.path == "/robots.txt":
                    text = robots.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    self.wfile.write(text)
                    return
                body = f'<html><a href="/p{int(self.path[2:]) + 1}">next</a></html>'.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def site() -> Iterator[LoggedSite]:
    logged = LoggedSite()
    yield logged
    logged.server.shutdown()
    logged.server.server_close()


def test_a_restart_waits_the_delay_since_the_last_request(
        tmp_path: Path, local_app_for: Any, site: LoggedSite) -> None:
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                        f"crawler.politeness.delay_s={DELAY_S}")
    for _ in range(3):   # three processes in a row, as a crash loop starts them
        run_crawl(app, max_pages=1)
    starts = [t for t, _ in site.log]
    assert [path for _, path in site.log] == [
        "/robots.txt", "/p0", "/robots.txt", "/p1", "/robots.txt", "/p2"], site.log
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
    assert min(gaps) >= DELAY_S - 0.05, gaps


def test_a_restart_waits_the_crawl_delay_since_the_last_request(
        tmp_path: Path, local_app_for: Any) -> None:
    # The host's Crawl-delay (1.5 s, above delay_s) is stored with it: the new process's
    # robots.txt request waits for it too, before robots.txt says it again.
    site = LoggedSite("User-agent: *\nCrawl-delay: 1.5\n")
    try:
        app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                            "crawler.politeness.delay_s=0.1")
        for _ in range(2):
            run_crawl(app, max_pages=1)
    finally:
        site.server.shutdown()
        site.server.server_close()
    assert [path for _, path in site.log] == ["/robots.txt", "/p0", "/robots.txt", "/p1"]
    starts = [t for t, _ in site.log]
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
    assert min(gaps) >= 1.5 - 0.05, gaps
