"""The frontier (xyro/crawl/frontier.py): priority levels, per-host FIFO, dedupe, robots first, reload."""

from __future__ import annotations

import heapq
import random
from collections import defaultdict

import pytest

from xyro.clock import ManualClock
from xyro.crawl.frontier import BACKGROUND, DISCOVERY, LOADER, REFRESH, URGENT, Frontier
from xyro.crawl.frontier_queues import FrontierItem
from xyro.crawl.hosts import HostScheduler, PolitenessError
from xyro.net.robots import RobotsCache


def allow_all(robots: RobotsCache, clock: ManualClock, *origins: str) -> None:
    for origin in origins:
        robots.store(origin, 404, None, clock.now())


def drain(frontier: Frontier, clock: ManualClock, step: float = 1.0, limit: int = 10_000) -> list[FrontierItem]:
    """Pop everything, finishing each request at once and moving time as the frontier asks."""
    out = []
    for _ in range(limit):
        item = frontier.pop(clock.now())
        if item is None:
            t = frontier.next_ready_time()
            if t is None:
                return out
            clock.set(max(clock.now(), t))
            continue
        out.append(item)
        frontier.done(item)
    raise AssertionError("frontier did not drain")


def test_robots_first_then_fifo_with_delay(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    for p in ["a", "b", "c"]:
        assert frontier.push(f"http://h.org/{p}", REFRESH)
    first = frontier.pop()
    assert first is not None and first.kind == "robots"
    assert first.url == "http://h.org/robots.txt" and first.host == "h.org"
    assert frontier.pop() is None                          # host busy with its robots.txt
    robots.store(first.origin, 200, b"User-agent: *\nDisallow:\n", clock.now())
    frontier.done(first)
    assert frontier.pop() is None                          # 1 s delay between starts
    clock.advance(1.0)
    got = [i.url for i in drain(frontier, clock)]
    assert got == ["http://h.org/a", "http://h.org/b", "http://h.org/c"]
    assert len(frontier) == 0 and frontier.hosts_waiting == 0


def test_robots_per_origin(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    frontier.push("http://h.org/a", URGENT)
    frontier.push("https://h.org/b", URGENT)
    items = []
    while (item := frontier.pop(clock.now())) is not None or frontier.next_ready_time() is not None:
        if item is None:
            clock.set(frontier.next_ready_time())
            continue
        items.append(item)
        if item.kind == "robots":
            robots.store(item.origin, 404, None, clock.now())
        frontier.done(item)
    assert [(i.kind, i.url) for i in items] == [
        ("robots", "http://h.org/robots.txt"), ("fetch", "http://h.org/a"),
        ("robots", "https://h.org/robots.txt"), ("fetch", "https://h.org/b")]


def test_priority_order_across_hosts(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    allow_all(robots, clock, *(f"http://h{i}.org" for i in range(5)))
    frontier.push("http://h0.org/bg", BACKGROUND)
    frontier.push("http://h1.org/disc", DISCOVERY)
    frontier.push("http://h2.org/ref", REFRESH)
    frontier.push("http://h3.org/urgent", URGENT)
    frontier.push("http://h4.org/dtd", LOADER)
    assert frontier.sizes() == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}
    got = [frontier.pop().url for _ in range(5)]
    assert got == ["http://h4.org/dtd", "http://h3.org/urgent", "http://h2.org/ref",
                   "http://h1.org/disc", "http://h0.org/bg"]


def test_a_host_competes_with_its_best_level(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    allow_all(robots, clock, "http://a.org", "http://b.org", "http://c.org")
    for i in range(3):
        frontier.push(f"http://a.org/bg{i}", BACKGROUND)
    frontier.push("http://b.org/disc", DISCOVERY)
    assert frontier.pop().url == "http://b.org/disc"      # a.org waits in the ready heap at level 4
    frontier.push("http://a.org/dtd", LOADER)              # ... and moves up
    frontier.push("http://c.org/urgent", URGENT)
    assert frontier.pop().url == "http://a.org/dtd"
    assert frontier.pop().url == "http://c.org/urgent"


def test_loader_priority_first_globally_within_politeness(frontier: Frontier, robots: RobotsCache,
                                                          clock: ManualClock) -> None:
    allow_all(robots, clock, *(f"http://h{i}.org" for i in range(50)), "http://dtd.org")
    for i in range(50):
        for j in range(5):
            frontier.push(f"http://h{i}.org/{j}", BACKGROUND)
    first = [frontier.pop() for _ in range(10)]
    frontier.push("http://dtd.org/x.dtd", LOADER)
    assert frontier.pop().url == "http://dtd.org/x.dtd"    # before 40 ready level-4 hosts
    for item in first:
        frontier.done(item)
    # A LOADER item on a host that is still throttled waits for the host, not for the others.
    frontier.push("http://h0.org/y.dtd", LOADER)
    while (item := frontier.pop()) is not None:
        assert item.host != "h0.org"
        frontier.done(item)
    clock.advance(1.0)
    assert frontier.pop().url == "http://h0.org/y.dtd"


def test_dedupe_and_moving_up(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    allow_all(robots, clock, "http://h.org")
    assert frontier.push("http://h.org/a", DISCOVERY)
    assert not frontier.push("http://h.org/a", DISCOVERY)
    assert not frontier.push("http://h.org/a", BACKGROUND)
    assert frontier.push("http://h.org/b", DISCOVERY)
    assert frontier.push("http://h.org/a", URGENT)          # a DTD the loader needs now
    assert frontier.sizes() == {0: 0, 1: 1, 2: 0, 3: 1, 4: 0} and len(frontier) == 2
    assert "http://h.org/a" in frontier
    got = [i.url for i in drain(frontier, clock)]
    assert got == ["http://h.org/a", "http://h.org/b"]     # once each, a first


def test_in_progress_is_not_queued_again(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    allow_all(robots, clock, "http://h.org")
    frontier.push("http://h.org/a", REFRESH)
    item = frontier.pop()
    assert frontier.in_progress == 1 and "http://h.org/a" in frontier
    assert not frontier.push("http://h.org/a", LOADER)
    frontier.done(item)
    assert frontier.push("http://h.org/a", REFRESH)
    with pytest.raises(ValueError, match="not in progress"):
        frontier.done(item)


def test_disallowed_items_take_no_request_slot(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    robots.store("http://h.org", 200, b"User-agent: *\nDisallow: /private\n", clock.now())
    frontier.push("http://h.org/private/1", REFRESH)
    frontier.push("http://h.org/public", REFRESH)
    blocked = frontier.pop()
    assert blocked.kind == "disallowed" and blocked.url == "http://h.org/private/1"
    frontier.done(blocked)                                  # harmless
    ok = frontier.pop()
    assert ok.kind == "fetch" and ok.url == "http://h.org/public"
    assert frontier.hosts.in_flight("h.org") == 1


def test_unreachable_robots_defers_the_host(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    frontier.push("http://h.org/a", REFRESH)
    r = frontier.pop()
    robots.store(r.origin, 503, None, clock.now())
    frontier.done(r, error=True)
    clock.advance(599)                                      # retry interval is 600 s
    assert frontier.pop() is None
    assert frontier.next_ready_time() == pytest.approx(clock.now() + 1)
    clock.advance(1)
    again = frontier.pop()
    assert again.kind == "robots"                          # asks robots.txt again, nothing else
    robots.store(again.origin, 200, b"", clock.now())
    frontier.done(again)
    clock.advance(1)
    assert frontier.pop().url == "http://h.org/a"


def test_crawl_delay_spaces_the_host(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    for i in range(3):
        frontier.push(f"http://h.org/{i}", REFRESH)
    r = frontier.pop()
    robots.store(r.origin, 200, b"User-agent: xyrobot\nCrawl-delay: 7\n", clock.now())
    t0 = clock.now()
    frontier.done(r)
    starts = []
    while len(starts) < 3:
        item = frontier.pop()
        if item is None:
            clock.set(frontier.next_ready_time())
            continue
        starts.append(clock.now() - t0)
        frontier.done(item)
    assert starts == [7.0, 14.0, 21.0]


def test_not_before_and_requeue(frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    allow_all(robots, clock, "http://h.org")
    t = clock.now()
    frontier.push("http://h.org/later", REFRESH, not_before=t + 50)
    frontier.push("http://h.org/now", REFRESH)
    assert len(frontier) == 2
    item = frontier.pop()
    assert item.url == "http://h.org/now"
    assert frontier.requeue(item, not_before=t + 100, retry_after_s=30)
    assert frontier.pop(t + 49) is None
    assert frontier.next_ready_time() == t + 50
    assert frontier.pop(t + 50).url == "http://h.org/later"
    frontier.done(frontier._in_progress["http://h.org/later"], now=t + 50)
    assert frontier.pop(t + 99) is None
    assert frontier.pop(t + 100).url == "http://h.org/now"


def test_rows_and_reload(hosts: HostScheduler, robots: RobotsCache, clock: ManualClock) -> None:
    first = Frontier(hosts, robots, clock)
    rows = [("http://a.org/1", 3, 2, 0.0), ("http://a.org/2", 3, 2, 0.0), ("http://b.org/x", 0, 1, 0.0),
            ("http://c.org/later", 2, 0, clock.now() + 500), ("http://a.org/1", 3, 2, 0.0)]
    assert first.load(rows) == 4                           # the duplicate row is ignored
    assert sorted(first.rows()) == sorted(rows[:4])
    again = Frontier(HostScheduler(1.0, clock), robots, clock)
    again.load(first.rows())
    assert again.sizes() == first.sizes() == {0: 1, 1: 0, 2: 1, 3: 2, 4: 0}
    allow_all(robots, clock, "http://a.org", "http://b.org", "http://c.org")
    got = drain(again, clock)
    assert [i.url for i in got] == ["http://b.org/x", "http://a.org/1", "http://a.org/2", "http://c.org/later"]
    assert [i.depth for i in got] == [1, 2, 2, 0]


@pytest.mark.parametrize("row", [("http://a.org/", "high", 0, 0), ("mailto:x@y", 1, 0, 0), ("http://a/",),
                                 ("http://a.org/", 7, 0, 0)])
def test_bad_rows_are_clear_errors(frontier: Frontier, row: tuple) -> None:
    with pytest.raises(ValueError, match="frontier row 0"):
        frontier.load([row])


def test_bad_push_is_a_clear_error(frontier: Frontier) -> None:
    with pytest.raises(ValueError, match="priority must be an int in 0..4"):
        frontier.push("http://a.org/", 5)
    with pytest.raises(ValueError, match="not an http"):
        frontier.push("javascript:alert(1)", 1)


def crawl(enforce: bool, n_hosts: int = 200, pages: int = 3000, workers: int = 20, seed: int = 1):
    """An engine over the frontier on a manual clock; returns the request log per host."""
    clock = ManualClock(1_700_000_000.0)
    robots = RobotsCache("XyroBot", clock, max_crawl_delay_s=30)
    frontier = Frontier(HostScheduler(1.0, clock, enforce=enforce), robots, clock)
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(n_hosts)]
    for k in range(pages):
        h = rng.choices(range(n_hosts), weights)[0]
        frontier.push(f"http://h{h}.org/p{k}", rng.randrange(5))
    log: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    running: list[tuple[float, int, FrontierItem, float]] = []
    seq = 0
    while len(frontier) or running:
        now = clock.now()
        while len(running) < workers and (item := frontier.pop(now)) is not None:
            if item.kind == "disallowed":
                continue
            heapq.heappush(running, (now + rng.expovariate(1 / 0.2), seq, item, now))
            seq += 1
        times = [running[0][0]] if running else []
        t = frontier.next_ready_time()
        if t is not None and len(running) < workers:
            times.append(max(t, now))
        clock.set(max(now, min(times)))
        while running and running[0][0] <= clock.now():
            end, _, item, start = heapq.heappop(running)
            log[item.host].append((start, end, item.url))
            if item.kind == "robots":
                h = int(item.host[1:].split(".")[0])
                body = b"User-agent: *\nCrawl-delay: 2\nDisallow: /p1\n" if h % 3 == 0 else b""
                robots.store(item.origin, 200, body, end)
            frontier.done(item, now=end)
    return log


@pytest.mark.parametrize("enforce", [True, False])
def test_simulated_crawl_is_polite_only_when_enforced(enforce: bool) -> None:
    log = crawl(enforce)
    overlaps = short = 0
    for host, reqs in log.items():
        reqs.sort()
        assert reqs[0][2].endswith("/robots.txt")          # robots.txt before anything else
        h = int(host[1:].split(".")[0])
        gap = 2.0 if h % 3 == 0 else 1.0
        assert not any(url.startswith(f"http://{host}/p1") for _, _, url in reqs[1:] if gap == 2.0)
        for (s0, e0, _), (s1, _, _) in zip(reqs, reqs[1:]):
            overlaps += s1 < e0
            short += s1 - s0 < gap - 1e-9
    if enforce:
        assert (overlaps, short) == (0, 0)
    else:
        assert overlaps > 50 and short > 100


def test_politeness_error_when_the_engine_starts_a_busy_host(frontier: Frontier, clock: ManualClock) -> None:
    frontier.push("http://h.org/a", REFRESH)
    frontier.pop()
    with pytest.raises(PolitenessError):
        frontier.hosts.start("h.org", clock.now())


@pytest.mark.parametrize("seed", range(5))
def test_random_operations_keep_the_books(seed: int) -> None:
    """Random pushes (with moves up a level and delays), pops, dones and requeues: every URL
    comes out exactly once per time it was queued, counts always match, nothing is lost."""
    rng = random.Random(seed)
    clock = ManualClock(1_700_000_000.0)
    robots = RobotsCache("XyroBot", clock)
    frontier = Frontier(HostScheduler(0.5, clock), robots, clock)
    for h in range(8):
        robots.store(f"http://h{h}.org", 200, b"User-agent: *\nDisallow: /no\n", clock.now())
    queued: dict[str, int] = {}  # url → level, our own books
    running: list[FrontierItem] = []
    popped: list[str] = []
    for _ in range(3000):
        op = rng.random()
        if op < 0.45:
            url = f"http://h{rng.randrange(8)}.org/{rng.choice(['p', 'no'])}{rng.randrange(60)}"
            level = rng.randrange(5)
            delay = rng.choice([0.0, 0.0, rng.uniform(0, 20)])
            added = frontier.push(url, level, 0, clock.now() + delay if delay else 0.0)
            in_progress = any(i.url == url for i in running)
            expect = not in_progress and (url not in queued or level < queued[url])
            assert added == expect
            if added:
                queued[url] = level
        elif op < 0.8:
            item = frontier.pop()
            if item is not None:
                assert item.kind in ("fetch", "disallowed")
                assert queued.pop(item.url) == item.priority
                if item.kind == "fetch":
                    running.append(item)
                    popped.append(item.url)
                else:
                    assert "/no" in item.url
        elif running:
            item = running.pop(rng.randrange(len(running)))
            if rng.random() < 0.2:
                assert frontier.requeue(item, clock.now() + 5)
                queued[item.url] = item.priority
            else:
                frontier.done(item)
        clock.advance(rng.uniform(0, 0.3))
        assert len(frontier) == len(queued)
        assert sum(frontier.sizes().values()) == len(queued)
        assert frontier.in_progress == len(running)
        assert all(frontier.hosts.in_flight(f"h{h}.org") <= 1 for h in range(8))
    for item in running:
        frontier.done(item)
    rest = drain(frontier, clock)
    assert sorted(i.url for i in rest) == sorted(queued)
    assert len(frontier) == 0 and frontier.hosts_waiting == 0 and frontier.next_ready_time() is None


def test_servable_counts_what_each_hosts_politeness_lets_start_before_a_time(
        frontier: Frontier, hosts: HostScheduler, robots: RobotsCache, clock: ManualClock) -> None:
    """The unit budget's question at the end of a unit (xyro.crawl.unit_budget)."""
    t0 = clock.now()
    allow_all(robots, clock, "http://a.example", "http://b.example", "http://c.example")
    for i in range(6):
        frontier.push(f"http://a.example/{i}", REFRESH)  # one host: one start per second
    frontier.push("http://b.example/0", REFRESH)
    frontier.push("http://b.example/1", REFRESH, not_before=t0 + 2.5)  # counted once due
    frontier.push("http://c.example/0", DISCOVERY)  # another level: not counted
    assert frontier.servable(REFRESH, t0 + 3.5, cap=100, now=t0) == 4 + 1
    assert frontier.servable(REFRESH, t0 + 3.5, cap=3, now=t0) == 3  # stops at the cap
    assert frontier.servable(REFRESH, t0 + 100, cap=100, now=t0) == 6 + 1
    item = frontier.pop(t0, max_level=REFRESH)  # a.example starts: its next start is t0 + 1
    assert item is not None and item.host == "a.example"
    assert frontier.servable(REFRESH, t0 + 3.5, cap=100, now=t0) == 3 + 1
    clock.set(t0 + 3.0)
    frontier.done(item)
    # b.example/1 is due now and a.example's next start is at t0 + 3: 1 + 2 from 3.0 to 4.5
    assert frontier.servable(REFRESH, t0 + 4.5, cap=100, now=t0 + 3.0) == 2 + 2
    hosts.set_crawl_delay("a.example", 10.0)
    assert frontier.servable(REFRESH, t0 + 4.5, cap=100, now=t0 + 3.0) == 0 + 2
    assert frontier.servable(REFRESH, t0 + 3.0, cap=100, now=t0 + 3.0) == 0
    clock.set(t0 + 100)
    assert len(drain(frontier, clock)) == 5 + 2 + 1  # the DISCOVERY page too
    assert frontier.servable(REFRESH, clock.now() + 1000, cap=100) == 0


def test_two_origins_of_one_host_each_get_their_crawl_delay(
        frontier: Frontier, robots: RobotsCache, clock: ManualClock) -> None:
    """http://h:8080 and https://h:8080 are one politeness host with two robots.txt: the
    https one asks no Crawl-delay, the http one 10 s. A fetch of the http origin waits its
    10 s after the host's last request, whichever origin that was, and nothing raises."""
    bodies = {"http://h.test:8080": b"User-agent: *\nCrawl-delay: 10\n",
              "https://h.test:8080": b"User-agent: *\nAllow: /\n"}
    for url in ("http://h.test:8080/a1", "https://h.test:8080/b1", "http://h.test:8080/a2",
                "https://h.test:8080/b2"):
        frontier.push(url, URGENT)
    starts: list[tuple[float, str]] = []
    while (ready := frontier.next_ready_time()) is not None:
        clock.set(max(ready, clock.now()))
        item = frontier.pop(clock.now())
        if item is None:
            continue
        starts.append((clock.now(), item.url))
        clock.advance(0.1)
        if item.kind == "robots":
            robots.store(item.origin, 200, bodies[item.origin], clock.now())
        frontier.done(item, now=clock.now())
    fetched = [url for _, url in starts if not url.endswith("robots.txt")]
    assert sorted(fetched) == sorted(["http://h.test:8080/a1", "https://h.test:8080/b1",
                                      "http://h.test:8080/a2", "https://h.test:8080/b2"])
    for (before, _), (at, url) in zip(starts, starts[1:]):
        delay = 10.0 if url.startswith("http:") and not url.endswith("robots.txt") else 1.0
        assert at - before >= delay - 1e-9, (url, at - before)


def test_a_stop_ends_a_long_restore_early(frontier: Frontier) -> None:
    # A SIGTERM while millions of queued URLs are restored: the restore stops within
    # RESTORE_CHECK rows (the rest stay in the store's frontier for the next start).
    import threading

    from xyro.crawl.frontier import RESTORE_CHECK

    stop = threading.Event()
    read = 0

    def rows(n: int):  # type: ignore[no-untyped-def]
        nonlocal read
        for i in range(n):
            read += 1
            if i == 5:
                stop.set()   # the signal arrives while the rows are read
            yield (f"http://h{i % 50}.example/p{i}", 3, 1, 0.0)

    restored = frontier.restore(rows(10 * RESTORE_CHECK), [], stop=stop)
    assert read == RESTORE_CHECK and restored.queued == 0   # one chunk read, none queued


def test_a_restore_reports_its_progress_and_fills_the_seen_set(frontier: Frontier) -> None:
    # Each chunk of known URLs and of queued rows is reported (the start logs it: a restore
    # of millions takes minutes), and every URL of both ends in the seen-set.
    from xyro.crawl.frontier import RESTORE_CHECK

    known = [f"http://k{i % 7}.example/old{i}" for i in range(RESTORE_CHECK + 3)]
    rows = [(f"http://h{i % 50}.example/p{i}", 3, 1, 0.0) for i in range(2 * RESTORE_CHECK)]
    calls: list[tuple[str, int]] = []
    restored = frontier.restore(rows, known, progress=lambda *call: calls.append(call))
    assert calls == [("known", RESTORE_CHECK), ("known", RESTORE_CHECK + 3),
                     ("queued", RESTORE_CHECK), ("queued", 2 * RESTORE_CHECK)]
    assert restored.queued == 2 * RESTORE_CHECK
    assert len(frontier.seen) == len(known) + len(rows)
    assert all(url in frontier.seen for url in known[::97] + [row[0] for row in rows[::97]])
