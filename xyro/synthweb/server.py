"""Sockets of the synthetic web: one threaded HTTP/1.1 server per host, the silent host,
the refused port, and one acceptor thread multiplexing every listening socket.

Each host listens on its own loopback address (127.0.0.N; Linux routes all of 127/8 to lo)
so that crawlers keying politeness on the host name see distinct hosts. Each accepted
connection gets its own daemon thread (keep-alive, HTTP/1.1, exact Content-Length). Stopping
wakes the acceptor, shuts every open connection down (which unblocks reads, writes and the
slow drip) and joins the threads with a deadline.
"""

from __future__ import annotations

import errno
import selectors
import socket
import socketserver
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from xyro.clock import Clock
from xyro.synthweb.content import http_date
from xyro.synthweb.log import RequestLog, RequestRecord
from xyro.synthweb.reply import Reply
from xyro.synthweb.site import Site

STREAM_CHUNK = 1 << 16


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "XyroSynthWeb/1.0"
    disable_nagle_algorithm = True
    server: HostServer

    def setup(self) -> None:
        self.timeout = self.server.idle_timeout  # idle keep-alive connections end
        super().setup()

    def do_GET(self) -> None:
        self._serve(with_body=True)

    def do_HEAD(self) -> None:
        self._serve(with_body=False)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the request log records everything."""

    def _serve(self, with_body: bool) -> None:
        srv = self.server
        start = time.monotonic()
        now = srv.clock.now()
        h = self.headers
        reply = srv.site.answer(self.path, h.get("If-None-Match"), h.get("If-Modified-Since"),
                                now)
        record = RequestRecord(
            start=start, end=None, clock=now, host=srv.address, port=srv.port,
            method=self.command, target=self.path, status=reply.status, bytes=0,
            user_agent=h.get("User-Agent"), if_none_match=h.get("If-None-Match"),
            if_modified_since=h.get("If-Modified-Since"))
        simple = not with_body or reply.mode in ("full", "hold") or reply.status == 304
        if simple:
            # Complete before the one write, so a client holding the response finds it logged.
            record.bytes = len(reply.body) if with_body and reply.status != 304 else 0
            record.end = time.monotonic()
        srv.log.add(record)
        sent = self._write(reply, with_body, now)
        if sent != record.bytes:
            record.bytes = sent
        if not simple:
            record.end = time.monotonic()

    def _write(self, reply: Reply, with_body: bool, now: float) -> int:
        """Write the reply; returns body bytes sent. Client aborts end the connection."""
        phrase = HTTPStatus(reply.status).phrase
        lines = [f"HTTP/1.1 {reply.status} {phrase}\r\nDate: {http_date(now)}\r\n"
                 f"Server: {self.server_version}\r\n"]
        if reply.content_type:
            lines.append(f"Content-Type: {reply.content_type}\r\n")
        lines.extend(f"{k}: {v}\r\n" for k, v in reply.headers)
        if reply.status != 304:
            lines.append(f"Content-Length: {reply.content_length}\r\n")
        lines.append("\r\n")
        head = "".join(lines).encode("latin-1")
        try:
            if not with_body or reply.status == 304 or reply.mode == "hold":
                self.wfile.write(head)
                return 0
            if reply.mode == "full":
                self.wfile.write(head + reply.body)
                return len(reply.body)
            self.wfile.write(head)
            return self._stream(reply) if reply.mode == "stream" else self._drip(reply)
        except OSError:
            self.close_connection = True
            return 0

    def _stream(self, reply: Reply) -> int:
        sent, total, chunk = 0, reply.content_length, reply.body
        try:
            while sent < total and not self.server.stopping.is_set():
                piece = chunk[: total - sent]
                self.wfile.write(piece)
                sent += len(piece)
        except OSError:
            self.close_connection = True
        if sent < total:
            self.close_connection = True
        return sent

    def _drip(self, reply: Reply) -> int:
        sent = 0
        try:
            for i in range(len(reply.body)):
                self.wfile.write(reply.body[i:i + 1])
                sent += 1
                # Real seconds: the point is to outlast per-read socket timeouts.
                if self.server.stopping.wait(self.server.drip_interval):
                    break
        except OSError:
            pass
        if sent < len(reply.body):
            self.close_connection = True
        return sent


class HostServer(ThreadingHTTPServer):
    """The HTTP server of one host; one daemon thread per connection, all tracked."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address: str, site: Site, log: RequestLog, clock: Clock,
                 stopping: threading.Event, drip_interval: float, idle_timeout: float) -> None:
        self.site = site
        self.log = log
        self.clock = clock
        self.stopping = stopping
        self.drip_interval = drip_interval
        self.idle_timeout = idle_timeout
        self.address = address
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._conns_lock = threading.Lock()
        super().__init__((address, 0), _Handler)
        self.port: int = self.server_address[1]

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(): a reverse DNS lookup we neither need nor want.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request: socket.socket, client_address: object) -> None:
        t = threading.Thread(target=self._run, args=(request, client_address), daemon=True,
                             name=f"synthweb-{self.address}")
        with self._conns_lock:
            self._conns[t] = request
        t.start()

    def _run(self, request: socket.socket, client_address: object) -> None:
        try:
            self.finish_request(request, client_address)
        except OSError:
            pass  # a client that resets its connection is normal here
        finally:
            self.shutdown_request(request)
            with self._conns_lock:
                self._conns.pop(threading.current_thread(), None)

    def handle_error(self, request: object, client_address: object) -> None:
        """Quiet: aborted connections are routine for a web full of hostile pages."""

    def close_connections(self) -> list[threading.Thread]:
        """Shut every open connection down; returns the threads to join."""
        with self._conns_lock:
            conns = list(self._conns.items())
        for _, sock in conns:
            _shutdown(sock)
        return [t for t, _ in conns]


class SilentListener:
    """Accepts TCP connections and never reads or writes: the host that never answers."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.socket = socket.create_server((address, 0), backlog=128)
        self.socket.setblocking(False)
        self.port: int = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []

    def accept(self) -> None:
        try:
            conn, _ = self.socket.accept()
        except (BlockingIOError, InterruptedError):
            return
        self.held.append(conn)

    def close(self) -> None:
        for conn in self.held:
            _shutdown(conn)
            conn.close()
        self.held.clear()
        self.socket.close()


class RefusedPort:
    """A port bound but not listening: connecting to it is refused (RST), yet it stays ours."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind((address, 0))
        self.port: int = self.socket.getsockname()[1]

    def close(self) -> None:
        self.socket.close()


class Acceptor:
    """One thread that accepts on every listening socket and hands connections over."""

    def __init__(self, servers: list[HostServer], silent: SilentListener | None) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        for srv in servers:
            srv.socket.setblocking(False)
            self._selector.register(srv.socket, selectors.EVENT_READ, srv)
        if silent is not None:
            self._selector.register(silent.socket, selectors.EVENT_READ, silent)
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="synthweb-acceptor")

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            for key, _ in self._selector.select():
                target = key.data
                if target is None:
                    return
                if isinstance(target, SilentListener):
                    target.accept()
                else:
                    self._accept(target)

    @staticmethod
    def _accept(srv: HostServer) -> None:
        try:
            request, client = srv.socket.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # e.g. EMFILE: drop this one, keep serving
            if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ECONNABORTED):
                raise
            return
        request.setblocking(True)
        srv.process_request(request, client)

    def stop(self, timeout: float = 2.0) -> None:
        self._stop = True
        self._wake_w.send(b"x")
        self._thread.join(timeout)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
