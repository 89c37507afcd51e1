"""The robots.txt fetcher (``FetchLimits.for_robots``): redirect hops to any host (a gate may
refuse one), and the first 500 KiB of a longer body kept as the body (RFC 9309 §2.3.1.2,
§2.5; the module docstring of xyro.net.fetcher). Real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import io
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from xyro.clock import ManualClock
from xyro.net.body import Decoder, read_capped
from xyro.net.dns import Resolver
from xyro.net.fetcher import Fetcher, FetchLimits
from xyro.net.robots import MAX_ROBOTS_BYTES, ROBOTS_FETCH_BYTES
from xyro.records import ErrorKind

BIG = b"User-agent: *\nDisallow: /private\n" + b"# padding, padding, padding\n" * 450_000


@pytest.fixture
def robots_fetcher() -> Iterator[Fetcher]:
    """The robots.txt fetcher as build_crawler makes it, with a 1 MB page cap on the wire."""
    clock = ManualClock()
    resolver = Resolver(clock, timeout_s=2.0, getaddrinfo=socket.getaddrinfo)
    limits = FetchLimits(connect_timeout_s=1.0, read_timeout_s=2.0, deadline_s=3.0,
                         max_body_bytes=1_000_000, allow_private_addresses=True)
    fetcher = Fetcher(limits.for_robots(5), "XyroTest/0.1 (+http://127.0.0.1/c)", resolver,
                      clock)
    yield fetcher
    fetcher.close()
    resolver.close()


@pytest.mark.parametrize("encoding", ["identity", "gzip", "gzip, gzip"])
def test_a_robots_txt_past_every_cap_is_its_first_500_kib(encoding: str, serve: Any,
                                                           robots_fetcher: Fetcher) -> None:
    body = BIG
    for _ in range(encoding.count("gzip")):
        body = gzip.compress(body, 1)
    server = serve({"/robots.txt": lambda h: serve.send(
        h, 200, body, {"Content-Type": "text/plain", "Content-Encoding": encoding})})
    result = robots_fetcher.fetch(server.url("/robots.txt"))
    assert result.error_kind is None, result.error_detail
    assert result.status == 200 and result.body == BIG[:ROBOTS_FETCH_BYTES]
    assert result.bytes_on_wire < 2 * MAX_ROBOTS_BYTES   # 12 MB announced, not read


def test_a_prefix_ends_at_the_wire_cap_too() -> None:
    decoder = Decoder([], 10**6, keep_prefix=True)
    assert read_capped(io.BytesIO(BIG).read, decoder, 100, chunk_bytes=64) == BIG[:100]
    assert decoder.cut


def test_an_inner_stage_past_the_cap_keeps_its_prefix() -> None:
    decoder = Decoder(["gzip", "gzip"], 1000, keep_prefix=True)
    body = gzip.compress(gzip.compress(BIG))
    assert read_capped(io.BytesIO(body).read, decoder, 10**6) == BIG[:1000]


def test_a_hop_on_the_same_host_is_followed(serve: Any, robots_fetcher: Fetcher) -> None:
    server = serve({"/robots.txt": lambda h: serve.send(h, 301, b"", {"Location": "/r.txt"}),
                    "/r.txt": lambda h: serve.send(h, 200, b"Disallow: /x\n")})
    result = robots_fetcher.fetch(server.url("/robots.txt"))
    assert result.error_kind is None, result.error_detail
    assert result.body == b"Disallow: /x\n"


def test_a_hop_to_another_host_is_followed(serve: Any, robots_fetcher: Fetcher) -> None:
    """RFC 9309 §2.3.1.2: "even across authorities" (the engine's gate keeps that host
    polite: tests/politeness/test_politeness_robots_fetch.py)."""
    target = serve({"/robots.txt": lambda h: serve.send(h, 200, b"Disallow: /\n")})
    elsewhere = target.url("/robots.txt", host="localhost")   # same server, another host
    server = serve({"/robots.txt": lambda h: serve.send(h, 301, b"", {"Location": elsewhere})})
    result = robots_fetcher.fetch(server.url("/robots.txt"))
    assert result.error_kind is None, result.error_detail
    assert result.status == 200 and result.body == b"Disallow: /\n"
    assert result.redirects == (elsewhere,)


def test_a_gate_that_refuses_a_hop_ends_the_fetch_as_a_redirect(serve: Any) -> None:
    asked: list[tuple[str, str]] = []

    def gate(first: str, target: str) -> str | None:
        asked.append((first, target))
        return "host busy"

    target = serve({"/robots.txt": lambda h: serve.send(h, 200, b"Disallow: /\n")})
    elsewhere = target.url("/robots.txt", host="localhost")
    server = serve({"/robots.txt": lambda h: serve.send(h, 301, b"", {"Location": elsewhere})})
    clock = ManualClock()
    resolver = Resolver(clock, timeout_s=2.0, getaddrinfo=socket.getaddrinfo)
    limits = FetchLimits(allow_private_addresses=True)
    fetcher = Fetcher(limits.for_robots(5), "XyroTest/0.1 (+http://127.0.0.1/c)", resolver,
                      clock, hop_gate=gate)
    try:
        result = fetcher.fetch(server.url("/robots.txt"))
    finally:
        fetcher.close()
        resolver.close()
    assert asked == [(server.url("/robots.txt"), elsewhere)]
    assert result.error_kind is ErrorKind.REDIRECT and result.status == 301
    assert "not followed: host busy" in (result.error_detail or "") and target.log == []