"""Connecting under the total deadline and the stop event (DESIGN.md §7; the docstring of
xyro.net.connections). A name may resolve to many addresses that never complete the TCP
handshake; each may take the connect timeout, but the attempts end at the deadline or when
stop is set, and none waits past the deadline. Real sockets on 127.0.0.x: a listener whose
accept queue is full drops SYNs, as a host behind a dropping firewall does."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from xyro.net.fetcher import Fetcher
from xyro.records import ErrorKind

SilentAddresses = Callable[[int, int], list[str]]


@pytest.fixture
def silent_addresses() -> Iterator[SilentAddresses]:
    """``silent_addresses(port, count)``: addresses 127.0.0.2, 127.0.0.3, ... listening on
    ``port`` with a full accept queue, so that a connect to them hangs until its timeout."""
    sockets: list[socket.socket] = []

    def make(port: int, count: int) -> list[str]:
        addresses = [f"127.0.0.{i}" for i in range(2, 2 + count)]
        for address in addresses:
            listener = socket.socket()
            listener.bind((address, port))
            listener.listen(0)   # a queue of one, never accepted from
            filler = socket.create_connection((address, port), timeout=1.0)
            sockets.extend([listener, filler])
        probe = socket.socket()
        probe.settimeout(0.1)
        with pytest.raises(TimeoutError):   # the SYN is dropped: no answer at all
            probe.connect((addresses[0], port))
        probe.close()
        return addresses

    yield make
    for sock in sockets:
        sock.close()


def _site(serve: Any) -> Any:
    return serve({"/": lambda h: serve.send(h, 200, b"<html>ok</html>")})


def test_the_deadline_ends_the_connect_attempts(
        serve: Any, silent_addresses: SilentAddresses,
        make_fetcher: Callable[..., Fetcher]) -> None:
    server = _site(serve)
    silent = silent_addresses(server.port, 8)
    fetcher = make_fetcher(hosts={"many.example": [*silent, "127.0.0.1"]},
                           connect_timeout_s=0.25, deadline_s=0.6)
    t0 = time.monotonic()
    result = fetcher.fetch(f"http://many.example:{server.port}/")
    elapsed = time.monotonic() - t0
    assert result.error_kind == ErrorKind.TIMEOUT, result.error_detail
    assert "total deadline of 0.6 s passed" in (result.error_detail or "")
    assert elapsed < 1.2   # 8 addresses x 0.25 s would be 2 s


def test_the_stop_event_ends_the_connect_attempts(
        serve: Any, silent_addresses: SilentAddresses,
        make_fetcher: Callable[..., Fetcher]) -> None:
    server = _site(serve)
    silent = silent_addresses(server.port, 8)
    fetcher = make_fetcher(hosts={"many.example": [*silent, "127.0.0.1"]},
                           connect_timeout_s=0.25, deadline_s=30.0)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    result = fetcher.fetch(f"http://many.example:{server.port}/", stop=stop)
    elapsed = time.monotonic() - t0
    assert result.error_kind == ErrorKind.TIMEOUT, result.error_detail
    assert "stop requested" in (result.error_detail or "")
    assert elapsed < 1.2   # stop is seen before the next address: at 0.5 s


def test_a_connect_never_waits_past_the_deadline(
        serve: Any, silent_addresses: SilentAddresses,
        make_fetcher: Callable[..., Fetcher]) -> None:
    server = _site(serve)
    silent = silent_addresses(server.port, 1)
    fetcher = make_fetcher(hosts={"silent.example": silent},
                           connect_timeout_s=5.0, read_timeout_s=5.0, deadline_s=0.4)
    t0 = time.monotonic()
    result = fetcher.fetch(f"http://silent.example:{server.port}/")
    assert result.error_kind == ErrorKind.TIMEOUT, result.error_detail
    assert "total deadline of 0.4 s passed" in (result.error_detail or "")
    assert time.monotonic() - t0 < 1.2


def test_an_address_that_answers_after_silent_ones_is_still_reached(
        serve: Any, silent_addresses: SilentAddresses,
        make_fetcher: Callable[..., Fetcher]) -> None:
    server = _site(serve)
    silent = silent_addresses(server.port, 2)
    fetcher = make_fetcher(hosts={"many.example": [*silent, "127.0.0.1"]},
                           connect_timeout_s=0.2, deadline_s=3.0)
    result = fetcher.fetch(f"http://many.example:{server.port}/")
    assert result.error_kind is None, result.error_detail
    assert result.body == b"<html>ok</html>"
