"""A body cut short: the server closes the connection before its Content-Length (or the
last chunk) was sent. That is its own error kind, ``truncated``, with how much came of how
much was announced, not a failure to connect. Real servers on 127.0.0.1 writing raw bytes."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from xyro.net.fetcher import Fetcher
from xyro.records import ErrorKind


def _cut_after(sent: int, announced: int) -> Callable[[BaseHTTPRequestHandler], None]:
    """Announce ``announced`` bytes, send ``sent``, close (Connection: close)."""
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(announced))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b"x" * sent)
        handler.close_connection = True
    return route


def _chunked_cut(handler: BaseHTTPRequestHandler) -> None:
    """A chunk announced as 0x190 (400) bytes, 100 sent, then the connection closed."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(b"190\r\n" + b"x" * 100)
    handler.close_connection = True


def test_a_body_cut_before_its_content_length_is_truncated(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/cut": _cut_after(400, 1000)})
    result = make_fetcher().fetch(server.url("/cut"))
    assert result.error_kind == ErrorKind.TRUNCATED, result.error_detail
    assert result.error_kind.value == "truncated"
    assert "the server closed the connection after 400 of 1000 bytes" in (
        result.error_detail or ""), result.error_detail
    assert result.body == b"" and result.status == 200 and result.bytes_on_wire == 400


def test_a_chunked_body_cut_before_its_last_chunk_is_truncated(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/chunks": _chunked_cut})
    result = make_fetcher().fetch(server.url("/chunks"))
    assert result.error_kind == ErrorKind.TRUNCATED, result.error_detail
    assert "the server closed the connection after" in (result.error_detail or "")
    assert "chunked body, before its last chunk" in (result.error_detail or "")


def test_an_empty_body_cut_is_truncated_too(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/none": _cut_after(0, 50)})
    result = make_fetcher().fetch(server.url("/none"))
    assert result.error_kind == ErrorKind.TRUNCATED, result.error_detail
    assert "after 0 of 50 bytes" in (result.error_detail or "")
