"""Host name resolution for the fetcher: a cache, a bounded wait, and the address policy.

Why a dedicated pool: ``getaddrinfo`` cannot be interrupted, and the Xyleme crawler saw
threads blocked for minutes in DNS (paper 003 §3). Resolutions run on a few threads of
their own; a fetch worker waits at most ``timeout_s`` and then gives up on that URL while
the resolution finishes in the background and fills the cache for the next attempt.

Why the policy lives here: the fetcher connects to exactly the addresses that passed
:func:`address_refusal` (see ``xyro.net.fetcher``), so a name that re-resolves to a private
address between check and connect (DNS rebinding) cannot reach the inside.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from xyro.clock import Clock

GetAddrInfo = Callable[..., list[tuple]]


class DnsError(Exception):
    """A host name could not be resolved (in time); the message says which and why."""


@dataclass(frozen=True, slots=True)
class _Entry:
    addresses: tuple[str, ...]   # empty for a negative entry
    error: str | None
    expires_at: float            # injected-clock time


def address_refusal(address: str) -> str | None:
    """Why ``address`` must not be contacted from a public crawler, or None if it may.

    IPv4-mapped IPv6 addresses (``::ffff:127.0.0.1``) are judged as the IPv4 they carry.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"not an IP address: {address!r}"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    # 0.0.0.0 first: Linux connects it to the local host.
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
    )
    for reason, hit in checks:
        if hit:
            return reason
    return None


def literal_address(host: str) -> str | None:
    """The host itself when it is an IP literal (brackets allowed), else None."""
    candidate = host.strip("[]")
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return None


class Resolver:
    """Cached, time-bounded ``getaddrinfo``; thread-safe.

    ``ttl_s``/``negative_ttl_s`` are on the injected clock (crawl time: an accelerated demo
    expires entries in proportion). ``timeout_s`` is real time (monotonic): the resolver
    thread blocks in real time. ``getaddrinfo`` is injectable so tests can be slow or fail.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        getaddrinfo: GetAddrInfo = socket.getaddrinfo,
        timeout_s: float = 5.0,
        ttl_s: float = 3600.0,
        negative_ttl_s: float = 300.0,
        threads: int = 8,
        max_entries: int = 200_000,
    ) -> None:
        if timeout_s <= 0 or threads < 1 or max_entries < 1:
            raise ValueError(
                f"Resolver needs timeout_s > 0, threads >= 1, max_entries >= 1; got "
                f"timeout_s={timeout_s}, threads={threads}, max_entries={max_entries}")
        self._clock = clock
        self._getaddrinfo = getaddrinfo
        self._timeout_s = timeout_s
        self._ttl_s = ttl_s
        self._negative_ttl_s = negative_ttl_s
        self._max_entries = max_entries
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="xyro-dns")
        self._lock = threading.Lock()
        self._cache: dict[str, _Entry] = {}
        self._inflight: dict[str, Future[_Entry]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    def resolve(self, host: str) -> tuple[str, ...]:
        """Addresses of ``host`` (IPv4 first), waiting at most ``timeout_s`` real seconds.

        Raises :class:`DnsError` on failure, timeout or a cached failure.
        """
        host = host.rstrip(".").lower()
        literal = literal_address(host)
        if literal is not None:
            return (literal,)
        entry = self._cached(host)
        if entry is None:
            future = self._start(host)
            try:
                entry = future.result(timeout=self._timeout_s)
            except FutureTimeout:
                raise DnsError(
                    f"resolving {host!r} took longer than {self._timeout_s:g} s; "
                    f"it goes on in the background and the next attempt may use the cache"
                ) from None
        if entry.error is not None:
            raise DnsError(entry.error)
        return entry.addresses

    def prefetch(self, host: str) -> None:
        """Start resolving ``host`` without waiting (the engine calls this before dispatch)."""
        host = host.rstrip(".").lower()
        if literal_address(host) is None and self._cached(host) is None:
            self._start(host)

    def close(self) -> None:
        """Stop the resolver threads (pending resolutions are abandoned)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _cached(self, host: str) -> _Entry | None:
        now = self._clock.now()
        with self._lock:
            entry = self._cache.get(host)
            if entry is not None and entry.expires_at > now:
                self.hits += 1
                return entry
            self.misses += 1
            return None

    def _start(self, host: str) -> Future[_Entry]:
        with self._lock:
            future = self._inflight.get(host)
            if future is None:
                future = self._pool.submit(self._lookup, host)
                self._inflight[host] = future
            return future

    def _lookup(self, host: str) -> _Entry:
        """Runs on a resolver thread; stores its answer even if the asker gave up."""
        t0 = time.monotonic()
        try:
            infos = self._getaddrinfo(host, None, type=socket.SOCK_STREAM)
            addresses = _ordered_addresses(infos)
            if addresses:
                entry = _Entry(addresses, None, self._clock.now() + self._ttl_s)
            else:
                entry = _Entry((), f"{host!r} resolved to no address",
                               self._clock.now() + self._negative_ttl_s)
        except (OSError, UnicodeError) as exc:
            entry = _Entry((), f"cannot resolve {host!r}: {exc} "
                               f"(after {time.monotonic() - t0:.2f} s)",
                           self._clock.now() + self._negative_ttl_s)
        with self._lock:
            if len(self._cache) >= self._max_entries:
                # Oldest insertion first: a cheap bound, the cache is only an accelerator.
                self._cache.pop(next(iter(self._cache)))
            self._cache[host] = entry
            self._inflight.pop(host, None)
        return entry


def _ordered_addresses(infos: list[tuple]) -> tuple[str, ...]:
    """Unique addresses, IPv4 before IPv6 (many hosts and test servers lack IPv6)."""
    v4: list[str] = []
    v6: list[str] = []
    for family, _type, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        bucket = v4 if family == socket.AF_INET else v6
        if address not in v4 and address not in v6:
            bucket.append(address)
    return tuple(v4 + v6)
