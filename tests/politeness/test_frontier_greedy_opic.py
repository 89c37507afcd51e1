"""Greedy discovery with the crawl's own OPIC cash (000 §2, DESIGN.md §5 "Greedy selection
orders discovery"): the frontier takes the queued unread page holding the most cash now,
although the virtual page's handouts raise every page's cash between the moment a page is
queued and the moment it is taken; and among ready hosts the one whose head holds the most
cash goes first, also after its head left or a richer page arrived."""

from __future__ import annotations

import numpy as np

from xyro.clock import ManualClock
from xyro.crawl.admission import Source
from xyro.crawl.cash_queue import CashQueue
from xyro.crawl.frontier import BACKGROUND, DISCOVERY, Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.opic_online import OnlineOpic
from xyro.net.robots import RobotsCache

T0 = 1_700_000_000.0


def _power_law_links(n: int, degree: int, seed: int) -> dict[int, np.ndarray]:
    """Every page links to ``degree`` pages, popular ones (low ids) far more often."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n + 1) ** 0.9
    weights /= weights.sum()
    return {i: rng.choice(n, degree, p=weights) for i in range(n)}


def _crawl_misorders(hosts: str, fetches: int) -> int:
    """Crawl a power-law web spread over ``hosts`` through a real Frontier keyed by the
    crawl's OPIC cash (as app.build_crawler wires it), each fetch an OPIC visit whose links
    are submitted as the crawler does; count the pages taken while a queued unread page
    held more cash."""
    links = _power_law_links(2000, 8, seed=4)

    def url(i: int) -> str:
        return f"http://{hosts[i % len(hosts)]}.org/{i}"
    opic = OnlineOpic(focus=None)
    clock = ManualClock(T0)
    robots = RobotsCache("XyroBot", clock)
    for h in hosts:
        robots.store(f"http://{h}.org", 404, None, clock.now())
    frontier = Frontier(HostScheduler(0.0, clock), robots, clock, cash=opic.cash)
    frontier.submit(Source.DISCOVERY, [url(0)], BACKGROUND)
    wrong = 0
    for _ in range(fetches):
        item = frontier.pop()
        assert item is not None and item.kind == "fetch"
        queued = [row[0] for row in frontier.rows()]
        if queued and opic.cash(item.url) < max(map(opic.cash, queued)) * (1 - 1e-9):
            wrong += 1
        kids = [url(int(j)) for j in links[int(item.url.rsplit("/", 1)[1])]]
        opic.visit(item.url, kids)
        frontier.done(item)
        frontier.submit(Source.DISCOVERY, kids, BACKGROUND)
    return wrong


def test_one_host_takes_the_queued_page_with_the_most_cash_now() -> None:
    assert _crawl_misorders("a", 500) == 0


def test_among_hosts_the_page_taken_holds_the_most_cash_now() -> None:
    assert _crawl_misorders("abc", 500) == 0


def test_the_greedy_key_stays_put_when_v_hands_out_its_cash() -> None:
    opic = OnlineOpic(focus=None)
    opic.visit("http://a.org/0", ["http://a.org/1", "http://a.org/2"])
    opic.visit("http://a.org/1", ["http://a.org/3"])
    key, cash = opic.cash.key("http://a.org/2"), opic.cash("http://a.org/2")
    for step in range(40):  # page 2 gains nothing but V's shares: V flushes many times
        opic.visit(f"http://a.org/{3 + step}", [f"http://a.org/{4 + step}"])
    assert opic.cash("http://a.org/2") > 1.1 * cash  # V raised its cash...
    assert abs(opic.cash.key("http://a.org/2") - key) <= 1e-15  # ...not its key
    pages = [f"http://a.org/{k}" for k in range(40)]
    by_cash = sorted(pages, key=lambda u: (-opic.cash(u), u))
    assert sorted(pages, key=lambda u: (-opic.cash.key(u), u)) == by_cash
    unknown = opic.cash.key("http://never.example/")  # cash 0.0: the same common shift
    assert abs(unknown - (opic.cash.key("http://a.org/2") - opic.cash("http://a.org/2"))) <= 1e-15


def test_a_cash_queue_keyed_by_the_crawl_opic_pops_the_richest_page() -> None:
    class Item:
        def __init__(self, url: str) -> None:
            self.url = url
    links = _power_law_links(1000, 6, seed=9)
    opic = OnlineOpic(focus=None)
    queue = CashQueue(opic.cash)
    queued: dict[str, Item] = {}
    visited: set[str] = set()

    def offer(u: str) -> None:
        if u in queued:
            queue.rekey(queued[u], lambda it: queued.get(it.url) is it)
        elif u not in visited:
            queued[u] = Item(u)
            queue.append(queued[u])
    offer("0")
    wrong = 0
    for _ in range(400):
        it = queue.popleft()
        while queued.get(it.url) is not it:
            it = queue.popleft()
        del queued[it.url]
        if queued and opic.cash(it.url) < max(map(opic.cash, queued)) * (1 - 1e-9):
            wrong += 1
        visited.add(it.url)
        kids = [str(int(j)) for j in links[int(it.url)]]
        opic.visit(it.url, kids)
        for k in kids:
            offer(k)
    assert wrong == 0


def _three_ready_hosts(cash: dict[str, float]) -> tuple[Frontier, ManualClock]:
    """A frontier keyed by ``cash`` whose hosts are all in its ready heap after one pop
    (c.org's page, the richest, taken)."""
    clock = ManualClock(T0)
    robots = RobotsCache("XyroBot", clock)
    for origin in ("http://a.org", "http://b.org:8080", "https://b.org:8080", "http://c.org"):
        robots.store(origin, 404, None, clock.now())
    frontier = Frontier(HostScheduler(1.0, clock), robots, clock,
                        cash=lambda url: cash.get(url, 0.0))
    frontier.submit(Source.DISCOVERY, list(cash), DISCOVERY)
    first = frontier.pop()
    assert first is not None and first.url == "http://c.org/top"
    return frontier, clock


def test_a_ready_host_whose_rich_head_was_drained_waits_behind_richer_hosts() -> None:
    cash = {"http://c.org/top": 2.0, "https://b.org:8080/rich": 0.9,
            "http://b.org:8080/poor": 0.05, "http://a.org/mid": 0.5}
    frontier, _ = _three_ready_hosts(cash)
    drained = frontier.drain_origin("https://b.org:8080", "b.org:8080")
    assert [i.url for i in drained] == ["https://b.org:8080/rich"]
    got = frontier.pop()
    assert got is not None and got.url == "http://a.org/mid"


def test_a_ready_host_that_gets_a_richer_page_goes_first() -> None:
    cash = {"http://c.org/top": 2.0, "http://b.org:8080/poor": 0.05, "http://a.org/mid": 0.5}
    frontier, _ = _three_ready_hosts(cash)
    cash["http://b.org:8080/new"] = 0.95
    frontier.submit(Source.DISCOVERY, ["http://b.org:8080/new"], DISCOVERY)
    got = frontier.pop()
    assert got is not None and got.url == "http://b.org:8080/new"
