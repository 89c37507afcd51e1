"""Greedy discovery (000 §2, DESIGN.md §5): with OPIC's cash as the key, a host's unread pages
leave highest cash first, a page that gains cash moves up, and among hosts allowed to fetch
now the one whose best unread page holds the most cash goes first; politeness still rules."""

from __future__ import annotations

from types import SimpleNamespace

from xyro.clock import ManualClock
from xyro.crawl.admission import Source
from xyro.crawl.cash_queue import CashQueue
from xyro.crawl.frontier import BACKGROUND, DISCOVERY, REFRESH, Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.net.robots import RobotsCache


def _item(url: str) -> SimpleNamespace:
    return SimpleNamespace(url=url)


def test_cash_queue_orders_by_cash_then_arrival_and_rekeys() -> None:
    cash = {"a": 0.1, "b": 0.5, "c": 0.5, "d": 0.0}
    items = {u: _item(u) for u in cash}
    q = CashQueue(cash.__getitem__)
    for u in "abcd":
        q.append(items[u])
    assert q[0].url == "b" and q.top_cash() == 0.5
    cash["d"] = 0.9
    q.rekey(items["d"], lambda it: True)
    order = []
    seen: set[int] = set()
    while len(q):
        it = q.popleft()
        if id(it) not in seen:       # the stale entry of d comes out later, and is skipped
            seen.add(id(it))
            order.append(it.url)
    assert order == ["d", "b", "c", "a"]


def test_cash_queue_compacts_repeated_entries() -> None:
    cash = {"x": 0.0, "y": 1.0}
    x, y = _item("x"), _item("y")
    q = CashQueue(cash.__getitem__, iter([x, y]))
    for k in range(1, 500):
        cash["x"] = float(k)
        q.rekey(x, lambda it: True)
    assert len(q) <= 2 * 64 + 2   # compacted: one entry per live item, doubling threshold
    assert q[0] is x and q.top_cash() == 499.0


def _frontier(cash: dict[str, float]) -> tuple[Frontier, ManualClock, RobotsCache]:
    clock = ManualClock(1_700_000_000.0)
    robots = RobotsCache("XyroBot", clock)
    frontier = Frontier(HostScheduler(1.0, clock), robots, clock,
                        cash=lambda url: cash.get(url, 0.0))
    return frontier, clock, robots


def _fetch_all(frontier: Frontier, clock: ManualClock, robots: RobotsCache, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        item = frontier.pop()
        if item is None:
            clock.advance(1.0)
            continue
        if item.kind == "robots":
            robots.store(item.origin, 404, None, clock.now())
        else:
            out.append(item.url)
        frontier.done(item)
    return out


def test_a_host_serves_its_unread_pages_by_decreasing_cash() -> None:
    cash = {f"http://a.org/{k}": w for k, w in enumerate([0.1, 0.7, 0.3, 0.0, 0.9])}
    frontier, clock, robots = _frontier(cash)
    frontier.submit(Source.DISCOVERY, list(cash), DISCOVERY)
    cash["http://a.org/3"] = 0.8          # found again from a visited page: more cash now
    frontier.submit(Source.DISCOVERY, ["http://a.org/3"], DISCOVERY)
    got = _fetch_all(frontier, clock, robots, 5)
    assert got == [f"http://a.org/{k}" for k in (4, 3, 1, 2, 0)]


def test_levels_still_come_first_and_fifo_elsewhere() -> None:
    cash = {"http://a.org/rich": 5.0, "http://a.org/poor": 0.0}
    frontier, clock, robots = _frontier(cash)
    frontier.submit(Source.DISCOVERY, ["http://a.org/rich"], BACKGROUND)
    frontier.submit(Source.DISCOVERY, ["http://a.org/poor"], DISCOVERY)
    frontier.submit(Source.REFRESH, ["http://a.org/r2", "http://a.org/r1"], REFRESH)
    got = _fetch_all(frontier, clock, robots, 4)
    assert got == ["http://a.org/r2", "http://a.org/r1", "http://a.org/poor", "http://a.org/rich"]


def test_among_ready_hosts_the_richest_head_goes_first() -> None:
    cash = {"http://a.org/x": 0.2, "http://b.org/x": 0.6, "http://c.org/x": 0.4}
    frontier, clock, robots = _frontier(cash)
    for url in cash:   # robots.txt known: every host is ready at once
        robots.store(url.rsplit("/", 1)[0], 404, None, clock.now())
    frontier.submit(Source.DISCOVERY, list(cash), DISCOVERY)
    got = [frontier.pop().url for _ in range(3)]  # type: ignore[union-attr]
    assert got == ["http://b.org/x", "http://c.org/x", "http://a.org/x"]


def test_politeness_is_kept_whatever_the_cash() -> None:
    cash = {"http://a.org/1": 0.9, "http://a.org/2": 0.8, "http://b.org/1": 0.1}
    frontier, clock, robots = _frontier(cash)
    for origin in ("http://a.org", "http://b.org"):
        robots.store(origin, 404, None, clock.now())
    frontier.submit(Source.DISCOVERY, list(cash), DISCOVERY)
    first = frontier.pop()
    assert first is not None and first.url == "http://a.org/1"
    frontier.done(first)
    second = frontier.pop()      # a.org waits out its delay: b.org's poorer page goes now
    assert second is not None and second.url == "http://b.org/1"
    frontier.done(second)
    assert frontier.pop() is None
    clock.advance(1.0)
    third = frontier.pop()
    assert third is not None and third.url == "http://a.org/2"


def test_drain_origin_returns_each_item_once_despite_repeated_entries() -> None:
    cash = {"http://a.org/1": 0.1, "http://a.org/2": 0.2}
    frontier, clock, robots = _frontier(cash)
    frontier.submit(Source.DISCOVERY, list(cash), DISCOVERY)
    for k in range(5):
        cash["http://a.org/1"] = 1.0 + k
        frontier.submit(Source.DISCOVERY, ["http://a.org/1"], DISCOVERY)
    drained = frontier.drain_origin("http://a.org", "a.org")
    assert sorted(i.url for i in drained) == sorted(cash)
    assert len(frontier) == 0
