"""A host whose gateway answers 502 backs off as for a timeout (DESIGN.md §7: consecutive
server failures, exponential back-off), while a 500 (one broken page) backs nothing off.
Real HTTP server on 127.0.0.1, real crawl; the scheduler's back-off base is shortened so the
doubling shows in a second."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from xyro.service.crawl_run import run_crawl

PAGES = 5
BASE_S = 0.2


@pytest.fixture
def failing_site() -> Iterator[Callable[[int], tuple[str, list[float]]]]:
    """``failing_site(status)``: ``/`` links to ``/p0..p4``, which all answer ``status``;
    returns the base URL and the times the pages were requested."""
    servers: list[ThreadingHTTPServer] = []

    def make(status: int) -> tuple[str, list[float]]:
        times: list[float] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                if self.path == "/robots.txt":
                    self.send_error(404)
                    return
                root = self.path == "/"
                if not root:
                    times.append(time.monotonic())
                body = "".join(f'<a href="/p{i}">p</a>' for i in range(PAGES)).encode()
                self.send_response(200 if root else status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", times
    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def _gaps(app: Any, times: list[float]) -> list[float]:
    def shorter_backoff(parts: Any) -> None:
        parts.crawler.frontier.hosts.backoff_base_s = BASE_S
    summary = run_crawl(app, max_seconds=30, customize=shorter_backoff)
    assert summary.stop_reason == "frontier exhausted"
    assert len(times) == PAGES
    return [b - a for a, b in zip(times, times[1:])]


def test_502s_back_the_host_off_and_500s_do_not(tmp_path: Path, local_app_for: Any,
                                                failing_site: Any) -> None:
    base, times = failing_site(502)
    app = local_app_for(tmp_path / "a", f"seeds={json.dumps([base + '/'])}",
                        "crawler.workers=1")
    gaps = _gaps(app, times)
    # After e failures in a row, no start before BASE_S·2^(e−1): 0.2, 0.4, 0.8, 1.6 s.
    assert all(g >= BASE_S * 2 ** k * 0.9 for k, g in enumerate(gaps)), gaps
    base, times = failing_site(500)
    app = local_app_for(tmp_path / "b", f"seeds={json.dumps([base + '/'])}",
                        "crawler.workers=1")
    assert sum(_gaps(app, times)) < BASE_S, "a 500 backed the host off"
