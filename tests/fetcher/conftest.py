"""Real HTTP servers on 127.0.0.1 for the fetcher tests, and fetcher factories.

``LocalServer`` is a threaded HTTP/1.1 server whose routes are plain functions taking the
request handler; it logs every request with the client port, so a test can count the TCP
connections it saw. ``hold_server`` accepts connections and never answers.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from xyro.clock import ManualClock
from xyro.net.dns import Resolver
from xyro.net.fetcher import Fetcher, FetchLimits
from xyro.records import ErrorKind

Route = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    client_port: int


@dataclass
class LocalServer:
    routes: dict[str, Route]
    port: int = 0
    log: list[Seen] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def connections(self) -> set[int]:
        return {seen.client_port for seen in self.log}


def _make_handler(server: LocalServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            path = self.path.split("?", 1)[0]
            server.log.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()},
                                   self.client_address[1]))
            route = server.routes.get(path)
            if route is None:
                send(self, 404, b"not found")
                return
            try:
                route(self)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"",
         headers: dict[str, str] | None = None) -> None:
    """A complete response with Content-Length."""
    handler.send_response(status)
    all_headers = {"Content-Type": "text/html", **(headers or {})}
    for name, value in all_headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: tests that open 8+ connections at once would
    # see SYNs dropped and retried after 1 s, past the fixtures' connect timeout.
    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        pass   # clients hanging up on hostile routes is the point of these tests


class Serve:
    """Starts LocalServers; also carries the route helpers (tests cannot import conftest)."""

    send = staticmethod(send)

    def __init__(self) -> None:
        self._started: list[_QuietServer] = []

    def __call__(self, routes: dict[str, Route], tls: ssl.SSLContext | None = None,
                 ) -> LocalServer:
        local = LocalServer(routes)
        httpd = _QuietServer(("127.0.0.1", 0), _make_handler(local))
        if tls is not None:
            httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
        local.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        self._started.append(httpd)
        return local

    @staticmethod
    def drip(handler: BaseHTTPRequestHandler, body: bytes, every_s: float) -> None:
        """Send headers, then the body one byte every ``every_s`` until the client hangs up."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for i in range(len(body)):
            handler.wfile.write(body[i:i + 1])
            handler.wfile.flush()
            pause(every_s)

    @staticmethod
    def close_delimited(handler: BaseHTTPRequestHandler, body: bytes,
                        headers: dict[str, str] | None = None) -> None:
        """A response without Content-Length, ended by closing the connection."""
        handler.send_response(200)
        for name, value in {"Content-Type": "text/html", **(headers or {})}.items():
            handler.send_header(name, value)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(body)
        handler.close_connection = True

    def stop(self) -> None:
        for httpd in self._started:
            httpd.shutdown()
            httpd.server_close()


def pause(seconds: float) -> None:
    """A server-side real-time pause (the slow peer being simulated), not a test sleep."""
    threading.Event().wait(seconds)


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(routes)`` starts a LocalServer; all are stopped after the test."""
    starter = Serve()
    yield starter
    starter.stop()


@pytest.fixture
def hold_server() -> Iterator[int]:
    """A port that accepts TCP connections and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    done.set()
    thread.join()
    for sock in held:
        sock.close()
    listener.close()


@pytest.fixture
def free_port() -> int:
    """A port nobody listens on (bound, then closed)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def table_getaddrinfo(table: dict[str, list[str]], calls: list[str] | None = None,
                      ) -> Callable[..., list[tuple]]:
    """A getaddrinfo that knows only ``table`` (name → IPv4/IPv6 addresses); no real DNS."""

    def lookup(host: str, port: object, *args: object, **kwargs: object) -> list[tuple]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, 0)) for a in table[host]]

    return lookup


TEST_LIMITS = FetchLimits(connect_timeout_s=1.0, read_timeout_s=2.0, deadline_s=3.0,
                          max_body_bytes=256 * 1024, max_decoded_bytes=512 * 1024,
                          allow_private_addresses=True)


@pytest.fixture
def make_fetcher() -> Iterator[Callable[..., Fetcher]]:
    """``make_fetcher(**limit_overrides)``: small test limits, private addresses allowed.

    ``hosts`` gives a fixed name table instead of the system resolver.
    """
    made: list[tuple[Fetcher, Resolver]] = []

    def build(*, resolver: Resolver | None = None, hosts: dict[str, list[str]] | None = None,
              redirect_check: Callable[[str], ErrorKind | None] | None = None,
              max_per_host: int = 4, ca_bundle: str | None = None,
              **overrides: object) -> Fetcher:
        clock = ManualClock()
        if resolver is None:
            lookup = socket.getaddrinfo if hosts is None else table_getaddrinfo(hosts)
            resolver = Resolver(clock, timeout_s=2.0, getaddrinfo=lookup)
        fetcher = Fetcher(replace(TEST_LIMITS, **overrides),  # type: ignore[arg-type]
                          "XyroTest/0.1 (+http://127.0.0.1/contact)", resolver, clock,
                          redirect_check, max_per_host=max_per_host, ca_bundle=ca_bundle)
        made.append((fetcher, resolver))
        return fetcher

    yield build
    for fetcher, resolver in made:
        fetcher.close()
        resolver.close()
