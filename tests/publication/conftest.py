"""Fixtures of the publication tests: a real HTTP server on 127.0.0.1 that records every
request, to prove that hostile sitemaps and feeds make the parser fetch nothing; an open
frontier on a manual clock for the publication channel."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from xyro.clock import ManualClock
from xyro.crawl.admission import Admission
from xyro.crawl.frontier import Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.net.robots import RobotsCache
from xyro.net.urls import Scope, TrapGuard

#: The clock of :func:`frontier` (the tests that use it date their listings from it).
T0 = 1_700_000_000.0


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = b'<!ENTITY leak "LEAKED-FROM-SERVER">'
        self.send_response(200)
        self.send_header("Content-Type", "application/xml-dtd")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128   # the default 5 drops SYNs under concurrent fetches (1 s retry)


@pytest.fixture
def trap_server() -> Iterator[tuple[str, list[str]]]:
    """(base URL, list of request paths received): an entity server nobody should call."""
    server = _Server(("127.0.0.1", 0), _Recorder)
    server.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.hits  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def frontier() -> Frontier:
    """A frontier of an open scope on a manual clock at :data:`T0`, no politeness delay."""
    clock = ManualClock(T0)
    return Frontier(HostScheduler(0.0, clock),
                    RobotsCache("XyroBot", clock, ttl_s=3600, unreachable_retry_s=600,
                                max_crawl_delay_s=30), clock,
                    admission=Admission(Scope(), TrapGuard(clock), frozenset()))
