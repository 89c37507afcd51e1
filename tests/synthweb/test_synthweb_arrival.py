"""Arrival stamps: each request is logged with the instant its bytes reached the server.

Politeness (DESIGN.md §7) is judged on these, so they must not drift with how late a
handler thread runs. The bounds below are causal, not tuned: the kernel stamps a loopback
segment inside the sender's ``sendall``, so the arrival lies between the client's clock
readings around that call, whatever the load.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from xyro.clock import AcceleratedClock, Clock, WallClock
from xyro.synthweb import RequestRecord, SyntheticWeb, WebSpec

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="kernel receive stamps (SO_TIMESTAMPNS) are Linux's")

DRIP_INTERVAL_S = 0.05
DRIP_BYTES = 6
SPEC = WebSpec(seed=3, n_hosts=2, n_pages=20, hostile=frozenset({"slow_drip"}),
               drip_interval=DRIP_INTERVAL_S, drip_bytes=DRIP_BYTES)


@pytest.fixture
def wall_web() -> Iterator[SyntheticWeb]:
    with SyntheticWeb(SPEC, WallClock()) as web:
        yield web


def _request(netloc: str, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {netloc}\r\nUser-Agent: arrival-test/1\r\n\r\n".encode()


def _send_and_wait(web: SyntheticWeb, clock: Clock, url: str, paths: list[str],
                   ) -> tuple[float, float, list[RequestRecord]]:
    """Send ``paths`` as one pipelined write on a fresh connection; returns the clock before
    and after the write and the host's records once all of them are logged."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=5) as s:
        before = clock.now()
        s.sendall(b"".join(_request(u.netloc, p) for p in paths))
        after = clock.now()
        deadline = time.monotonic() + 10
        while len(web.log.requests(host=u.hostname)) < len(paths):
            assert time.monotonic() < deadline, "the server did not log every request"
            s.recv(65536)  # drain the replies so the server never blocks on writing
    return before, after, sorted(web.log.requests(host=u.hostname), key=lambda r: r.start)


def _between(record: RequestRecord, before: float, after: float) -> bool:
    assert record.arrival is not None
    return before - record.arrival_error <= record.arrival <= after + record.arrival_error


def test_first_request_of_a_connection_is_stamped_at_arrival(wall_web: SyntheticWeb) -> None:
    before, after, (record,) = _send_and_wait(wall_web, wall_web.clock, wall_web.seeds[0],
                                              ["/robots.txt"])
    assert _between(record, before, after)
    assert record.arrival_error < 1e-3  # measured: a few tenths of a microsecond when quiet
    assert record.arrived == record.arrival <= record.clock + record.arrival_error


def test_a_late_handler_does_not_move_the_arrival(wall_web: SyntheticWeb) -> None:
    (drip,) = [url for url, case in wall_web.hostile_urls().items() if case.name == "slow_drip"]
    before, after, (first, second) = _send_and_wait(
        wall_web, wall_web.clock, drip, [urlsplit(drip).path, "/"])
    assert first.target == urlsplit(drip).path and second.target == "/"
    # Both came in with the one write, but the second was handled only after the first's
    # body had dripped out (each byte waits DRIP_INTERVAL_S at least).
    assert _between(first, before, after) and _between(second, before, after)
    assert second.clock - second.arrival >= (DRIP_BYTES - 1) * DRIP_INTERVAL_S


def test_arrivals_are_on_an_accelerated_clock() -> None:
    clock = AcceleratedClock(1_780_000_000.0, 60.0)
    with SyntheticWeb(SPEC, clock) as web:
        before, after, (record,) = _send_and_wait(web, clock, web.seeds[0], ["/"])
    assert _between(record, before, after)
