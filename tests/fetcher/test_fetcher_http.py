"""HTTP behaviour: conditional GET, statuses, Retry-After, keep-alive, filters, threads."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from xyro.clock import ManualClock
from xyro.net.dns import Resolver
from xyro.net.fetcher import Fetcher, FetchLimits, parse_http_date, parse_retry_after, user_agent
from xyro.records import ErrorKind

LAST_MODIFIED = 1_600_000_000.0


def _conditional(serve: Any) -> Any:
    def route(h: BaseHTTPRequestHandler) -> None:
        validators = {"ETag": '"v1"', "Last-Modified": formatdate(LAST_MODIFIED, usegmt=True)}
        if h.headers.get("If-None-Match") == '"v1"':
            serve.send(h, 304, b"", validators)
        elif parse_http_date(h.headers.get("If-Modified-Since")) == LAST_MODIFIED:
            serve.send(h, 304, b"", validators)
        else:
            serve.send(h, 200, b"<html>v1</html>", validators)
    return route


def test_conditional_get_with_etag_gives_not_modified(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/c": _conditional(serve)})
    fetcher = make_fetcher()
    first = fetcher.fetch(server.url("/c"))
    assert first.status == 200 and not first.not_modified
    assert first.etag == '"v1"' and first.last_modified == LAST_MODIFIED
    second = fetcher.fetch(server.url("/c"), etag=first.etag)
    assert second.status == 304 and second.not_modified and second.error_kind is None
    assert second.body == b""
    assert server.log[1].headers["if-none-match"] == '"v1"'
    assert "if-none-match" not in server.log[0].headers


def test_conditional_get_with_last_modified(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/c": _conditional(serve)})
    result = make_fetcher().fetch(server.url("/c"), last_modified=LAST_MODIFIED)
    assert result.not_modified
    assert server.log[0].headers["if-modified-since"] == "Sun, 13 Sep 2020 12:26:40 GMT"


@pytest.mark.parametrize("status", [400, 403, 404, 410, 500])
def test_http_errors_are_http_status_errors(status: int, serve: Any, make_fetcher: Any) -> None:
    server = serve({"/e": lambda h: serve.send(h, status, b"<html>err</html>")})
    result = make_fetcher().fetch(server.url("/e"))
    assert result.error_kind == ErrorKind.HTTP_STATUS
    assert result.status == status
    assert result.error_detail == f"HTTP {status} for {server.url('/e')}"


def test_retry_after_seconds_on_429(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/t": lambda h: serve.send(h, 429, b"slow down", {"Retry-After": "120"})})
    result = make_fetcher().fetch(server.url("/t"))
    assert result.error_kind == ErrorKind.HTTP_STATUS and result.status == 429
    assert result.retry_after_s == 120.0


def test_retry_after_date_on_503_is_relative_to_the_injected_clock(
        serve: Any, make_fetcher: Any) -> None:
    # make_fetcher's ManualClock starts at 1_700_000_000.
    when = formatdate(1_700_000_000 + 90, usegmt=True)
    server = serve({"/t": lambda h: serve.send(h, 503, b"", {"Retry-After": when})})
    result = make_fetcher().fetch(server.url("/t"))
    assert result.status == 503 and result.retry_after_s == 90.0


@pytest.mark.parametrize("value, expected", [
    ("0", 0.0), ("3600", 3600.0), (" 5 ", 5.0), ("-5", None), ("soon", None), ("", None),
    (None, None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
    ("Sun, 13 Sep 2020 12:27:40 GMT", 60.0), ("Sunday, 13-Sep-20 12:27:40 GMT", 60.0),
    ("Sun Sep 13 12:27:40 2020", 60.0),
])
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=LAST_MODIFIED) == expected


@pytest.mark.parametrize("value", [None, "", "yesterday", "Mon, 99 Foo 2020 99:99:99 GMT"])
def test_unparseable_dates_are_none(value: str | None) -> None:
    assert parse_http_date(value) is None


def test_keep_alive_reuses_one_connection(serve: Any, make_fetcher: Any) -> None:
    server = serve({f"/p{i}": (lambda h: serve.send(h, 200, b"<html>x</html>"))
                    for i in range(5)})
    server.routes["/r"] = lambda h: serve.send(h, 301, b"", {"Location": "/p0"})
    fetcher = make_fetcher()
    for i in range(5):
        assert fetcher.fetch(server.url(f"/p{i}")).error_kind is None
    assert fetcher.fetch(server.url("/r")).error_kind is None   # a drained tiny 3xx body
    assert fetcher.fetch(server.url("/nope")).status == 404     # and a small 404 body
    assert fetcher.fetch(server.url("/p1")).error_kind is None
    assert len(server.log) == 9
    assert len(server.connections()) == 1


def test_content_type_filter_refuses_without_reading(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/img": lambda h: serve.send(h, 200, b"\x89PNG" * 10000,
                                                  {"Content-Type": "image/png"}),
                    "/feed": lambda h: serve.send(h, 200, b"<rss/>",
                                                   {"Content-Type": "application/rss+xml"})})
    fetcher = make_fetcher()
    refused = fetcher.fetch(server.url("/img"))
    assert refused.error_kind == ErrorKind.CONTENT_TYPE
    assert "Content-Type image/png not accepted" in (refused.error_detail or "")
    assert refused.bytes_on_wire == 0
    feed = fetcher.fetch(server.url("/feed"))
    assert feed.error_kind is None and feed.content_type == "application/rss+xml"


def test_response_fields(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/f": lambda h: serve.send(
        h, 200, b"<html>f</html>", {"Content-Type": 'Text/HTML; Charset="ISO-8859-1"',
                                     "X-Extra": "1"})})
    result = make_fetcher().fetch(server.url("/f"))
    assert result.content_type == "text/html" and result.charset == "iso-8859-1"
    assert result.headers["x-extra"] == "1"
    assert result.started_at == 1_700_000_000.0 == result.finished_at   # the injected clock
    assert 0 < result.elapsed_s < 1
    seen = server.log[0].headers
    assert seen["user-agent"] == "XyroTest/0.1 (+http://127.0.0.1/contact)"
    assert seen["accept-encoding"] == "gzip, deflate, br"


@pytest.mark.parametrize("url, kind", [
    ("ftp://127.0.0.1/x", ErrorKind.SCOPE), ("file:///etc/passwd", ErrorKind.SCOPE),
    ("javascript:alert(1)", ErrorKind.SCOPE), ("http://127.0.0.1/a.zip", ErrorKind.CONTENT_TYPE),
    ("http://", ErrorKind.PARSE), ("http://[::1/", ErrorKind.PARSE),
    ("http://exa mple.org/", ErrorKind.PARSE), ("http://127.0.0.1:99999/", ErrorKind.PARSE),
])
def test_bad_urls_end_as_errors(url: str, kind: ErrorKind, make_fetcher: Any) -> None:
    result = make_fetcher(hosts={}).fetch(url)
    assert result.error_kind == kind, result.error_detail
    assert result.error_detail


def test_many_threads_share_one_fetcher(serve: Any, make_fetcher: Any) -> None:
    pages = {f"/p{i}": f"<html>{i}</html>".encode() for i in range(40)}
    server = serve({path: (lambda body: lambda h: serve.send(h, 200, body))(body)
                    for path, body in pages.items()})
    fetcher = make_fetcher(max_per_host=8)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda p: fetcher.fetch(server.url(p)), list(pages) * 3))
    assert all(r.error_kind is None for r in results)
    assert [r.body for r in results] == list(pages.values()) * 3
    assert len(server.connections()) <= 8


def test_user_agent_format_and_header_injection() -> None:
    assert user_agent("Xyro/0.1", "https://example.org/bot") == \
        "Xyro/0.1 (+https://example.org/bot)"
    with pytest.raises(ValueError, match="CR/LF"):
        user_agent("Xyro\r\nX-Evil: 1", "https://example.org/bot")
    with pytest.raises(ValueError, match="CR/LF"):
        Fetcher(FetchLimits(), "a\nb", Resolver(ManualClock()), ManualClock())


@pytest.mark.parametrize("field", ["deadline_s", "max_body_bytes", "read_timeout_s"])
def test_bad_limits_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"FetchLimits.{field} must be > 0"):
        FetchLimits(**{field: 0})  # type: ignore[arg-type]


def test_stop_already_set_fetches_nothing(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/": lambda h: serve.send(h, 200, b"x")})
    stop = threading.Event()
    stop.set()
    result = make_fetcher().fetch(server.url("/"), stop=stop)
    assert result.error_kind == ErrorKind.TIMEOUT and server.log == []


def test_started_at_is_when_the_request_left_after_dns_and_connect(serve: Any) -> None:
    """Politeness separates the instants requests go out (DESIGN.md §7): a stamp taken before
    a slow name look-up or connection would let the next request to the host follow this
    one, as the server sees it, by less than the delay."""
    server = serve({"/": lambda h: serve.send(h, 200, b"<html>x</html>")})
    clock = ManualClock(1_000.0)

    def slow_lookup(host: str, port: object, *args: object, **kwargs: object) -> list[tuple]:
        clock.advance(2.5)   # the look-up takes 2.5 s of the crawler's clock
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]

    fetcher = Fetcher(FetchLimits(allow_private_addresses=True), "XyroTest/0.1",
                      Resolver(clock, getaddrinfo=slow_lookup), clock)
    try:
        first = fetcher.fetch(server.url("/", host="site.test"))
        clock.advance(1.0)
        again = fetcher.fetch(server.url("/", host="site.test"))  # cached name, kept alive
    finally:
        fetcher.close()
    assert first.error_kind is None and again.error_kind is None
    assert first.started_at == 1_002.5 and again.started_at == 1_003.5
