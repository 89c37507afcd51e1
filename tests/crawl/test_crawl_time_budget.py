"""A time budget (``--seconds``) bounds the crawl's wall time: a page that drips its body
slowly is cut a few seconds after the budget, not at its own 30 s fetch deadline, and stays
queued for the next crawl (nothing recorded for it). Real server on 127.0.0.1, wall clock."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from xyro.crawl.crawler import BUDGET_GRACE_S
from xyro.service.crawl_run import run_crawl

PAGE = b"<html><body><a href='/drip.html'>slow</a></body></html>"


class _Drip(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        if self.path == "/drip.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "4000")
            self.end_headers()
            try:
                for _ in range(4000):   # a byte every 0.05 s: 200 s for the whole body
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        status, body = (200, PAGE) if self.path == "/" else (404, b"")
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def drip_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_slow_drip_page_does_not_stretch_the_time_budget(tmp_path: Path, drip_site: str,
                                                           local_app_for) -> None:
    app = local_app_for(tmp_path, f"seeds={json.dumps([drip_site + '/'])}",
                        "crawler.limits.deadline_s=30", "crawler.limits.read_timeout_s=10")
    started = time.monotonic()
    summary = run_crawl(app, max_seconds=1.0)
    took = time.monotonic() - started
    assert summary.stop_reason == "time budget reached"
    # Before: the 30 s deadline. The margin is for a loaded machine's start and close.
    assert took < 1.0 + BUDGET_GRACE_S + 14.0, f"a 1 s budget took {took:.1f} s"
    with app.open_store() as store:
        queued = {row.url for row in store.frontier_rows()}
        conn = store.read_connection()
        try:
            drip = conn.execute("SELECT type, accesses FROM urls WHERE url = ?",
                                (drip_site + "/drip.html",)).fetchone()
        finally:
            conn.close()
    assert drip_site + "/drip.html" in queued       # cut, so fetched again next time
    assert drip == ("unread", 0)
