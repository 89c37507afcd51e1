"""Politeness and frontier micro-benchmark: scheduler, frontier and seen-set operations per second.

    .venv/bin/python tests/bench/politeness_frontier.py            # 10,000 hosts
    .venv/bin/python tests/bench/politeness_frontier.py --quick    # 1,000 hosts smoke run

Systems measured in one run (one JSON line on stdout, progress on stderr):
- ``host_scheduler_heap``: xyro.crawl.hosts.HostScheduler, ready_host + start + finish cycles with
  H hosts that always have work, each throttled to one start per second of simulated time;
- ``host_scheduler_scan``: the peer, the obvious scheduler that scans all hosts for the
  earliest-allowed one (O(H) per operation), same workload;
- ``frontier``: xyro.crawl.frontier.Frontier over 20 URLs per host (robots.txt known): push rate,
  then pop + start + finish (``done``) cycles through robots checks and priority levels;
- ``seenset``: xyro.crawl.seenset.SeenSet adds and lookups per second, memory against the formula.
Times are simulated (passed as arguments); only the CPU work is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])
from xyro.clock import ManualClock
from xyro.crawl.frontier import Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.seenset import SeenSet
from xyro.net.robots import RobotsCache

T0 = 1_700_000_000.0


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_heap(n_hosts: int, ops: int) -> dict:
    sched = HostScheduler(1.0, ManualClock(T0))
    for i in range(n_hosts):
        sched.want(f"h{i}.example")
    step = 1.0 / n_hosts  # one host becomes ready per operation on average
    now, done = T0, 0
    started = time.perf_counter()
    while done < ops:
        host = sched.ready_host(now)
        if host is None:
            now = max(now + step, sched.next_ready_time() or now)
            continue
        sched.start(host, now)
        sched.finish(host, now)
        done += 1
        now += step
    seconds = time.perf_counter() - started
    return {"hosts": n_hosts, "ops": ops, "seconds": round(seconds, 3),
            "ops_per_s": round(ops / seconds), "us_per_op": round(seconds / ops * 1e6, 2)}


def bench_scan(n_hosts: int, ops: int) -> dict:
    """The peer: earliest-allowed host found by a scan over all hosts."""
    next_ok = {f"h{i}.example": float("-inf") for i in range(n_hosts)}
    step = 1.0 / n_hosts
    now, done = T0, 0
    started = time.perf_counter()
    while done < ops:
        host = min(next_ok, key=next_ok.__getitem__)
        if next_ok[host] > now:
            now = next_ok[host]
            continue
        next_ok[host] = now + 1.0  # start and finish at once: next start one second later
        done += 1
        now += step
    seconds = time.perf_counter() - started
    return {"hosts": n_hosts, "ops": ops, "seconds": round(seconds, 3),
            "ops_per_s": round(ops / seconds), "us_per_op": round(seconds / ops * 1e6, 2)}


def bench_frontier(n_hosts: int, per_host: int) -> dict:
    clock = ManualClock(T0)
    robots = RobotsCache("XyroBot", clock)
    frontier = Frontier(HostScheduler(1.0, clock), robots, clock)
    for i in range(n_hosts):
        robots.store(f"http://h{i}.example", 200, b"User-agent: *\nDisallow: /private\n", T0)
    urls = [(f"http://h{i}.example/p/{j}", (i + j) % 5) for j in range(per_host) for i in range(n_hosts)]
    started = time.perf_counter()
    for url, level in urls:
        frontier.push(url, level)
    push_s = time.perf_counter() - started
    progress(f"frontier: {len(urls)} pushed in {push_s:.2f} s")
    step = 1.0 / n_hosts
    now, ops = T0, 0
    started = time.perf_counter()
    while True:
        item = frontier.pop(now)
        if item is None:
            t = frontier.next_ready_time()
            if t is None:
                break
            now = max(now + step, t)
            continue
        frontier.done(item, now=now)
        ops += 1
        now += step
    seconds = time.perf_counter() - started
    return {"hosts": n_hosts, "urls": len(urls), "push_per_s": round(len(urls) / push_s),
            "ops": ops, "seconds": round(seconds, 3), "pop_done_per_s": round(ops / seconds),
            "us_per_pop_done": round(seconds / ops * 1e6, 2)}


def bench_seenset(n: int) -> dict:
    seen = SeenSet(n, 1e-3)
    urls = [f"http://h{i % 10_000}.example/page/{i}" for i in range(n)]
    started = time.perf_counter()
    for u in urls:
        seen.add(u)
    add_s = time.perf_counter() - started
    probes = [f"http://h{i % 10_000}.example/other/{i}" for i in range(n)]
    started = time.perf_counter()
    fp = sum(u in seen for u in probes)
    probe_s = time.perf_counter() - started
    # The start's rebuild from the store: add_many in chunks of the restore's size.
    batched = SeenSet(n, 1e-3)
    started = time.perf_counter()
    for i in range(0, n, 10_000):
        batched.add_many(urls[i:i + 10_000])
    batch_s = time.perf_counter() - started
    assert bytes(batched._bits) == bytes(seen._bits)   # the same filter either way
    return {"urls": n, "adds_per_s": round(n / add_s), "lookups_per_s": round(n / probe_s),
            "batch_adds_per_s": round(n / batch_s),
            "memory_bytes": seen.memory_bytes, "formula_bytes": (SeenSet.bits_for(n, 1e-3) + 7) // 8,
            "k": seen.k, "target_fp_rate": 1e-3, "measured_fp_rate": round(fp / n, 6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 hosts smoke run")
    ap.add_argument("--hosts", type=int, default=10_000)
    args = ap.parse_args()
    hosts = 1_000 if args.quick else args.hosts
    ops = 20_000 if args.quick else 200_000
    progress(f"heap scheduler: {hosts} hosts, {ops} ops")
    heap = bench_heap(hosts, ops)
    progress(f"scan scheduler (peer): {hosts} hosts")
    scan = bench_scan(hosts, max(200, ops // 100))
    progress("frontier")
    frontier = bench_frontier(hosts, 20 if not args.quick else 5)
    progress("seen-set")
    seen = bench_seenset(20_000 if args.quick else 1_000_000)
    out = {
        "benchmark": "politeness_frontier",
        "host_scheduler_heap": heap,
        "host_scheduler_scan": scan,
        "frontier": frontier,
        "seenset": seen,
        "ratios": {"heap_vs_scan_ops_per_s": round(heap["ops_per_s"] / scan["ops_per_s"], 1)},
        "machine": machine(),
        "params": {"hosts": hosts, "quick": args.quick},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
