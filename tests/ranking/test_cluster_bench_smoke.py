"""The cluster ranking benchmark still runs: ``tests/bench/cluster_rank.py --quick`` in a
subprocess (its own LocalCluster of 2 workers on 127.0.0.1, a 50k-page graph), one JSON line
out with the summary's keys first."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "cluster_rank.py"
SUMMARY_KEYS = ("workers", "links", "sweep_seconds_cluster_over_one_host",
                "l1_cluster_vs_one_host", "peak_rss_over_budget_per_worker")


def test_cluster_bench_quick_prints_one_json_line(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="Dask's distributed is not installed: "
                                              "pip install -e '.[test]'")
    run = subprocess.run([sys.executable, str(BENCH), "--quick", "--work-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout[:2000]
    result = json.loads(lines[0])
    summary = result["summary"]
    assert tuple(summary)[:len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert summary["workers"] == 2 and summary["links"] == 500_000
    ratio = summary["sweep_seconds_cluster_over_one_host"]
    assert isinstance(ratio, float) and math.isfinite(ratio) and ratio > 0
    assert 0 <= summary["l1_cluster_vs_one_host"] < 1e-6  # both stop at residual 1e-6
    per_worker = summary["peak_rss_over_budget_per_worker"]
    assert len(per_worker) == 2 and all(r > 0 for r in per_worker)
    assert result["cluster"]["bytes_read_per_sweep"] > 16 * 50_000
    assert result["one_host"]["sweeps"] >= 1 and result["cluster"]["sweeps"] >= 1
    assert {"cpu", "cores", "ram_gb", "python"} <= set(result["machine"])
    assert list(tmp_path.iterdir()) == []  # the graph, slices and vectors are gone
