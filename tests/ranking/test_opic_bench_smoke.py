"""The OPIC convergence benchmark still runs: ``tests/bench/opic_convergence.py --quick`` in a
subprocess prints one JSON line with its summary, and Greedy beats Random."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "opic_convergence.py"
SUMMARY_KEYS = ("powerlaw_greedy_inflow_l1_at_6_reads", "cnr_greedy_inflow_l1_at_10_reads",
                "cnr_random_inflow_l1_at_10_reads", "visits_per_s")


def test_opic_bench_quick_prints_one_json_line() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout[:2000]
    result = json.loads(lines[0])
    summary = result["summary"]
    assert tuple(summary)[:len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert {"cpu", "cores", "ram_gb", "python", "load_avg_1min_at_start", "numpy"} <= set(
        result["machine"])
    assert summary["visits_per_s"] > 0
    power = summary["powerlaw_graph"]
    graphs = [power] + ([summary["cnr_graph"]] if summary["cnr_graph"] else [])
    if summary["cnr_graph"]:  # absent only when the LAW cnr-2000 file is not installed
        assert 0 < summary["cnr_greedy_inflow_l1_at_10_reads"] < summary[
            "cnr_random_inflow_l1_at_10_reads"]
    for graph in graphs:
        runs = result["graphs"][graph]["runs"]
        for selection in ("greedy", "random", "cycle"):
            for kind in ("inflow", "papers"):
                curve = runs[selection][kind]["l1"]
                assert len(curve) == 30 and all(math.isfinite(v) for v in curve)
                assert curve[-1] < curve[0]  # converging
        # Greedy beats Random at every read count from 3 on, for both estimates
        for kind in ("inflow", "papers"):
            greedy, random = runs["greedy"][kind]["l1"], runs["random"][kind]["l1"]
            assert all(g < r for g, r in zip(greedy[2:], random[2:])), (graph, kind)
    assert 0 < summary["powerlaw_greedy_inflow_l1_at_6_reads"] < 0.05
    change = result["changing_graph"]["l1_after_change_per_read"]
    assert set(change) == {"fixed_window", "variable_window", "bao", "inflow"}
    assert all(len(v) == 10 for v in change.values())
    # the windows forget the old graph: they end closer to the new fixpoint than the
    # whole-history estimate does
    for kind in ("fixed_window", "bao"):
        assert change[kind][-1] < change["inflow"][-1], change
