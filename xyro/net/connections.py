"""The connections the fetcher opens: pinned to checked addresses, watched by a deadline.

* Pinning (DNS rebinding defence): the fetcher resolves and checks a host's addresses
  (:mod:`xyro.net.dns`) and binds them to the current thread's :class:`FetchContext`; our
  urllib3 connection classes override ``_new_conn`` to connect only to those addresses and
  never resolve anything themselves. ``self.host`` stays the host name, so the Host header,
  TLS SNI and certificate matching use the name (the https path is urllib3's own TLS
  wrapping around our socket; it is not exercised against a real certificate in tests).
* Deadline: the read timeout is per socket read, so a slow-drip server defeats it.
  :class:`Watchdog` is one thread for all workers that shuts down the socket of any fetch
  past its total deadline (or whose stop event is set), which wakes the blocked worker.
  Deadlines are real time (``time.monotonic``), not the injected clock: the socket lives in
  real time, and an accelerated clock must not shorten network timeouts. Connecting is
  before any socket the watchdog could shut, so the connection classes look at the deadline
  and the stop event themselves before each address, and never wait past the deadline.
* Interim responses: http.client skips only ``100 Continue``; our connections read past
  every other 1xx but ``101`` too (``103 Early Hints``, RFC 8297, is sent before the final
  response by common servers), so the response the fetcher sees is the final one
  (RFC 9110 §15.2).
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util.connection import create_connection

_STOP_POLL_S = 0.1           # how often the watchdog looks at stop events


class UnpinnedConnection(Exception):
    """A connection was about to be made to an address nobody checked (fail closed)."""


class FetchInterrupted(Exception):
    """The fetch's total deadline passed or its stop event was set; ``reason`` is
    ``"deadline"`` or ``"stop"`` (as :attr:`FetchContext.expired`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"fetch interrupted: {reason}")
        self.reason = reason


@dataclass(eq=False)
class FetchContext:
    """One fetch as seen by the watchdog and the connection classes."""

    deadline: float
    stop: threading.Event | None
    #: Reads the fetcher's clock; stamps ``sent_at``.
    now: Callable[[], float] | None = None
    #: When the last request of this fetch went out (clock time): just after its bytes were
    #: written, never before. Politeness separates these instants (DESIGN.md §7): a stamp
    #: taken earlier (before connecting, or before a GIL hand-over ahead of the write) would
    #: let the next request arrive less than the delay after this one, as the server sees it.
    sent_at: float | None = None
    host: str = ""
    addresses: tuple[str, ...] = ()
    claims: list[tuple[Any, socket.socket]] = field(default_factory=list)
    expired: str | None = None
    done: bool = False

    def interrupted(self) -> str | None:
        """``"deadline"`` or ``"stop"`` once either ends this fetch, else None; not only
        what the watchdog saw already (it looks at stop events every :data:`_STOP_POLL_S`)."""
        if self.expired is not None:
            return self.expired
        if time.monotonic() >= self.deadline:
            return "deadline"
        if self.stop is not None and self.stop.is_set():
            return "stop"
        return None

    def check(self) -> None:
        """Raise :class:`FetchInterrupted` if the deadline passed or stop was set."""
        reason = self.interrupted()
        if reason is not None:
            raise FetchInterrupted(reason)


class Watchdog:
    """One thread that enforces every fetch's total deadline and stop event.

    Fetches *claim* the connections they use, with a dup of the socket (so a close by
    urllib3 cannot hand our fd number to another socket). On expiry the dup is shut down,
    which wakes the worker blocked in recv. A connection returned to the pool is released
    first (see ``_PinnedPoolMixin._put_conn``), so an expiring fetch never breaks a
    connection another worker already uses.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, FetchContext]] = []
        self._stops: set[FetchContext] = set()
        self._seq = itertools.count()
        self._active = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, ctx: FetchContext) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="xyro-fetch-watchdog",
                                                daemon=True)
                self._thread.start()
            self._active += 1
            if len(self._heap) > 1024 and len(self._heap) > 4 * self._active:
                # Finished fetches wait in the heap until their deadline; drop them in bulk.
                self._heap = [entry for entry in self._heap if not entry[2].done]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (ctx.deadline, next(self._seq), ctx))
            wake = self._heap[0][2] is ctx   # same deadline_s for all: rarely the earliest
            if ctx.stop is not None:
                wake = wake or not self._stops
                self._stops.add(ctx)
            if wake:
                self._cond.notify()

    def claim(self, ctx: FetchContext, conn: Any, sock: socket.socket) -> None:
        watch = socket.fromfd(sock.fileno(), sock.family, sock.type)
        with self._cond:
            conn._xyro_owner = ctx
            ctx.claims.append((conn, watch))
            if ctx.expired:
                _shutdown(watch)

    def release(self, conn: Any) -> None:
        with self._cond:
            conn._xyro_owner = None

    def finish(self, ctx: FetchContext) -> None:
        with self._cond:
            ctx.done = True
            self._active -= 1
            self._stops.discard(ctx)
            for conn, watch in ctx.claims:
                if getattr(conn, "_xyro_owner", None) is ctx:
                    conn._xyro_owner = None
                watch.close()
            ctx.claims.clear()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _expire(self, ctx: FetchContext, reason: str) -> None:
        if ctx.done or ctx.expired:
            return
        ctx.expired = reason
        for conn, watch in ctx.claims:
            if getattr(conn, "_xyro_owner", None) is ctx:
                _shutdown(watch)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
                    _deadline, _seq, ctx = heapq.heappop(self._heap)
                    self._expire(ctx, "deadline")
                for ctx in [c for c in self._stops if c.stop is not None and c.stop.is_set()]:
                    self._stops.discard(ctx)
                    self._expire(ctx, "stop")
                timeout = self._heap[0][0] - now if self._heap else None
                if self._stops:
                    timeout = _STOP_POLL_S if timeout is None else min(timeout, _STOP_POLL_S)
                self._cond.wait(timeout)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass   # already closed or never connected


class _ConnState:
    """What the connection classes need from their Fetcher (bound per Fetcher)."""

    def __init__(self, watchdog: Watchdog) -> None:
        self.watchdog = watchdog
        self.local = threading.local()   # .ctx: the FetchContext of the fetch on this thread

    def current(self) -> FetchContext | None:
        return getattr(self.local, "ctx", None)


class _PinnedConnectionMixin:
    """Connects only to the checked addresses of the current fetch; never resolves."""

    _xyro_state: _ConnState
    _xyro_owner: FetchContext | None = None

    def _new_conn(self) -> socket.socket:
        conn: Any = self
        ctx = self._xyro_state.current()
        host = norm_host(conn.host)
        if ctx is None or ctx.host != host or not ctx.addresses:
            raise UnpinnedConnection(f"no checked address for {host!r}; refusing to connect")
        last: OSError | None = None
        for address in ctx.addresses:
            # Each address may take the whole connect timeout: the deadline and the stop
            # event end the attempts, and the last one gets only the time that is left.
            ctx.check()
            try:
                sock = create_connection((address, conn.port), _connect_timeout(ctx, conn),
                                         source_address=conn.source_address,
                                         socket_options=conn.socket_options)
            except OSError as exc:
                last = exc
                continue
            self._xyro_state.watchdog.claim(ctx, self, sock)
            return sock
        ctx.check()   # an attempt cut short by the deadline failed because of it
        where = f"{host} ({', '.join(ctx.addresses)}) port {conn.port}"
        if isinstance(last, TimeoutError):
            raise ConnectTimeoutError(conn, f"connecting to {where} timed out "
                                            f"after {conn.timeout} s")
        raise NewConnectionError(conn, f"cannot connect to {where}: {last}")

    def request(self, *args: Any, **kwargs: Any) -> None:
        conn: Any = self
        ctx = self._xyro_state.current()
        if ctx is not None and conn.sock is not None and self._xyro_owner is not ctx:
            self._xyro_state.watchdog.claim(ctx, self, conn.sock)
        try:
            return super().request(*args, **kwargs)  # type: ignore[misc]
        finally:
            # After the bytes were handed to the kernel: a stamp taken before could precede
            # the send by a GIL hand-over, and the next request follow by less than the delay.
            if ctx is not None and ctx.now is not None:
                ctx.sent_at = ctx.now()


def _connect_timeout(ctx: FetchContext, conn: Any) -> float:
    """The connection's connect timeout, but no later than the fetch's deadline."""
    left = ctx.deadline - time.monotonic()
    if left <= 0:   # passed since ctx.check(); a socket timeout must be > 0
        raise FetchInterrupted("deadline")
    # urllib3 may leave its "default timeout" token here: no timeout of its own.
    timeout = conn.timeout if isinstance(conn.timeout, (int, float)) else None
    return left if timeout is None else min(timeout, left)


class FinalResponse(http.client.HTTPResponse):
    """An http.client response that reads past interim 1xx responses (module docstring).

    ``begin`` skips ``100`` itself; the status line of each other 1xx but ``101 Switching
    Protocols`` (which ends HTTP/1.1 on the connection, and is never asked for here) is
    dropped here with its header block, under http.client's own line and header limits.
    A server sending interim responses forever is cut by the fetch's deadline.
    """

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()
            if not 100 < status < 200 or status == 101:
                return version, status, reason
            http.client.parse_headers(self.fp)


class _PinnedPoolMixin:
    _xyro_state: _ConnState

    def _put_conn(self, conn: Any) -> None:
        if conn is not None:
            self._xyro_state.watchdog.release(conn)
        super()._put_conn(conn)  # type: ignore[misc]


def _pool_classes(state: _ConnState) -> dict[str, type]:
    attrs = {"_xyro_state": state}
    conn_attrs = {**attrs, "response_class": FinalResponse}
    http_conn = type("PinnedHTTPConnection", (_PinnedConnectionMixin, HTTPConnection),
                     conn_attrs)
    https_conn = type("PinnedHTTPSConnection", (_PinnedConnectionMixin, HTTPSConnection),
                      conn_attrs)
    return {
        "http": type("PinnedHTTPConnectionPool", (_PinnedPoolMixin, HTTPConnectionPool),
                     {**attrs, "ConnectionCls": http_conn}),
        "https": type("PinnedHTTPSConnectionPool", (_PinnedPoolMixin, HTTPSConnectionPool),
                      {**attrs, "ConnectionCls": https_conn}),
    }


class PinnedAdapter(HTTPAdapter):
    """A requests adapter whose pools connect only to the current fetch's checked addresses.

    Thread-safe (urllib3's PoolManager is); share one between all worker sessions. A
    worker calls :meth:`bind` with its :class:`FetchContext` before sending and
    :meth:`unbind` after: the connection classes read it from a thread-local.
    """

    def __init__(self, watchdog: Watchdog, **kwargs: Any) -> None:
        self._state = _ConnState(watchdog)
        self._pool_classes = _pool_classes(self._state)  # before super(): init_poolmanager
        super().__init__(**kwargs)

    def bind(self, ctx: FetchContext) -> None:
        self._state.local.ctx = ctx

    def unbind(self) -> None:
        self._state.local.ctx = None

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self._pool_classes


def norm_host(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()
