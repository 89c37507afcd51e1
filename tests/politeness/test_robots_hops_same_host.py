"""robots.txt redirect hops to a host the fetch asked already (xyro.crawl.robots_hops;
DESIGN.md §7): each is another request to that host, so it waits the host's delay since
that host's last answer, stop-aware; and hop targets are read as canonical URLs, so an
address spelled otherwise is the same host and a host no URL may have is not followed."""

from __future__ import annotations

import threading

import pytest

from xyro.clock import ManualClock
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.robots_hops import RobotsHops
from xyro.net.urls import Scope

FIRST = "http://a.example/robots.txt"
DELAY_S = 5.0


@pytest.fixture
def parts() -> tuple[RobotsHops, HostScheduler, ManualClock]:
    """The gate of a robots.txt fetch of a.example in flight (its slot started)."""
    clock = ManualClock()
    hosts = HostScheduler(DELAY_S, clock)
    hosts.start("a.example")
    return RobotsHops(hosts, Scope(), clock, threading.Lock()), hosts, clock


def test_a_hop_on_the_fetch_s_own_host_waits_its_delay_after_each_answer(parts) -> None:
    hops, hosts, clock = parts
    t0 = clock.now()
    assert hops.gate(FIRST, "https://a.example/robots.txt") is None   # http to https
    assert clock.now() == t0 + DELAY_S
    clock.advance(0.25)   # the answer to that hop takes a while
    assert hops.gate(FIRST, "https://a.example/rules.txt") is None
    assert clock.now() == t0 + 0.25 + 2 * DELAY_S
    assert hosts.in_flight("a.example") == 1 and hops.settle(FIRST, clock.now()) is None


def test_the_wait_is_the_host_s_crawl_delay_when_longer(parts) -> None:
    hops, hosts, clock = parts
    hosts.set_crawl_delay("a.example", 8.0)
    t0 = clock.now()
    assert hops.gate(FIRST, "http://a.example/r1") is None
    assert clock.now() == t0 + 8.0


def test_a_stop_ends_the_wait_and_the_origin_asks_again_later(parts) -> None:
    hops, hosts, clock = parts
    stop = threading.Event()
    stop.set()
    hops.watch(stop)
    t0 = clock.now()
    reason = hops.gate(FIRST, "http://a.example/r1")
    assert reason is not None and "stopping" in reason
    assert clock.now() == t0   # no request: the fetch ends at the hop
    assert hops.settle(FIRST, clock.now()) == t0 + DELAY_S   # its URLs wait, queued


def test_a_borrowed_host_asked_again_waits_and_counts_its_next_delay_from_then(parts) -> None:
    hops, hosts, clock = parts
    t0 = clock.now()
    assert hops.gate(FIRST, "http://cdn.example/a/robots.txt") is None   # borrowed at t0
    clock.advance(0.5)
    assert hops.gate(FIRST, "http://cdn.example/b/robots.txt") is None
    second = t0 + 0.5 + DELAY_S
    assert clock.now() == second and hosts.in_flight("cdn.example") == 1
    clock.advance(0.1)
    assert hops.settle(FIRST, clock.now()) is None
    assert hosts.in_flight("cdn.example") == 0
    assert hosts.next_allowed("cdn.example") == second + DELAY_S   # not t0 + DELAY_S


def test_a_hop_back_home_after_another_host_waits_from_home_s_answer(parts) -> None:
    hops, hosts, clock = parts
    t0 = clock.now()
    assert hops.gate(FIRST, "http://cdn.example/robots.txt") is None
    clock.advance(1.0)
    assert hops.gate(FIRST, "http://a.example/final.txt") is None
    assert clock.now() == t0 + DELAY_S   # home answered at t0


def test_no_wait_when_the_rules_are_switched_off() -> None:
    clock = ManualClock()
    hosts = HostScheduler(DELAY_S, clock, enforce=False)
    hops = RobotsHops(hosts, Scope(), clock, threading.Lock())
    t0 = clock.now()
    assert hops.gate(FIRST, "http://a.example/r1") is None and clock.now() == t0


def test_an_address_spelled_otherwise_is_the_fetch_s_own_host() -> None:
    clock = ManualClock()
    hosts = HostScheduler(DELAY_S, clock)
    hosts.start("127.0.0.1:8080")
    hops = RobotsHops(hosts, Scope(), clock, threading.Lock())
    t0 = clock.now()
    assert hops.gate("http://127.0.0.1:8080/robots.txt", "http://0x7f.1:8080/r1") is None
    assert clock.now() == t0 + DELAY_S
    assert hosts.in_flight() == 1   # nothing borrowed: "0x7f.1:8080" is no other host


@pytest.mark.parametrize("target", ["http://☃.net/robots.txt", "http://*.example/robots.txt",
                                    "http://256.0.0.1/robots.txt"])
def test_a_target_that_is_no_crawlable_url_is_not_followed(parts, target: str) -> None:
    hops, hosts, clock = parts
    reason = hops.gate(FIRST, target)
    assert reason is not None and "not a URL the crawl can fetch" in reason
    assert hosts.in_flight() == 1 and hops.settle(FIRST, clock.now()) is None


def test_an_international_target_is_the_host_browsers_would_ask(parts) -> None:
    hops, hosts, clock = parts
    assert hops.gate(FIRST, "http://faß.de/robots.txt") is None
    assert hosts.in_flight("xn--fa-hia.de") == 1 and hosts.in_flight("fass.de") == 0
    hops.settle(FIRST, clock.now())
