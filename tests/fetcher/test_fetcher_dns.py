"""DNS: cache, negative cache, bounded wait, address policy, connecting to the checked IP."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from xyro.clock import ManualClock
from xyro.net.dns import DnsError, Resolver, address_refusal, literal_address
from xyro.records import ErrorKind


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("192.168.0.1", "private"), ("172.16.5.4", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("224.0.0.1", "multicast"), ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("240.0.0.1", "reserved"), ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"), ("100.64.0.1", "not globally routable"),
    ("fc00::1", "private"), ("not-an-ip", "not an IP address: 'not-an-ip'"),
])
def test_address_policy_refuses_non_public_addresses(address: str, reason: str) -> None:
    assert address_refusal(address) == reason


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_address_policy_allows_public_addresses(address: str) -> None:
    assert address_refusal(address) is None


def test_literal_addresses_are_recognised() -> None:
    assert literal_address("127.0.0.1") == "127.0.0.1"
    assert literal_address("[::1]") == "::1"
    assert literal_address("example.org") is None


def test_loopback_literal_is_refused_unless_allowed(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/": lambda h: serve.send(h, 200, b"<html>in</html>")})
    refused = make_fetcher(allow_private_addresses=False).fetch(server.url("/"))
    assert refused.error_kind == ErrorKind.ADDRESS
    assert "127.0.0.1 (loopback)" in (refused.error_detail or "")
    assert "allow_private_addresses" in (refused.error_detail or "")
    assert server.log == []
    allowed = make_fetcher(allow_private_addresses=True).fetch(server.url("/"))
    assert allowed.error_kind is None and allowed.body == b"<html>in</html>"


@pytest.mark.parametrize("host", ["localhost", "2130706433", "0x7f.1"])
def test_names_that_resolve_to_loopback_are_refused(host: str, serve: Any,
                                                    make_fetcher: Any) -> None:
    # /etc/hosts and glibc's numeric forms: no network involved.
    server = serve({"/": lambda h: serve.send(h, 200, b"x")})
    result = make_fetcher(allow_private_addresses=False).fetch(server.url("/", host))
    assert result.error_kind == ErrorKind.ADDRESS, result.error_detail
    assert server.log == []


def test_connection_goes_to_the_checked_address_with_the_host_name_kept(
        serve: Any, make_fetcher: Any) -> None:
    # "pinned.example" exists only in our resolver's table: had urllib3 resolved the name
    # itself (the DNS-rebinding hole), the connection would have failed.
    server = serve({"/": lambda h: serve.send(h, 200, b"pinned")})
    fetcher = make_fetcher(hosts={"pinned.example": ["127.0.0.1"]})
    result = fetcher.fetch(server.url("/", "pinned.example"))
    assert result.error_kind is None, result.error_detail
    assert result.body == b"pinned"
    assert server.log[0].headers["host"] == f"pinned.example:{server.port}"


def test_next_address_is_tried_when_the_first_refuses(serve: Any, make_fetcher: Any) -> None:
    server = serve({"/": lambda h: serve.send(h, 200, b"second")})
    fetcher = make_fetcher(hosts={"multi.example": ["127.0.0.2", "127.0.0.1"]})
    result = fetcher.fetch(server.url("/", "multi.example"))
    assert result.error_kind is None, result.error_detail
    assert result.body == b"second"


def test_unknown_host_is_a_dns_error(make_fetcher: Any) -> None:
    result = make_fetcher(hosts={}).fetch("http://nowhere.example/")
    assert result.error_kind == ErrorKind.DNS
    assert "cannot resolve 'nowhere.example'" in (result.error_detail or "")


class SlowLookup:
    """A getaddrinfo that blocks until released (a resolver stuck for minutes)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def __call__(self, host: str, *args: object, **kwargs: object) -> list[tuple]:
        self.calls.append(host)
        self.release.wait(10)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]


def test_slow_resolution_does_not_hold_the_caller(serve: Any, make_fetcher: Any) -> None:
    slow = SlowLookup()
    resolver = Resolver(ManualClock(), getaddrinfo=slow, timeout_s=0.3, threads=1)
    try:
        server = serve({"/": lambda h: serve.send(h, 200, b"late")})
        fetcher = make_fetcher(resolver=resolver)
        waits = []
        for host in ("slow.example", "slower.example"):   # the one thread is busy
            t0 = time.monotonic()
            result = fetcher.fetch(server.url("/", host))
            waits.append(time.monotonic() - t0)
            assert result.error_kind == ErrorKind.DNS
            assert "took longer than 0.3 s" in (result.error_detail or "")
        assert all(w < 0.8 for w in waits), waits
        slow.release.set()   # the background resolutions finish and fill the cache
        assert resolver.resolve("slow.example") == ("127.0.0.1",)
        assert slow.calls[0] == "slow.example"
        assert fetcher.fetch(server.url("/", "slow.example")).body == b"late"
    finally:
        slow.release.set()
        resolver.close()


def test_concurrent_askers_share_one_resolution() -> None:
    slow = SlowLookup()
    resolver = Resolver(ManualClock(), getaddrinfo=slow, timeout_s=2.0)
    answers: list[tuple[str, ...]] = []
    threads = [threading.Thread(target=lambda: answers.append(resolver.resolve("a.example")))
               for _ in range(4)]
    for t in threads:
        t.start()
    threading.Event().wait(0.1)
    slow.release.set()
    for t in threads:
        t.join()
    resolver.close()
    assert answers == [("127.0.0.1",)] * 4
    assert slow.calls == ["a.example"]


def test_cache_hit_ttl_and_negative_cache() -> None:
    clock = ManualClock()
    calls: list[str] = []

    def lookup(host: str, *args: object, **kwargs: object) -> list[tuple]:
        calls.append(host)
        if host == "gone.example":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 0, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]

    resolver = Resolver(clock, getaddrinfo=lookup, ttl_s=100, negative_ttl_s=10)
    try:
        assert resolver.resolve("Host.Example.") == ("127.0.0.1", "::1")   # IPv4 first
        assert resolver.resolve("host.example") == ("127.0.0.1", "::1")
        assert calls == ["host.example"] and resolver.hits == 1
        clock.advance(101)
        resolver.resolve("host.example")
        assert calls == ["host.example", "host.example"]
        for _ in range(2):
            with pytest.raises(DnsError, match="cannot resolve 'gone.example'"):
                resolver.resolve("gone.example")
        assert calls.count("gone.example") == 1
        clock.advance(11)
        with pytest.raises(DnsError):
            resolver.resolve("gone.example")
        assert calls.count("gone.example") == 2
        assert resolver.resolve("10.0.0.1") == ("10.0.0.1",)   # literals skip DNS
        assert "10.0.0.1" not in calls
    finally:
        resolver.close()


def test_prefetch_fills_the_cache_without_waiting() -> None:
    slow = SlowLookup()
    resolver = Resolver(ManualClock(), getaddrinfo=slow, timeout_s=2.0)
    try:
        t0 = time.monotonic()
        resolver.prefetch("pre.example")
        # a prefetch that waited would block for the whole 2 s timeout (the lookup is held);
        # a bound of half that cannot be missed by a loaded machine's scheduling delays
        assert time.monotonic() - t0 < 1.0
        slow.release.set()
        assert resolver.resolve("pre.example") == ("127.0.0.1",)
        assert slow.calls == ["pre.example"]
    finally:
        resolver.close()


@pytest.mark.parametrize("kwargs", [{"timeout_s": 0}, {"threads": 0}, {"max_entries": 0}])
def test_bad_resolver_settings_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="Resolver needs"):
        Resolver(ManualClock(), **kwargs)  # type: ignore[arg-type]
