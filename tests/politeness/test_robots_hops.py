"""The gate of robots.txt redirects to other hosts (xyro.crawl.robots_hops; RFC 9309
§2.3.1.2): a hop takes the other host's politeness slot if it is free, and a fetch that
found it busy is asked for again at its next allowed start."""

from __future__ import annotations

import threading

import pytest

from xyro.clock import ManualClock
from xyro.crawl.hosts import HostScheduler, PolitenessError
from xyro.crawl.robots_hops import MIN_BUSY_WAIT_S, RobotsHops
from xyro.net.urls import Scope

ORIGIN = "http://a.example/robots.txt"
CDN = "http://cdn.example/a/robots.txt"


@pytest.fixture
def parts() -> tuple[RobotsHops, HostScheduler, ManualClock]:
    clock = ManualClock()
    hosts = HostScheduler(5.0, clock)
    scope = Scope(denied_domains=["denied.example"])
    return RobotsHops(hosts, scope, clock, threading.Lock()), hosts, clock


def test_a_free_host_is_borrowed_for_the_hop_and_keeps_its_delay_after(parts) -> None:
    hops, hosts, clock = parts
    assert hops.gate(ORIGIN, "https://a.example/robots.txt") is None   # same host: no borrow
    assert hosts.in_flight("cdn.example") == 0
    assert hops.gate(ORIGIN, CDN) is None
    assert hosts.in_flight("cdn.example") == 1
    with pytest.raises(PolitenessError):   # the dispatcher cannot start it meanwhile
        hosts.start("cdn.example")
    assert hops.gate(ORIGIN, "http://cdn.example/b/robots.txt") is None   # held already
    clock.advance(1.0)
    assert hops.settle(ORIGIN, clock.now()) is None
    assert hosts.in_flight("cdn.example") == 0
    assert hosts.next_allowed("cdn.example") == clock.now() - 1.0 + 5.0   # delay from the hop


def test_a_busy_host_defers_the_robots_txt_to_its_next_allowed_start(parts) -> None:
    hops, hosts, clock = parts
    assert hops.gate(ORIGIN, CDN) is None
    other = "http://b.example/robots.txt"
    reason = hops.gate(other, CDN)
    assert reason is not None and "busy" in reason
    assert hops.settle(ORIGIN, clock.now()) is None              # frees the CDN at t0 + 5
    assert hops.settle(other, clock.now()) == clock.now() + MIN_BUSY_WAIT_S
    assert hops.gate(other, CDN) is not None   # within the CDN's delay since the first hop
    assert hops.settle(other, clock.now()) == clock.now() + 5.0
    clock.advance(5.0)
    assert hops.gate(other, CDN) is None


def test_a_denied_host_is_never_borrowed(parts) -> None:
    hops, hosts, clock = parts
    reason = hops.gate(ORIGIN, "http://x.denied.example/robots.txt")
    assert reason is not None and "denied" in reason
    assert hosts.in_flight() == 0 and hops.settle(ORIGIN, clock.now()) is None


def test_a_host_the_frontier_holds_ready_for_its_next_pop_is_busy() -> None:
    """The frontier moves every ready host to its ready heap and takes one per pop: a hop
    borrowing one of the others would make the next pop start a host in flight."""
    from xyro.crawl.frontier import Frontier
    from xyro.net.robots import RobotsCache
    clock = ManualClock()
    robots = RobotsCache("XyroTest", clock)
    frontier = Frontier(HostScheduler(1.0, clock), robots, clock)
    for origin in ("http://a.org", "http://cdn.org"):
        robots.store(origin, 404, None, clock.now())   # allow all
    frontier.push("http://a.org/1", 2)
    frontier.push("http://cdn.org/1", 2)
    first = frontier.pop()
    assert first is not None
    other = "cdn.org" if first.host == "a.org" else "a.org"
    reason = frontier.robots_hops.gate("http://x.org/robots.txt", f"http://{other}/robots.txt")
    assert reason is not None and "busy" in reason
    second = frontier.pop()
    assert second is not None and second.host == other


def test_a_borrowed_hop_leaves_the_host_s_back_off_as_it_was(parts) -> None:
    hops, hosts, clock = parts
    for _ in range(3):   # the CDN failed three times in a row: backed off 120 s
        clock.advance(3600.0)
        hosts.start("cdn.example")
        hosts.finish("cdn.example", error=True)
    assert hosts.errors("cdn.example") == 3
    clock.advance(3600.0)
    assert hops.gate(ORIGIN, CDN) is None
    hops.settle(ORIGIN, clock.now())
    assert hosts.errors("cdn.example") == 3   # a fourth failure still backs off 240 s
    assert hosts.next_allowed("cdn.example") == clock.now() + 5.0


def test_a_restored_pause_is_never_longer_than_this_process_would_pause(parts) -> None:
    _, hosts, clock = parts
    year = 365 * 86_400.0
    hosts.resume("a.example", clock.now() - 10.0, paused_until=clock.now() + year)
    assert hosts.next_allowed("a.example") == clock.now() + max(hosts.max_retry_after_s,
                                                                 hosts.backoff_cap_s)
