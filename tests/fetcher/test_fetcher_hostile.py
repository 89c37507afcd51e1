"""Hostile servers: decompression bombs, oversized bodies, slow drips, silent peers."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import brotli
import psutil
import pytest

from xyro.net.fetcher import Fetcher
from xyro.records import ErrorKind

MB = 1 << 20
BOMB_LIMITS = {"read_timeout_s": 3.0, "deadline_s": 10.0, "max_body_bytes": 4 * MB,
               "max_decoded_bytes": 8 * MB}
CAP = 256 * 1024   # the test wire cap (conftest TEST_LIMITS)


def _raw_deflate_of_zeros(total_mb: int) -> bytes:
    """Raw deflate of ``total_mb`` MiB of zeros, built from one repeated full-flush block.

    A full flush resets the compressor, so every 1 MiB block compresses to the same bytes:
    the bomb costs one compression of 1 MiB instead of 1 GiB.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = compressor.compress(bytes(MB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(bytes(MB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert block == again
    return block * total_mb + compressor.flush()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    raw = _raw_deflate_of_zeros(1024)                       # 1 GiB of zeros
    crc = 0
    zeros = bytes(MB)
    for _ in range(1024):
        crc = zlib.crc32(zeros, crc)
    size = 1024 * MB
    gzip = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + raw
            + crc.to_bytes(4, "little") + (size % 2**32).to_bytes(4, "little"))
    adler = ((size % 65521) << 16) | 1
    wrapped = b"\x78\xda" + raw + adler.to_bytes(4, "big")
    compressor = brotli.Compressor(quality=5)
    br = b"".join([compressor.process(zeros) for _ in range(256)]) + compressor.finish()
    return {"gzip": gzip, "deflate-zlib": wrapped, "deflate-raw": raw, "br": br}


def _encoded(serve: Any, body: bytes, encoding: str) -> Callable[[BaseHTTPRequestHandler], None]:
    return lambda h: serve.send(h, 200, body, {"Content-Encoding": encoding})


@pytest.mark.parametrize("name", ["gzip", "deflate-zlib", "deflate-raw", "br"])
def test_decompression_bomb_stops_at_decoded_cap_with_bounded_memory(
        name: str, bombs: dict[str, bytes], serve: Any,
        make_fetcher: Callable[..., Fetcher]) -> None:
    body = bombs[name]
    assert len(body) < 2 * MB
    server = serve({"/bomb": _encoded(serve, body, name.split("-")[0])})
    fetcher = make_fetcher(**BOMB_LIMITS)
    process = psutil.Process()
    before = process.memory_info().rss
    result = fetcher.fetch(server.url("/bomb"))
    growth = process.memory_info().rss - before
    assert result.error_kind == ErrorKind.TOO_LARGE, result.error_detail
    assert f"cap {8 * MB}" in (result.error_detail or "")
    assert result.body == b""
    assert growth < 64 * MB, f"RSS grew by {growth / MB:.0f} MiB decoding a {name} bomb"


def test_stacked_encodings_are_decoded_in_reverse_order(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    page = b"<html><body>" + b"stacked " * 1000 + b"</body></html>"
    gz = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    body = brotli.compress(gz.compress(page) + gz.flush())
    server = serve({"/s": _encoded(serve, body, "gzip, br")})
    result = make_fetcher().fetch(server.url("/s"))
    assert result.error_kind is None, result.error_detail
    assert result.body == page
    assert result.bytes_on_wire == len(body)


def test_gzip_of_a_gzip_bomb_is_stopped_at_the_intermediate_stage(
        bombs: dict[str, bytes], serve: Any,
        make_fetcher: Callable[..., Fetcher]) -> None:
    body = zlib.compress(bombs["gzip"], 9)  # zlib-wrapped deflate of a gzip bomb
    server = serve({"/s": _encoded(serve, body, "gzip, deflate")})
    result = make_fetcher(**BOMB_LIMITS).fetch(server.url("/s"))
    assert result.error_kind == ErrorKind.TOO_LARGE, result.error_detail


@pytest.mark.parametrize("encoding, body, words", [
    ("zstd", b"whatever", "unsupported Content-Encoding 'zstd'"),
    ("gzip", b"\x1f\x8b\x08\x00 this is not gzip at all", "corrupt gzip"),
    ("br", b"\xff\xff\xff not brotli", "corrupt br"),
    ("gzip, gzip, gzip, gzip", b"", "stacked"),
    # cut short under a Content-Length that counts only what was sent: not the whole page
    ("gzip", zlib.compress(b"<a href='/x'>x</a>" * 5000, wbits=31)[:150], "truncated gzip"),
])
def test_bad_content_encoding_is_an_encoding_error(
        encoding: str, body: bytes, words: str, serve: Any,
        make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/e": _encoded(serve, body, encoding)})
    result = make_fetcher().fetch(server.url("/e"))
    assert result.error_kind == ErrorKind.ENCODING
    assert words in (result.error_detail or "")


def test_body_over_wire_cap_with_content_length_is_refused_before_reading(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    big = b"x" * (CAP + 1)
    server = serve({"/big": lambda h: serve.send(h, 200, big)})
    result = make_fetcher().fetch(server.url("/big"))
    assert result.error_kind == ErrorKind.TOO_LARGE
    assert "Content-Length 262145 exceeds the cap 262144" in (result.error_detail or "")
    assert result.bytes_on_wire == 0


def test_body_over_wire_cap_without_length_stops_one_byte_past_the_cap(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/big": lambda h: serve.close_delimited(h, b"y" * (3 * CAP))})
    result = make_fetcher().fetch(server.url("/big"))
    assert result.error_kind == ErrorKind.TOO_LARGE
    assert result.error_detail is not None
    assert result.error_detail.endswith("read 262145 bytes, cap 262144")


def test_body_at_exactly_the_cap_is_accepted(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    body = b"z" * CAP
    server = serve({"/edge": lambda h: serve.close_delimited(h, body)})
    result = make_fetcher().fetch(server.url("/edge"))
    assert result.error_kind is None, result.error_detail
    assert result.body == body


def test_slow_drip_ends_as_timeout_at_the_deadline(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/drip": lambda h: serve.drip(h, b"a" * 100, 0.2)})
    limits = dict(connect_timeout_s=1.0, read_timeout_s=5.0, deadline_s=1.0)
    t0 = time.monotonic()
    result = make_fetcher(**limits).fetch(server.url("/drip"))
    elapsed = time.monotonic() - t0
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "total deadline of 1 s passed" in (result.error_detail or "")
    assert 0.9 < elapsed < 3.0


def _drip_headers(h: BaseHTTPRequestHandler) -> None:
    h.wfile.write(b"HTTP/1.1 200 OK\r\n")
    for _ in range(50):
        h.wfile.write(b"X-Slow: 1\r\n")
        h.wfile.flush()
        threading.Event().wait(0.2)


def test_slow_drip_of_headers_ends_as_timeout_at_the_deadline(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/h": _drip_headers})
    limits = dict(connect_timeout_s=1.0, read_timeout_s=5.0, deadline_s=1.0)
    t0 = time.monotonic()
    result = make_fetcher(**limits).fetch(server.url("/h"))
    assert result.error_kind == ErrorKind.TIMEOUT
    assert time.monotonic() - t0 < 3.0


def test_server_that_never_answers_times_out_on_read_timeout(
        hold_server: int, make_fetcher: Callable[..., Fetcher]) -> None:
    limits = dict(connect_timeout_s=1.0, read_timeout_s=0.5, deadline_s=5.0)
    t0 = time.monotonic()
    result = make_fetcher(**limits).fetch(f"http://127.0.0.1:{hold_server}/")
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "no response within 0.5 s" in (result.error_detail or "")
    assert time.monotonic() - t0 < 2.0


def test_server_that_never_answers_is_cut_by_the_deadline(
        hold_server: int, make_fetcher: Callable[..., Fetcher]) -> None:
    limits = dict(connect_timeout_s=1.0, read_timeout_s=30.0, deadline_s=0.5)
    t0 = time.monotonic()
    result = make_fetcher(**limits).fetch(f"http://127.0.0.1:{hold_server}/")
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "deadline" in (result.error_detail or "")
    assert time.monotonic() - t0 < 2.0


def test_refused_port_is_a_connect_error(
        free_port: int, make_fetcher: Callable[..., Fetcher]) -> None:
    result = make_fetcher().fetch(f"http://127.0.0.1:{free_port}/")
    assert result.error_kind == ErrorKind.CONNECT
    assert f"127.0.0.1 (127.0.0.1) port {free_port}" in (result.error_detail or "")


def test_stop_event_aborts_a_slow_fetch_promptly(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/drip": lambda h: serve.drip(h, b"a" * 100, 0.1)})
    limits = dict(read_timeout_s=30.0, deadline_s=30.0)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    result = make_fetcher(**limits).fetch(server.url("/drip"), stop=stop)
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "stop requested" in (result.error_detail or "")
    assert time.monotonic() - t0 < 1.5
    again = make_fetcher(**limits).fetch(server.url("/drip"), stop=stop)
    assert again.error_kind == ErrorKind.TIMEOUT and again.bytes_on_wire == 0


def test_a_timed_out_fetch_does_not_break_the_next_one(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/drip": lambda h: serve.drip(h, b"a" * 100, 0.2),
                    "/ok": lambda h: serve.send(h, 200, b"<html>fine</html>")})
    limits = dict(read_timeout_s=5.0, deadline_s=0.5)
    fetcher = make_fetcher(**limits)
    assert fetcher.fetch(server.url("/ok")).error_kind is None
    t0 = time.monotonic()   # the drip reuses the kept-alive socket: the watchdog must cut it
    assert fetcher.fetch(server.url("/drip")).error_kind == ErrorKind.TIMEOUT
    assert time.monotonic() - t0 < 2.0
    assert len(server.connections()) == 1
    results = [fetcher.fetch(server.url("/ok")) for _ in range(3)]
    assert [r.error_kind for r in results] == [None, None, None]
    assert all(r.body == b"<html>fine</html>" for r in results)


def _raw_response(head: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def route(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(head)
        h.close_connection = True
    return route


@pytest.mark.parametrize("head, status", [
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \xb2\r\n"
     b"Connection: close\r\n\r\n<html></html>", 200),
    (b"HTTP/1.1 302 Found\r\nLocation: /gone\r\nContent-Length: \xb2\r\n"
     b"Connection: close\r\n\r\n", 404),
    (b"HTTP/1.1 503 Busy\r\nRetry-After: \xb2\r\nContent-Length: 0\r\n"
     b"Connection: close\r\n\r\n", 503)], ids=["length-200", "length-302", "retry-after-503"])
def test_non_ascii_digits_in_length_or_retry_after_are_ignored(
        head: bytes, status: int, serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    # 0xB2 is '²' in Latin-1: str.isdigit() says yes, int() says no
    server = serve({"/x": _raw_response(head)})
    result = make_fetcher().fetch(server.url("/x"))
    assert result.status == status
    assert result.retry_after_s is None
    if status == 200:
        assert result.error_kind is None and result.body == b"<html></html>"
