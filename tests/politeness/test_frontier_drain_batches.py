"""Draining an origin given up on, batch by batch (FrontierQueues.drain_origin with a
limit): each of its items comes out once, the host's other origin keeps its items, and a
batch smaller than the limit says none is left. Real queues and robots cache, ManualClock."""

from __future__ import annotations

from xyro.clock import ManualClock
from xyro.crawl.frontier_queues import FrontierQueues
from xyro.crawl.hosts import HostScheduler
from xyro.net.robots import RobotsCache


def test_an_origin_drains_in_batches_and_the_hosts_other_origin_keeps_its_items() -> None:
    clock = ManualClock()
    queues = FrontierQueues(HostScheduler(0, clock), RobotsCache("XyroBot", clock), clock)
    dead = [f"http://a.org/{i}" for i in range(7)]
    alive = [f"https://a.org/{i}" for i in range(5)]   # the same host, another origin
    for i in range(7):
        queues.push(dead[i], 3)
        if i < 5:
            queues.push(alive[i], 3 if i % 2 else 1)
    batches = []
    while True:
        batch = queues.drain_origin("http://a.org", "a.org", 3)
        batches.append([item.url for item in batch])
        if len(batch) < 3:
            break
    assert [len(b) for b in batches] == [3, 3, 1]
    assert sorted(u for b in batches for u in b) == sorted(dead)
    assert len(queues) == len(alive) and all(u in queues for u in alive)
    assert queues.drain_origin("http://a.org", "a.org", 3) == []
    queues.robots.store("https://a.org", 404, None, clock.now())
    taken = []
    while (item := queues.pop()) is not None:
        taken.append(item.url)
        queues.done(item)
        clock.advance(1.0)
    assert sorted(taken) == sorted(alive) and taken[:2] == [alive[0], alive[2]]
