"""Benchmark: folder planning work per time unit does not grow with N (DESIGN.md §6).

For N = 100,000 and N = 10,000,000 pages and the same G = 5,000 fetches per unit: every
page is filed with a refresh interval t_i uniform in [0.5, 1.5] × N/G units (so about G
fall due per unit) and a random last refresh. One unit of planning = pop the due folder,
compute the new due folder of each popped page from its fetch time and t_i, re-file it.
Reported: median seconds per unit over the timed units at each N and their ratio (target
≤ 2), and whether every popped set equals the O(N) full scan (``refresh.due_by_scan``),
checked outside the timed region.

What grew with N before (ratio 2.2–3.5): not cache misses (the G random reads and writes
of ``folder_of`` cost 0.04 ms at 100k and 0.09 ms at 10M) but one Python object per
destination folder: a unit's G pages spread over min(G, N/G) folders (20 at 100k, ~1,850
at 10M; ``np.split`` alone took 1.3 ms). ``refresh.Folders`` now keeps sorted runs
(module doc), so the per-unit work is O(G log(N/G)) contiguous element moves.

Run: ``.venv/bin/python tests/bench/folder_scaling.py [--quick]``; prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchmachine import machine, peak_rss_mb  # a sibling script module (tests/bench is sys.path[0])

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from refresh import Folders, due_by_scan, due_folders  # noqa: E402


def measure(n: int, g: int, units: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    cycle = n / g
    intervals = rng.uniform(0.5, 1.5, n) * cycle
    last = -rng.uniform(0.0, 1.0, n) * intervals
    started = time.perf_counter()
    folders = Folders(n)
    folders.file(np.arange(n), due_folders(last, intervals))
    build = time.perf_counter() - started
    per_unit: list[float] = []
    popped: list[int] = []
    same = True
    for unit in range(units):
        expected = due_by_scan(folders.snapshot(), unit)  # the O(N) check, not timed
        t0 = time.perf_counter()
        due = folders.pop(unit)
        fetched_at = unit + rng.uniform(0.0, 1.0, due.size)
        folders.file(due, due_folders(fetched_at, intervals[due]))
        per_unit.append(time.perf_counter() - t0)
        same &= bool(np.array_equal(due, expected))
        popped.append(int(due.size))
    return {"pages": n, "build_seconds": round(build, 3),
            "seconds_per_unit_median": round(statistics.median(per_unit), 6),
            # Merges of large runs are lumpy: the worst unit, for honesty.
            "seconds_per_unit_max": round(max(per_unit), 6),
            "pages_due_per_unit_mean": round(statistics.fmean(popped), 1),
            "folders_match_full_scan": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--units", type=int, default=30)
    args = parser.parse_args()
    g = 500 if args.quick else 5_000
    sizes = (10_000, 1_000_000) if args.quick else (100_000, 10_000_000)
    started = time.perf_counter()
    small = measure(sizes[0], g, args.units, seed=1)
    print(f"N={sizes[0]}: {small}", file=sys.stderr)
    big = measure(sizes[1], g, args.units, seed=2)
    print(f"N={sizes[1]}: {big}", file=sys.stderr)
    ratio = big["seconds_per_unit_median"] / small["seconds_per_unit_median"]
    print(json.dumps({
        "benchmark": "folder_scaling",
        "config": {"bandwidth_pages_per_unit": g, "timed_units": args.units},
        "systems": {f"folders_n_{sizes[0]}": small, f"folders_n_{sizes[1]}": big},
        "ratio_big_to_small_seconds_per_unit": round(ratio, 3),
        "targets": {"ratio_at_most_2": bool(ratio <= 2.0),
                    "folders_match_full_scan": bool(small["folders_match_full_scan"]
                                                    and big["folders_match_full_scan"])},
        "peak_rss_mb": peak_rss_mb(),
        "seconds": round(time.perf_counter() - started, 1),
        "machine": machine(),
    }))


if __name__ == "__main__":
    main()
