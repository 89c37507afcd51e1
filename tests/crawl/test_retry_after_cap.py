"""A Retry-After of years is capped for the URL as for its host
(``crawler.politeness.max_retry_after_s``, DESIGN.md §7): the URL comes back after the cap,
and a crawl with nothing else to do ends instead of waiting for it for good. Real HTTP
server on 127.0.0.1, real crawl, real SQLite file."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from xyro.crawl.retry_policy import RetryPolicy
from xyro.service.crawl_run import run_crawl


@pytest.fixture
def busy_once() -> Iterator[tuple[str, list[str]]]:
    """``/`` links to ``/p0``, whose first answer is a 503 with Retry-After 10^9 s."""
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            requests.append(self.path)
            if self.path == "/robots.txt":
                self.send_error(404)
                return
            busy = self.path == "/p0" and requests.count("/p0") == 1
            body = b'<a href="/p0">p0</a>' if self.path == "/" else b"<p>ok</p>"
            self.send_response(503 if busy else 200)
            if busy:
                self.send_header("Retry-After", "999999999")
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requests
    server.shutdown()
    server.server_close()


def test_a_retry_after_of_years_is_capped_for_the_url(tmp_path: Path, local_app_for: Any,
                                                      busy_once: tuple[str, list[str]]) -> None:
    base, requests = busy_once
    app = local_app_for(tmp_path, f"seeds={json.dumps([base + '/'])}",
                        "crawler.politeness.max_retry_after_s=1")
    started = time.monotonic()
    summary = run_crawl(app, max_seconds=30)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert requests.count("/p0") == 2 and time.monotonic() - started < 20


def test_the_policy_caps_every_pause() -> None:
    policy = RetryPolicy(max_retries=5, base_pause_s=60.0, max_pause_s=100.0)
    assert policy.pause("u", 503, 1e9) == 100.0
    assert policy.pause("u", 503, 5.0) == 5.0
    assert policy.pause("v", 429, None) == 60.0 and policy.pause("v", 429, None) == 100.0
