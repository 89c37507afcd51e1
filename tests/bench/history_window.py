"""Benchmark: the planner's estimates from a page's newest observations against the whole
history's (DESIGN.md §6; ``RECENT_OBSERVATIONS`` in metadata/refresh_queries.py,
``OLDER_SHARE`` in xyro/jobs/plan_estimate.py).

Poisson pages on a real SQLite store filled through the metadata writer, read about once a
unit (intervals uniform in [0.5, 1.5]), λ per unit on a grid from 0.003 to 3, three kinds:
MD5 signatures only, reliable Last-Modified dates on every read, and the same dates that
304s omit. For each page the product's ``PageEstimator.evidence`` (what a unit runs) and
``PageEstimator.estimate`` on the whole history (what the planner ran before the bound):

* ``rel_change_p90`` / ``rel_change_max``: |λ̂ / λ̂_whole − 1| over the cell's pages
* ``cost_excess`` / ``cost_excess_whole``: the mean of (√ρ + 1/√ρ)/2 − 1, ρ = λ / λ̂: how much
  the page's share of the obsolescence Ω exceeds its optimum at interval K/√(r·λ̂)
* ``same_source`` / ``same_verdict``: pages whose estimator and Last-Modified verdict agree

and the CPU seconds per page of both, with the rows each page's estimate read.

Run: ``.venv/bin/python tests/bench/history_window.py [--quick]``; prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from metadata import FetchRecord, MetadataStore, PageType  # noqa: E402
from metadata import refresh_queries as rq  # noqa: E402
from xyro.jobs.plan_estimate import PageEstimator  # noqa: E402
from xyro.jobs.plan_settings import PlannerSettings  # noqa: E402

UNIT = 3600.0
START = 1_700_000_000.0
GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
KINDS = ("signatures", "dates", "dates_304")
PRIOR = 0.1


def page_records(rng: np.random.Generator, url: str, reads: int, rate: float, kind: str
                 ) -> list[FetchRecord]:
    times = START + UNIT * np.cumsum(rng.uniform(0.5, 1.5, reads))
    changes = np.sort(rng.uniform(times[0] - 5 * UNIT, times[-1],
                                  rng.poisson(rate * (reads + 5))))
    records, seen = [], -1
    for t in times:
        done = changes[changes <= t]
        if kind == "dates_304" and done.size == seen:
            records.append(FetchRecord(url, float(t), PageType.XML, http_status=304,
                                       not_modified=True))
        else:
            lm = float(np.ceil(done[-1] if done.size else times[0] - 9 * UNIT))
            records.append(FetchRecord(url, float(t), PageType.XML, http_status=200,
                                       signature=f"{url}#{done.size}".encode(),
                                       last_modified=None if kind == "signatures" else lm))
        seen = done.size
    return records


def excess(estimates: np.ndarray, rate: float) -> float:
    root = np.sqrt(rate / estimates)
    return float(np.mean((root + 1 / root) / 2 - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--reads", type=int, default=1000, help="reads per page")
    parser.add_argument("--pages", type=int, default=None, help="pages per cell")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    pages = args.pages or (2 if args.quick else 12)
    reads = 400 if args.quick and args.reads == 1000 else args.reads
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    cell_of: dict[str, tuple[float, str]] = {}
    records: list[FetchRecord] = []
    for rate in GRID:
        for kind in KINDS:
            for k in range(pages):
                url = f"http://{kind.replace('_', '-')}.example/{rate}/{k}.xml"
                cell_of[url] = (rate, kind)
                records += page_records(rng, url, reads, rate, kind)
    settings = PlannerSettings(time_unit_s=UNIT, bandwidth=1000, discovery_share=0.0,
                               min_interval_units=1.0, max_interval_units=50.0,
                               importance_floor=0.0, importance_source="rank")
    with tempfile.TemporaryDirectory() as tmp, MetadataStore.open(Path(tmp) / "x.db") as store:
        writer = store.writer()
        for rec in sorted(records, key=lambda r: r.fetched_at):
            writer.submit(rec)
        writer.close()
        conn = store.read_connection()
        est = PageEstimator(conn, settings)
        planned = rq.planned_pages(conn)
        need = [int(i) for i in planned.ids]
        top = rq.max_observation_id(conn)
        import scipy.optimize  # noqa: F401 - the estimators' first import, not timed
        conn.execute("BEGIN")
        t0 = time.process_time()
        window = est.evidence(planned, need, top, PRIOR)
        t1 = time.process_time()
        rows = rq.observations_of(conn, need, top)
        host_of = {int(i): int(h) for i, h in zip(planned.ids, planned.host_id)}
        whole = est.estimate({i: est.history(rows[i]) for i in need}, host_of, PRIOR)
        t2 = time.process_time()
        read = max(len(r.rows) for r in rq.recent_observations(conn, need, top).values())
        urls = rq.urls_of(conn, need)
        conn.execute("COMMIT")
        conn.close()
    cells = []
    for rate in GRID:
        for kind in KINDS:
            ids = [i for i in need if cell_of[urls[i]] == (rate, kind)]
            new = np.array([window[i].estimate.rate for i in ids])
            old = np.array([whole[i].estimate.rate for i in ids])
            change = np.abs(new / old - 1)
            cells.append({
                "rate_per_unit": rate, "kind": kind, "pages": len(ids),
                "rel_change_p90": round(float(np.quantile(change, 0.9)), 4),
                "rel_change_max": round(float(change.max()), 4),
                "cost_excess": round(excess(new, rate), 5),
                "cost_excess_whole": round(excess(old, rate), 5),
                "same_source": sum(window[i].estimate.source == whole[i].estimate.source
                                   for i in ids),
                "same_verdict": sum(window[i].lm_reliable == whole[i].lm_reliable
                                    for i in ids)})
    print(json.dumps({
        "benchmark": "history_window",
        "config": {"reads_per_page": reads, "pages_per_cell": pages, "seed": args.seed,
                   "grid_rate_per_unit": GRID, "kinds": KINDS,
                   "recent_observations": rq.RECENT_OBSERVATIONS},
        "systems": {
            "worst_cost_excess_over_whole": round(max(
                c["cost_excess"] - c["cost_excess_whole"] for c in cells), 5),
            "worst_rel_change_p90": max(c["rel_change_p90"] for c in cells),
            "pages_with_another_source": sum(c["pages"] - c["same_source"] for c in cells),
            "pages_with_another_verdict": sum(c["pages"] - c["same_verdict"] for c in cells),
            "rows_read_per_page_max": read,
            "cpu_ms_per_page": round(1000 * (t1 - t0) / len(need), 3),
            "cpu_ms_per_page_whole_history": round(1000 * (t2 - t1) / len(need), 3)},
        "cells": cells,
        "seconds": round(time.perf_counter() - started, 2),
        "machine": machine(),
    }))


if __name__ == "__main__":
    main()
