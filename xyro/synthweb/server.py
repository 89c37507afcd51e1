"""Sockets of the synthetic web: one threaded HTTP/1.1 server per host, the silent host,
the refused port, and one acceptor thread multiplexing every listening socket.

Each host listens on its own loopback address (127.0.0.N; Linux routes all of 127/8 to lo)
so that crawlers keying politeness on the host name see distinct hosts. Each accepted
connection gets its own daemon thread (keep-alive, HTTP/1.1, exact Content-Length). Stopping
wakes the acceptor, shuts every open connection down (which unblocks reads, writes and the
slow drip) and joins the threads with a deadline.

Arrival times. Politeness (DESIGN.md §7) is about when requests reach the server, so each
request is logged with the instant its bytes reached the server's socket (``arrival``), not
only when its handler thread got round to it (``clock``): under load the handler runs
milliseconds to a tenth of a second after the bytes came in (the OS has to schedule the
thread and the thread has to win the GIL), and two requests' lags differ, so handler stamps
of requests sent exactly the delay apart can be closer than the delay. On Linux the kernel
stamps every received segment (``SO_TIMESTAMPNS``, read back with ``recvmsg``); that stamp
is converted to the injected clock (DESIGN.md §3) with an error bound measured at the
conversion. Elsewhere ``arrival`` stays None and readers fall back to ``clock``.
"""

from __future__ import annotations

import errno
import io
import selectors
import socket
import socketserver
import struct
import sys
import threading
import time
from collections import deque
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from xyro.clock import Clock, ManualClock
from xyro.synthweb.content import http_date
from xyro.synthweb.log import RequestLog, RequestRecord
from xyro.synthweb.reply import Reply
from xyro.synthweb.site import Site

STREAM_CHUNK = 1 << 16

# SO_TIMESTAMPNS (and its control message SCM_TIMESTAMPNS) of Linux's asm-generic socket.h
# (x86, arm); Python's socket module does not name it. The payload is a struct timespec.
_SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@ll")
_STAMP_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)
#: Attempts at reading the real and the injected clock back to back (see ArrivalStamper).
_CLOCK_PAIR_TRIES = 3


def enable_kernel_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp the segments ``sock`` receives; False where it cannot."""
    if sys.platform != "linux":
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def clock_rate(clock: Clock) -> float:
    """Clock seconds per real second: an accelerated clock's speed, 0 for a manual clock
    (its time moves only when told), 1 for any other (the wall clock)."""
    if isinstance(clock, ManualClock):
        return 0.0
    return float(getattr(clock, "speed", 1.0))


class ArrivalStamper:
    """Converts the kernel's receive stamps (real POSIX seconds) to the injected clock.

    The conversion reads the real clock, the injected clock and the real clock again; the
    injected reading belongs to some real instant between the two real ones, so taking their
    midpoint is off by at most half their distance (times the clock's rate). That distance
    is measured on every conversion and kept as the arrival's error bound: a thread switch
    between the reads widens the bound instead of silently shifting the arrival. The
    tightest of a few attempts is kept.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rate = clock_rate(clock)

    def to_clock(self, real: float) -> tuple[float, float]:
        """(clock time of the real instant ``real``, bound on that time's error)."""
        best: tuple[float, float, float] | None = None
        for _ in range(_CLOCK_PAIR_TRIES):
            # The real clock is read only to place the kernel's stamp, which is on it.
            r1, now, r2 = time.time(), self._clock.now(), time.time()
            if best is None or r2 - r1 < best[2] - best[0]:
                best = (r1, now, r2)
        r1, now, r2 = best
        return now - self._rate * ((r1 + r2) / 2 - real), self._rate * (r2 - r1) / 2


class ArrivalSocketIO(io.RawIOBase):
    """A connection's socket as raw input for ``rfile``, remembering when its bytes arrived.

    Each read also takes the kernel's stamp of the data read (for TCP: of the last segment
    the read consumed). ``tell()`` counts the bytes read, so the ``io.BufferedReader`` on top
    reports how far the handler has consumed the stream, and :meth:`arrival_at` finds the
    read that brought a given byte. A request sent in one write (what HTTP clients do) is one
    segment on loopback, so the stamp of its first byte is the stamp of the whole request.
    """

    def __init__(self, sock: socket.socket, stamper: ArrivalStamper, stamped: bool) -> None:
        super().__init__()
        self._sock = sock
        self._stamper = stamper
        self._space = _STAMP_SPACE if stamped else 0
        self._received = 0
        # (stream offset of the read's first byte, arrival on the clock, its error bound)
        self._reads: deque[tuple[int, float | None, float]] = deque()

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sock.fileno()

    def tell(self) -> int:
        return self._received

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n, ancdata, _flags, _addr = self._sock.recvmsg_into([buffer], self._space)
        if n:
            arrival, error = self._arrival(ancdata)
            self._reads.append((self._received, arrival, error))
            self._received += n
        return n

    def _arrival(self, ancdata: list[tuple[int, int, bytes]]) -> tuple[float | None, float]:
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack_from(data)
                return self._stamper.to_clock(sec + nsec * 1e-9)
        return None, 0.0

    def arrival_at(self, offset: int) -> tuple[float | None, float]:
        """When the byte at stream ``offset`` arrived: (clock time or None, error bound).
        Reads wholly before ``offset`` are forgotten (offsets only grow)."""
        reads = self._reads
        while len(reads) > 1 and reads[1][0] <= offset:
            reads.popleft()
        if not reads or reads[0][0] > offset:
            return None, 0.0
        return reads[0][1], reads[0][2]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "XyroSynthWeb/1.0"
    disable_nagle_algorithm = True
    server: HostServer
    rfile: io.BufferedReader

    def setup(self) -> None:
        self.timeout = self.server.idle_timeout  # idle keep-alive connections end
        super().setup()
        # rfile again, over a raw reader that knows when each byte arrived (module docstring).
        stamped = enable_kernel_stamps(self.connection)
        self.rfile.close()
        self.rfile = io.BufferedReader(
            ArrivalSocketIO(self.connection, self.server.stamper, stamped),
            io.DEFAULT_BUFFER_SIZE)
        self._request_offset = 0

    def handle_one_request(self) -> None:
        # Where this request's first byte sits in the stream: its request line is next.
        self._request_offset = self.rfile.tell()
        super().handle_one_request()

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
        raw: ArrivalSocketIO = self.rfile.raw  # type: ignore[assignment]
        arrival, arrival_error = raw.arrival_at(self._request_offset)
        record = RequestRecord(
            start=start, end=None, clock=now, host=srv.address, port=srv.port,
            method=self.command, target=self.path, status=reply.status, bytes=0,
            user_agent=h.get("User-Agent"), if_none_match=h.get("If-None-Match"),
            if_modified_since=h.get("If-Modified-Since"), arrival=arrival,
            arrival_error=arrival_error)
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
        self.stamper = ArrivalStamper(clock)
        self.address = address
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._conns_lock = threading.Lock()
        super().__init__((address, 0), _Handler)
        self.port: int = self.server_address[1]

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(): a reverse DNS lookup we neither need nor want.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
        # On the listening socket, so that the kernel stamps segments from now on (it stamps
        # none while no socket asks) and accepted connections inherit the option: the first
        # request of a connection is often in before the handler thread runs.
        enable_kernel_stamps(self.socket)

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
