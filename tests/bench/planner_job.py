"""Benchmark: the product's refresh planner job per time unit does not grow with N (DESIGN.md §6).

Two real SQLite stores in the store's schema, of 100,000 and 5,000,000 known (fetched) pages,
plus a fifth as many unread links, built with direct SQL inserts (``executemany`` in big
transactions, the indexes made once at the end): pages on 1,000 hosts, half HTML half XML,
importance and interest log-normal around 1, change rates log-normal with stored estimates
and two observations each (the planner's watermark past them, as after earlier units), and
folders spread evenly over the N/((1 − ρ)·G) units of one refresh cycle, so that about G
pages fall due per unit with the same G = 5,000 pages/unit (ρ = 0.2) in both stores.

Timed: ``RefreshPlanner.run_unit`` as ``xyro run``'s plan job calls it (a new planner on a
read connection of the store, ops to the store's writer), over ``--units`` consecutive
units after a warm-up unit. The warm-up unit finds no ledger and rebuilds it from the full
scan (its time is reported apart: it is what a ranking run costs the next unit). Between
units, not timed: the writer applies the unit's ops, then the unit's pages are fetched
through the writer at random times in the unit (each changed with its page's probability,
discovered ones with two new links), so each unit re-estimates about G pages and adds about
ρ·G new ones. Reported per size: median and max seconds per unit, pages due, re-estimated
and full-scan units; and the ratio of the medians (target ≤ 2).

Run: ``.venv/bin/python tests/bench/planner_job.py [--small N --big N --units K]``; prints
one JSON line (build progress on stderr).
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from benchmachine import machine, peak_rss_mb  # a sibling script module (tests/bench is sys.path[0])

from metadata import FetchRecord, MetadataStore, PageType
from metadata.urlkeys import url_hash
from xyro.clock import ManualClock
from xyro.crawl.frontier import DISCOVERY
from xyro.jobs.plan_job import WATERMARK_KEY, RefreshPlanner
from xyro.jobs.plan_settings import PlannerSettings

UNIT_S = 3600.0
FIRST_UNIT = 480_000  # about 2024-10 in hours
HOSTS = 1_000
CHUNK = 200_000
_INDEXED = ("urls_hash", "urls_due", "urls_weight", "urls_unread", "observations_url")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def page_url(i: int) -> str:
    return f"http://h{i % HOSTS}.example.org/p/{i}." + ("xml" if i % 2 else "html")


def _pages(n: int, g_refresh: float, rng: np.random.Generator
           ) -> Iterator[tuple[list[tuple], list[tuple]]]:
    """(urls rows, observations rows) of the known pages, in chunks (module doc)."""
    cycle = n / g_refresh
    for start in range(1, n + 1, CHUNK):
        ids = np.arange(start, min(start + CHUNK, n + 1))
        m = ids.size
        due = FIRST_UNIT + np.floor(rng.uniform(0.0, cycle, m)).astype(np.int64)
        last = (due - cycle + rng.uniform(0.0, 1.0, m)) * UNIT_S
        lam = rng.lognormal(math.log(1.0 / cycle), 1.0, m)  # changes per unit
        imp, intr = rng.lognormal(-0.5, 1.0, m), rng.lognormal(-0.5, 1.0, m)
        pages = [(i, url_hash(page_url(i)), "xml" if i % 2 else "html", i % HOSTS + 1,
                  page_url(i), la - UNIT_S, la, 2, b"v0", im, it, lm / UNIT_S,
                  "signature-mle", d, cycle)
                 for i, d, la, lm, im, it in zip(ids.tolist(), due.tolist(), last.tolist(),
                                                 lam.tolist(), imp.tolist(), intr.tolist())]
        obs = [row for p in pages for row in ((2 * p[0] - 1, p[0], None, p[5], 0, None),
                                              (2 * p[0], p[0], p[5], p[6], 0, None))]
        yield pages, obs


def build(path: Path, n: int, g_refresh: float, seed: int) -> dict[str, float]:
    """A store of ``n`` known pages and n/5 unread ones (module doc); build seconds."""
    t0 = time.perf_counter()
    MetadataStore.open(path).close()
    rng = np.random.default_rng(seed)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    ddl = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                            f"AND name IN ({','.join('?' * len(_INDEXED))})", _INDEXED))
    conn.execute("BEGIN")
    for name in ddl:
        conn.execute(f"DROP INDEX {name}")
    conn.executemany("INSERT INTO hosts (id, host) VALUES (?, ?)",
                     [(h + 1, f"h{h}.example.org") for h in range(HOSTS)])
    for pages, obs in _pages(n, g_refresh, rng):
        conn.executemany(
            "INSERT INTO urls (id, hash, type, host_id, url, first_access, last_access, "
            "accesses, signature, importance, interest, rate, rate_source, due_unit, "
            "interval_units) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", pages)
        conn.executemany("INSERT INTO observations (id, url_id, prev_access, access, changed, "
                         "last_modified) VALUES (?, ?, ?, ?, ?, ?)", obs)
    unread = n // 5
    imp = np.where(rng.random(unread) < 0.5, rng.lognormal(-0.5, 1.0, unread), np.nan)
    conn.executemany("INSERT INTO urls (id, hash, host_id, depth, url, importance) "
                     "VALUES (?, ?, ?, 1, ?, ?)",
                     ((n + k + 1, url_hash(f"http://u{k}.example.org/x"), k % HOSTS + 1,
                       f"http://u{k}.example.org/x", None if np.isnan(im) else float(im))
                      for k, im in enumerate(imp)))
    conn.execute("INSERT INTO state (key, value) VALUES (?, ?)", (WATERMARK_KEY, str(2 * n)))
    conn.execute("COMMIT")
    built = time.perf_counter() - t0
    for sql in ddl.values():
        conn.execute(sql)
    conn.execute("ANALYZE")
    conn.close()
    return {"insert_seconds": round(built, 1),
            "index_seconds": round(time.perf_counter() - t0 - built, 1)}


class Crawl:
    """The unit's pages fetched through the writer (module doc)."""

    def __init__(self, store: MetadataStore, rng: np.random.Generator) -> None:
        self.store, self.rng, self.new = store, rng, 0

    def fetch(self, writer, fetch: list[tuple[str, int]], unit: int) -> None:
        times = (unit + np.sort(self.rng.uniform(0.0, 1.0, len(fetch)))) * UNIT_S
        changed = self.rng.random(len(fetch)) < 0.3
        for (url, priority), t, ch in zip(fetch, times, changed):
            kind = PageType.XML if url.endswith(".xml") else PageType.HTML
            kids: tuple[str, ...] = ()
            if priority == DISCOVERY:  # a first fetch: two new links
                kids = tuple(f"http://n{self.new + j}.example.org/y" for j in range(2))
                self.new += 2
            writer.submit(FetchRecord(url, float(t), kind, http_status=200,
                                      signature=b"v%d" % (unit if ch else 0), children=kids))
        writer.flush()


def measure(n: int, g: int, share: float, units: int, seed: int, root: Path) -> dict:
    path = root / f"planner_{n}.db"
    g_refresh = g * (1.0 - share)
    cycle = n / g_refresh
    log(f"N={n}: building the store ...")
    built = build(path, n, g_refresh, seed)
    log(f"N={n}: built {built}")
    settings = PlannerSettings(UNIT_S, g, share, 1.0, 4.0 * cycle, 0.0, "rank")
    per_unit: list[float] = []
    figures: list[dict] = []
    with MetadataStore.open(path) as store:
        writer = store.writer(now=lambda: FIRST_UNIT * UNIT_S)
        crawl = Crawl(store, np.random.default_rng(seed + 1))
        for k in range(units + 1):
            unit = FIRST_UNIT + k
            conn = store.read_connection()
            planner = RefreshPlanner(conn, writer.submit, ManualClock(unit * UNIT_S + 1.0),
                                     settings)
            t0 = time.perf_counter()
            fetch = planner.run_unit()
            seconds = time.perf_counter() - t0
            conn.close()
            t1 = time.perf_counter()
            writer.flush()
            flush = time.perf_counter() - t1
            f = planner.last_unit
            assert f is not None
            figures.append({"unit": k, "seconds": round(seconds, 4), "full_scan": f.full_scan,
                            "due": f.due, "discovery": f.discovery, "deferred": f.deferred,
                            "estimated": f.estimated, "writer_flush_seconds": round(flush, 3)})
            log(f"N={n}: {figures[-1]}")
            if k:
                per_unit.append(seconds)
            crawl.fetch(writer, fetch, unit)
        writer.close()
    timed = figures[1:]
    return {"pages": n, "unread": n // 5, "refresh_cycle_units": round(cycle, 1),
            "build": built, "warmup_full_scan_seconds": figures[0]["seconds"],
            "warmup_was_full_scan": figures[0]["full_scan"],
            "seconds_per_unit_median": round(statistics.median(per_unit), 4),
            "seconds_per_unit_max": round(max(per_unit), 4),
            "due_per_unit_mean": round(statistics.fmean(u["due"] for u in timed), 1),
            "estimated_per_unit_mean": round(statistics.fmean(u["estimated"] for u in timed), 1),
            "full_scan_units_timed": sum(u["full_scan"] for u in timed),
            "db_mb": round(path.stat().st_size / 2**20, 1),
            "peak_rss_mb_so_far": peak_rss_mb(), "units": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100_000, help="known pages, small store")
    parser.add_argument("--big", type=int, default=5_000_000, help="known pages, big store")
    parser.add_argument("--bandwidth", type=int, default=5_000, help="G, pages per unit")
    parser.add_argument("--discovery-share", type=float, default=0.2, help="rho")
    parser.add_argument("--units", type=int, default=6, help="timed units after the warm-up")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the stores")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        small = measure(args.small, args.bandwidth, args.discovery_share, args.units,
                        args.seed, Path(tmp))
        (Path(tmp) / f"planner_{args.small}.db").unlink()
        big = measure(args.big, args.bandwidth, args.discovery_share, args.units,
                      args.seed + 10, Path(tmp))
    ratio = big["seconds_per_unit_median"] / small["seconds_per_unit_median"]
    print(json.dumps({
        "benchmark": "planner_job",
        "summary": {"unit_seconds_100k": small["seconds_per_unit_median"],
                    "unit_seconds_5m": big["seconds_per_unit_median"],
                    "unit_ratio_5m_over_100k": round(ratio, 3),
                    "ratio_at_most_2": bool(ratio <= 2.0)},
        "config": {"bandwidth_pages_per_unit": args.bandwidth,
                   "discovery_share": args.discovery_share, "time_unit_s": UNIT_S,
                   "timed_units": args.units, "small_pages": args.small,
                   "big_pages": args.big},
        "systems": {"small": small, "big": big},
        "seconds": round(time.perf_counter() - started, 1),
        "machine": machine(sqlite=sqlite3.sqlite_version),
    }))


if __name__ == "__main__":
    main()
