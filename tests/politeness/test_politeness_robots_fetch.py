"""robots.txt fetches keep politeness and scope (DESIGN.md §7) and read a long file's first
500 KiB (RFC 9309 §2.5). Real crawls (``run_crawl``, wired as the CLI wires them) of real
HTTP servers on 127.0.0.1, 127.0.0.2 and 127.0.0.3, each server counting the requests it
serves at once; wall clock."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from xyro.app import App
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.service.crawl_run import run_crawl

Route = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]
PAGE = (200, {"Content-Type": "text/html"},
        b'<html><body><a href="/a.html">a</a> <a href="/private/b.html">b</a></body></html>')
RULES = b"User-agent: *\nDisallow: /private\n"


@dataclass
class Site:
    """A threaded server answering every path with ``route``; it logs paths and the most
    requests it was ever serving at once."""

    route: Route
    address: str = "127.0.0.1"
    port: int = 0
    paths: list[str] = field(default_factory=list)
    most_at_once: int = 0
    _now: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://{self.address}:{self.port}{path}"

    def enter(self, path: str) -> None:
        with self._lock:
            self.paths.append(path)
            self._now += 1
            self.most_at_once = max(self.most_at_once, self._now)

    def leave(self) -> None:
        with self._lock:
            self._now -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def handle_error(self, request: object, client_address: object) -> None:
        pass   # the crawler hangs up on a 12 MB robots.txt after 500 KiB: that is the point


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            site.enter(self.path)
            try:
                status, headers, body = site.route(self)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            finally:
                site.leave()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def serve() -> Iterator[Callable[..., Site]]:
    """``serve(route, address)`` starts a Site; all are stopped after the test."""
    started: list[_Server] = []

    def start(route: Route, address: str = "127.0.0.1") -> Site:
        site = Site(route, address)
        httpd = _Server((address, 0), _handler(site))
        site.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        started.append(httpd)
        return site

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def _crawl(tmp_path: Path, seeds: list[str], *settings: str) -> None:
    config = load_config(None, {}, [
        "scope.allow_private_addresses=true", "crawler.politeness.delay_s=0",
        "crawler.workers=8", f"seeds={json.dumps(seeds)}",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}", *settings])
    app = App(config, WallClock())
    with app.open_store(create=True):
        pass
    summary = run_crawl(app, max_seconds=8)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason


def _slow_rules(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
    # Long enough that robots.txt fetches sent together would overlap on this host.
    threading.Event().wait(0.3)
    return 200, {"Content-Type": "text/plain"}, RULES


def _origin_to(target: Site) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        if handler.path == "/robots.txt":
            return 301, {"Location": target.url("/robots.txt")}, b""
        return PAGE
    return route


def test_robots_redirect_fan_in_puts_one_request_at_most_on_the_target_host(
        tmp_path: Path, serve: Callable[..., Site]) -> None:
    target = serve(_slow_rules, "127.0.0.2")
    origins = [serve(_origin_to(target)) for _ in range(8)]
    _crawl(tmp_path, [o.url("/") for o in origins])
    assert target.most_at_once <= 1, f"{target.most_at_once} requests at once on {target.url('/')}"
    # Each origin's robots.txt reached through its redirect, and obeyed (RFC 9309 §2.3.1.2).
    assert target.paths.count("/robots.txt") >= len(origins)
    for origin in origins:
        assert {"/robots.txt", "/", "/a.html"} <= set(origin.paths)
        assert "/private/b.html" not in origin.paths, origin.url("/")


def test_robots_redirect_to_a_denied_host_never_reaches_it(
        tmp_path: Path, serve: Callable[..., Site]) -> None:
    denied = serve(_slow_rules, "127.0.0.3")
    origin = serve(_origin_to(denied))
    _crawl(tmp_path, [origin.url("/")], 'scope.denied_domains=["127.0.0.3"]')
    assert denied.paths == [], f"denied host {denied.url('/')} got {denied.paths}"
    # Not reached, so unavailable: allow all (RFC 9309 §2.3.1.3).
    assert {"/a.html", "/private/b.html"} <= set(origin.paths)


BIG = RULES + b"# padding padding padding padding padding padding\n" * 250_000   # 12.5 MB


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_robots_txt_of_12_mb_is_obeyed_from_its_first_lines(
        encoding: str, tmp_path: Path, serve: Callable[..., Site]) -> None:
    body = BIG if encoding == "identity" else gzip.compress(BIG, 1)
    headers = {"Content-Type": "text/plain", "Content-Encoding": encoding}

    def route(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        return (200, headers, body) if handler.path == "/robots.txt" else PAGE

    site = serve(route)
    # Caps below the 12.5 MB of the file on the wire and decoded (its gzip is 100 KB).
    _crawl(tmp_path, [site.url("/")], "crawler.limits.max_body_bytes=1000000",
           "crawler.limits.max_decoded_bytes=8388608")
    assert {"/robots.txt", "/", "/a.html"} <= set(site.paths)
    assert "/private/b.html" not in site.paths


def test_a_robots_hop_to_a_host_waiting_its_turn_does_not_break_the_crawl(
        tmp_path: Path, serve: Callable[..., Site]) -> None:
    # Two workers: the origin's and another host's fetches take both, so the target waits
    # ready in the frontier while the origin's robots.txt is redirected to it.
    def slow_target(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        if handler.path == "/robots.txt":
            threading.Event().wait(1.0)
            return 200, {"Content-Type": "text/plain"}, RULES
        return PAGE

    def fast(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        return (404, {}, b"") if handler.path == "/robots.txt" else PAGE

    target = serve(slow_target, "127.0.0.2")
    origin = serve(_origin_to(target))
    other = serve(fast, "127.0.0.3")
    _crawl(tmp_path, [origin.url("/"), other.url("/"), target.url("/")], "crawler.workers=2")
    assert target.most_at_once <= 1
    assert "/private/b.html" not in origin.paths and "/a.html" in origin.paths


def test_a_robots_txt_redirected_to_a_busy_host_s_own_is_answered_from_the_cache(
        tmp_path: Path, serve: Callable[..., Site]) -> None:
    # A bare host whose robots.txt redirects to its www. name's own robots.txt while that
    # host is being crawled: the hop finds it busy (its robots.txt or a page in flight, or
    # within its delay), then its rules, read for its own pages, answer for the bare host.
    # Asking again until the www. host happened to be free cost a robots.txt a delay.
    target = serve(_slow_rules, "127.0.0.2")
    origin = serve(_origin_to(target))
    _crawl(tmp_path, [target.url("/"), origin.url("/")], "crawler.politeness.delay_s=1")
    assert target.most_at_once <= 1
    assert "/private/b.html" not in origin.paths and "/a.html" in origin.paths
    assert origin.paths.count("/robots.txt") <= 2, origin.paths
