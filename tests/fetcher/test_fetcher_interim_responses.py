"""Interim 1xx responses before the final one (RFC 9110 §15.2): ``103 Early Hints`` (RFC
8297; nginx, h2o and Node's writeEarlyHints send it over HTTP/1.1) and its kin are read past,
and the final response is the answer, for pages and for robots.txt alike (the connections
docstring of xyro.net.connections). Real servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from xyro.clock import ManualClock
from xyro.net.fetcher import Fetcher
from xyro.net.robots import RobotsCache
from xyro.records import ErrorKind

EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
DOC = b"<?xml version='1.0'?><doc>the document</doc>"


def _after(serve: Any, interims: list[bytes], body: bytes,
           content_type: str) -> Callable[[BaseHTTPRequestHandler], None]:
    """A route that sends ``interims`` as they are, then a 200 with ``body``."""
    def route(h: BaseHTTPRequestHandler) -> None:
        for interim in interims:
            h.wfile.write(interim)
        h.wfile.flush()
        serve.send(h, 200, body, {"Content-Type": content_type})
    return route


def test_103_early_hints_is_read_past_and_the_200_is_the_answer(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    server = serve({"/doc.xml": _after(serve, [EARLY_HINTS], DOC, "application/xml"),
                    "/other.xml": lambda h: serve.send(h, 200, b"<a/>",
                                                       {"Content-Type": "application/xml"})})
    fetcher = make_fetcher()
    result = fetcher.fetch(server.url("/doc.xml"))
    assert result.error_kind is None, result.error_detail
    assert (result.status, result.body) == (200, DOC)
    assert "link" not in result.headers   # the hints' headers are not the response's
    # The connection stays in step: the next request on it gets its own answer.
    again = fetcher.fetch(server.url("/other.xml"))
    assert (again.status, again.body) == (200, b"<a/>")
    assert len(server.connections()) == 1


def test_several_interim_responses_are_all_read_past(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    interims = [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 102 Processing\r\n\r\n",
                EARLY_HINTS, b"HTTP/1.1 103 Early Hints\r\nLink: </a.js>; rel=preload\r\n"
                             b"Link: </b.js>; rel=preload\r\n\r\n",
                b"HTTP/1.1 199 Whatever\r\n\r\n"]
    server = serve({"/doc.xml": _after(serve, interims, DOC, "application/xml")})
    result = make_fetcher().fetch(server.url("/doc.xml"))
    assert result.error_kind is None, result.error_detail
    assert (result.status, result.body) == (200, DOC)


def test_an_interim_response_with_too_many_headers_is_refused(
        serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    # Read past under http.client's own header limit (100), not without any.
    flood = b"HTTP/1.1 103 Early Hints\r\n" + b"Link: </x.css>; rel=preload\r\n" * 200 + b"\r\n"
    server = serve({"/doc.xml": _after(serve, [flood], DOC, "application/xml")})
    result = make_fetcher().fetch(server.url("/doc.xml"))
    assert result.error_kind == ErrorKind.CONNECT
    assert result.status is None


@pytest.mark.parametrize("interims", [[EARLY_HINTS], []], ids=["103-first", "plain"])
def test_a_robots_txt_after_103_is_obeyed_not_taken_for_a_failure(
        interims: list[bytes], serve: Any, make_fetcher: Callable[..., Fetcher]) -> None:
    robots = b"User-agent: *\nDisallow: /private\n"
    server = serve({"/robots.txt": _after(serve, interims, robots, "text/plain")})
    limits = make_fetcher().limits.for_robots(5)
    fetcher = make_fetcher(max_redirects=limits.max_redirects,
                           accept_content_types=limits.accept_content_types,
                           keep_prefix=True, max_decoded_bytes=limits.max_decoded_bytes,
                           max_body_bytes=limits.max_body_bytes)
    result = fetcher.fetch(server.url("/robots.txt"))
    assert (result.status, result.body) == (200, robots), result.error_detail
    cache = RobotsCache("XyroTest", ManualClock())
    origin = server.url("")
    state = cache.store(origin, result.status, result.body, 0.0)
    assert state.kind == "allowed"   # not disallow-all, as a 1xx "server error" would be
    assert cache.verdict(server.url("/public.html"), now=1.0) == "allowed"
    assert cache.verdict(server.url("/private/x.html"), now=1.0) == "disallowed"
