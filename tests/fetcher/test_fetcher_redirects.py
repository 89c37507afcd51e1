"""Redirects are followed by Xyro itself, each hop checked, 3xx bodies never read."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from xyro.records import ErrorKind


def _to(serve: Any, location: str, status: int = 302) -> Any:
    return lambda h: serve.send(h, status, b"", {"Location": location})


def _chain(serve: Any, hops: int) -> dict[str, Any]:
    routes = {f"/r{i}": _to(serve, f"/r{i + 1}") for i in range(hops)}
    routes[f"/r{hops}"] = lambda h: serve.send(h, 200, b"<html>end</html>")
    return routes


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_each_redirect_status_is_followed(status: int, serve: Any, make_fetcher: Any) -> None:
    server = serve({"/a": _to(serve, "/b", status),
                    "/b": lambda h: serve.send(h, 200, b"<html>b</html>")})
    result = make_fetcher().fetch(server.url("/a"))
    assert result.error_kind is None, result.error_detail
    assert result.final_url == server.url("/b")
    assert result.redirects == (server.url("/b"),)
    assert result.body == b"<html>b</html>"


def test_chain_of_five_is_followed(serve: Any, make_fetcher: Any) -> None:
    server = serve(_chain(serve, 5))
    result = make_fetcher().fetch(server.url("/r0"))
    assert result.error_kind is None, result.error_detail
    assert len(result.redirects) == 5
    assert result.final_url == server.url("/r5")


def test_chain_of_six_is_a_redirect_error(serve: Any, make_fetcher: Any) -> None:
    server = serve(_chain(serve, 6))
    result = make_fetcher().fetch(server.url("/r0"))
    assert result.error_kind == ErrorKind.REDIRECT
    assert "more than 5 redirects" in (result.error_detail or "")
    assert [s.path for s in server.log] == [f"/r{i}" for i in range(6)]


def test_redirect_loop_is_detected(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/a": _to(serve, "/b"), "/b": _to(serve, "/a")})
    result = make_fetcher().fetch(server.url("/a"))
    assert result.error_kind == ErrorKind.REDIRECT
    assert "redirect loop" in (result.error_detail or "")
    assert len(server.log) == 2


def test_redirect_without_location_is_a_redirect_error(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/a": lambda h: serve.send(h, 302, b"")})
    result = make_fetcher().fetch(server.url("/a"))
    assert result.error_kind == ErrorKind.REDIRECT
    assert "has no Location" in (result.error_detail or "")


def _huge_redirect(server_notes: dict[str, object]) -> Any:
    def route(h: BaseHTTPRequestHandler) -> None:
        size = 50 * 1024 * 1024
        h.send_response(302)
        h.send_header("Location", "/b")
        h.send_header("Content-Length", str(size))
        h.end_headers()
        sent = 0
        block = b"r" * 65536
        try:
            while sent < size:
                h.wfile.write(block)
                sent += len(block)
        finally:
            server_notes["sent"] = sent
            h.close_connection = True
    return route


def test_a_3xx_with_a_huge_body_is_not_read(serve: Any, make_fetcher: Any) -> None:
    notes: dict[str, object] = {}
    server = serve({"/a": _huge_redirect(notes),
                    "/b": lambda h: serve.send(h, 200, b"<html>b</html>")})
    t0 = time.monotonic()
    result = make_fetcher().fetch(server.url("/a"))
    elapsed = time.monotonic() - t0
    assert result.error_kind is None, result.error_detail
    assert result.body == b"<html>b</html>"
    assert result.bytes_on_wire == len(b"<html>b</html>")
    assert elapsed < 5.0   # no hang; what proves the body unread is the server's count below
    for _ in range(1000):  # the server thread notices the hang-up a moment later
        if "sent" in notes:
            break
        threading.Event().wait(0.01)
    assert int(notes["sent"]) < 10 * 1024 * 1024  # type: ignore[call-overload]


@pytest.mark.parametrize("kind", [ErrorKind.ROBOTS, ErrorKind.SCOPE])
def test_redirect_check_refuses_a_hop(kind: ErrorKind, serve: Any, make_fetcher: Any) -> None:
    server = serve({"/a": _to(serve, "/private/x"),
                    "/private/x": lambda h: serve.send(h, 200, b"secret")})
    checked: list[str] = []

    def check(url: str) -> ErrorKind | None:
        checked.append(url)
        return kind if "/private/" in url else None

    result = make_fetcher(redirect_check=check).fetch(server.url("/a"))
    assert result.error_kind == kind
    assert f"to {server.url('/private/x')} refused: {kind}" in (result.error_detail or "")
    assert checked == [server.url("/private/x")]
    assert [s.path for s in server.log] == ["/a"]


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x",
                                    "gopher://127.0.0.1/"])
def test_redirect_to_a_non_http_scheme_is_refused(target: str, serve: Any,
                                                  make_fetcher: Any) -> None:
    server = serve({"/a": _to(serve, target)})
    result = make_fetcher().fetch(server.url("/a"))
    assert result.error_kind == ErrorKind.REDIRECT
    assert "is not http/https" in (result.error_detail or "")


def test_each_hop_is_resolved_and_checked_again(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/a": _to(serve, "http://no-such-host.invalid/x")})
    result = make_fetcher(hosts={"localhost": ["127.0.0.1"]}).fetch(server.url("/a"))
    assert result.error_kind == ErrorKind.DNS
    assert "no-such-host.invalid" in (result.error_detail or "")
    assert result.redirects == ("http://no-such-host.invalid/x",)


def test_redirect_to_a_skipped_suffix_is_not_fetched(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/a": _to(serve, "/photo.JPG"),
                    "/photo.JPG": lambda h: serve.send(h, 200, b"jpeg")})
    result = make_fetcher().fetch(server.url("/a"))
    assert result.error_kind == ErrorKind.CONTENT_TYPE
    assert [s.path for s in server.log] == ["/a"]


def test_relative_and_absolute_locations_resolve_against_the_current_url(
        serve: Any, make_fetcher: Any) -> None:
    server = serve({"/dir/a": _to(serve, "b?x=1#frag"),
                    "/dir/b": lambda h: serve.send(h, 200, b"ok")})
    result = make_fetcher().fetch(server.url("/dir/a"))
    assert result.error_kind is None, result.error_detail
    assert result.final_url == server.url("/dir/b?x=1")


def _raw(head: bytes) -> Any:
    """A response written byte for byte: header values http.client will decode as Latin-1."""
    def route(h: BaseHTTPRequestHandler) -> None:
        # Connection: close, or the client may send the next hop on this closed connection
        h.wfile.write(head + b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        h.close_connection = True
    return route


@pytest.mark.parametrize("location", [b"/caf\xc3\xa9", b"/caf\xe9"], ids=["utf8", "latin1"])
def test_a_raw_non_ascii_location_is_followed_to_its_utf8_path(location: bytes, serve: Any,
                                                              make_fetcher: Any) -> None:
    # UTF-8 bytes are re-read as UTF-8 (not as their Latin-1 mojibake); bytes that are no
    # UTF-8 stay the Latin-1 text http.client read, which the request encodes as UTF-8
    server = serve({"/start": _raw(b"HTTP/1.1 301 Moved\r\nLocation: " + location + b"\r\n"),
                    "/caf%C3%A9": lambda h: serve.send(h, 200, b"<html>ok</html>")})
    result = make_fetcher().fetch(server.url("/start"))
    assert result.error_kind is None, result.error_detail
    assert result.final_url == server.url("/caf%C3%A9")
    assert [seen.path for seen in server.log] == ["/start", "/caf%C3%A9"]
