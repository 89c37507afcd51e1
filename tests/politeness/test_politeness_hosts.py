"""The per-host politeness scheduler (xyro/crawl/hosts.py), checked by a simulated multi-worker crawl.

The simulation plays an engine on a ManualClock: W workers, H hosts that always have work,
random fetch durations, pages per host spread
like on the web (power law). Every start and end is logged like a server's request log, and the
checks read only that log. The same simulation with ``enforce=False`` must show violations,
so these tests can fail.
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from xyro.clock import ManualClock
from xyro.crawl.hosts import HostScheduler, PolitenessError

T0 = 1_700_000_000.0


@dataclass
class SimLog:
    requests: list[tuple[str, float, float]] = field(default_factory=list)  # host, start, end
    workers: int = 0

    def violations(self, min_gap: dict[str, float]) -> tuple[int, int]:
        """(overlapping requests to one host, start gaps below the host's minimum)."""
        by_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for host, start, end in self.requests:
            by_host[host].append((start, end))
        overlaps = gaps = 0
        for host, reqs in by_host.items():
            reqs.sort()
            for (s0, e0), (s1, _) in zip(reqs, reqs[1:]):
                overlaps += s1 < e0
                gaps += s1 - s0 < min_gap[host] - 1e-9
        return overlaps, gaps

    def utilization(self, share: float = 0.9) -> float:
        """Busy share of the workers until the start of the first ``share`` of the requests
        (the tail, when few hosts have work left, is throttled by design)."""
        starts = sorted(start for _, start, _ in self.requests)
        t0, t1 = starts[0], starts[int(share * len(starts))]
        busy = sum(max(0.0, min(end, t1) - start) for _, start, end in self.requests if start < t1)
        return busy / (self.workers * (t1 - t0))

    @property
    def span_s(self) -> float:
        return max(e for _, _, e in self.requests) - min(s for _, s, _ in self.requests)


def simulate(sched: HostScheduler, clock: ManualClock, work: dict[str, int], workers: int,
             seed: int, mean_fetch_s: float = 0.3) -> SimLog:
    """Play an engine: ``work[host]`` pages per host; a host leaves when it has none left."""
    rng = random.Random(seed)
    left = dict(work)
    for h in left:
        sched.want(h)
    log = SimLog(workers=workers)
    running: list[tuple[float, int, str, float]] = []  # end, seq, host, start
    seq = 0
    to_start = sum(left.values())
    while to_start or running:
        now = clock.now()
        while len(running) < workers:
            host = sched.ready_host(now)
            if host is None:
                break
            sched.start(host, now)
            left[host] -= 1
            to_start -= 1
            if not left[host]:
                sched.idle(host)
            heapq.heappush(running, (now + rng.expovariate(1 / mean_fetch_s), seq, host, now))
            seq += 1
        nxt = [running[0][0]] if running else []
        t = sched.next_ready_time() if len(running) < workers else None
        if t is not None:
            nxt.append(max(t, now))
        clock.set(max(now, min(nxt)))
        now = clock.now()
        while running and running[0][0] <= now:
            end, _, host, start = heapq.heappop(running)
            sched.finish(host, end)
            log.requests.append((host, start, end))
    return log


def zipf_work(n_hosts: int, total: int, seed: int) -> dict[str, int]:
    """Pages per host with a power-law spread, as on the web (a few hosts hold most pages)."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(n_hosts)]
    counts = dict.fromkeys((f"h{i}.example" for i in range(n_hosts)), 1)
    for h in rng.choices(list(counts), weights=weights, k=total - n_hosts):
        counts[h] += 1
    return counts


def _crawl_delays(hosts: list[str], sched: HostScheduler, delay: float) -> dict[str, float]:
    gaps = {}
    for i, h in enumerate(hosts):
        cd = 3.0 if i % 10 == 0 else 0.0  # one host in ten has a robots.txt Crawl-delay of 3 s
        if cd:
            sched.set_crawl_delay(h, cd)
        gaps[h] = max(delay, cd)
    return gaps


@pytest.mark.parametrize("enforce", [True, False])
def test_many_hosts_many_workers_polite_only_when_enforced(enforce: bool) -> None:
    clock = ManualClock(T0)
    sched = HostScheduler(1.0, clock, enforce=enforce)
    work = zipf_work(1000, 20_000, seed=5)
    gaps = _crawl_delays(list(work), sched, 1.0)
    log = simulate(sched, clock, work, workers=50, seed=7)
    assert len(log.requests) == 20_000
    overlaps, short_gaps = log.violations(gaps)
    if enforce:
        assert (overlaps, short_gaps) == (0, 0)
        assert sched.in_flight() == 0
    else:
        # Without the rules the same engine hammers hosts: the log shows it.
        assert overlaps > 100 and short_gaps > 1000


def test_all_workers_busy_when_hosts_outnumber_workers() -> None:
    clock = ManualClock(T0)
    sched = HostScheduler(1.0, clock)
    log = simulate(sched, clock, dict.fromkeys((f"h{i}" for i in range(1000)), 20),
                   workers=50, seed=11)
    # 1000 hosts × 1 start/s offer far more than 50 workers / 0.3 s need: nobody waits.
    assert log.utilization() > 0.99
    assert log.violations(dict.fromkeys((f"h{i}" for i in range(1000)), 1.0)) == (0, 0)


def test_few_hosts_are_throttled_not_the_workers_fault() -> None:
    clock = ManualClock(T0)
    sched = HostScheduler(2.0, clock)
    log = simulate(sched, clock, {"a": 100, "b": 100}, workers=10, seed=3, mean_fetch_s=0.1)
    assert log.violations({"a": 2.0, "b": 2.0}) == (0, 0)
    # Two hosts at one start per 2 s each: 200 requests take about 200 s.
    assert 195 <= log.span_s <= 205


def test_retry_after_pushes_the_host(clock: ManualClock) -> None:
    sched = HostScheduler(1.0, clock)
    sched.want("h")
    t = clock.now()
    assert sched.ready_host(t) == "h"
    sched.start("h", t)
    nxt = sched.finish("h", t + 0.5, retry_after_s=120)
    assert nxt == t + 120.5
    assert sched.ready_host(t + 120.4) is None
    assert sched.next_ready_time() == t + 120.5
    assert sched.ready_host(t + 120.5) == "h"


def test_retry_after_is_capped(clock: ManualClock) -> None:
    sched = HostScheduler(1.0, clock, max_retry_after_s=600)
    sched.want("h")
    sched.start("h", clock.now())
    assert sched.finish("h", clock.now(), retry_after_s=10**9) == clock.now() + 600


def test_errors_back_off_exponentially_up_to_a_cap(clock: ManualClock) -> None:
    sched = HostScheduler(1.0, clock, backoff_base_s=10, backoff_cap_s=50)
    t = clock.now()
    waits = []
    for _ in range(5):
        sched.start("h", t)
        nxt = sched.finish("h", t, error=True)
        waits.append(nxt - t)
        t = nxt
    assert waits == [10, 20, 40, 50, 50]
    assert sched.errors("h") == 5
    sched.start("h", t)
    assert sched.finish("h", t + 0.1) == t + 1.0          # one success resets the back-off
    assert sched.errors("h") == 0


def test_rule_breaking_calls_are_refused(clock: ManualClock) -> None:
    sched = HostScheduler(5.0, clock)
    t = clock.now()
    sched.start("h", t)
    with pytest.raises(PolitenessError, match="already has a request in flight"):
        sched.start("h", t)
    sched.finish("h", t + 1)
    with pytest.raises(PolitenessError, match="may not start before"):
        sched.start("h", t + 2)
    with pytest.raises(PolitenessError, match="without a request in flight"):
        sched.finish("h", t + 3)
    with pytest.raises(PolitenessError, match="without a request in flight"):
        sched.finish("never-seen", t + 3)


def test_idle_hosts_leave_the_schedule_and_come_back(clock: ManualClock) -> None:
    sched = HostScheduler(1.0, clock)
    t = clock.now()
    sched.want("a")
    sched.want("b")
    sched.idle("a")
    assert sched.ready_host(t) == "b"
    assert sched.ready_host(t) is None
    assert sched.next_ready_time() is None
    sched.want("a")
    sched.want("a")                                        # idempotent: one entry
    assert sched.ready_host(t) == "a"
    assert sched.ready_host(t) is None


def test_defer_and_crawl_delay_move_a_waiting_host(clock: ManualClock) -> None:
    sched = HostScheduler(1.0, clock)
    t = clock.now()
    sched.start("h", t)
    sched.want("h")
    sched.finish("h", t + 0.2)
    assert sched.next_ready_time() == t + 1.0
    sched.set_crawl_delay("h", 4.0)
    assert sched.next_ready_time() == t + 4.0
    assert sched.ready_host(t + 3.9) is None
    sched.defer("h", t + 100)
    assert sched.ready_host(t + 99) is None
    assert sched.ready_host(t + 100) == "h"


def test_enforce_false_allows_concurrent_starts(clock: ManualClock) -> None:
    sched = HostScheduler(10.0, clock, enforce=False)
    sched.want("h")
    t = clock.now()
    for _ in range(3):
        assert sched.ready_host(t) == "h"
        sched.start("h", t)
    assert sched.in_flight("h") == 3


def test_bad_configuration(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="must be >= 0 seconds"):
        HostScheduler(-1.0, clock)
