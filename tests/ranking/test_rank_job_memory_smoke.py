"""The rank-job memory benchmark still runs: ``tests/bench/rank_job_memory.py`` with tiny
sizes in a subprocess (a real store, the real ``xyro rank``), one JSON line out."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "rank_job_memory.py"
SUMMARY_KEYS = ("links", "budget_mb", "peak_rss_mb", "peak_rss_over_budget")


def test_rank_job_memory_bench_tiny_prints_one_json_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--pages", "3000", "--links", "30000",
                          "--budget-mb", "4", "--work-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout[:2000]
    result = json.loads(lines[0])
    summary = result["summary"]
    assert tuple(summary)[:len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert summary["links"] == 30000 and summary["budget_mb"] == 4
    ratio = summary["peak_rss_over_budget"]
    assert isinstance(ratio, float) and math.isfinite(ratio) and ratio > 0
    assert summary["peak_rss_mb"] > 0 and summary["out_of_core"] is True
    assert summary["slices"] >= 1 and summary["sweeps"] >= 1 and summary["seconds"] > 0
    assert {"cpu", "cores", "ram_gb", "python"} <= set(result["machine"])
    assert list(tmp_path.iterdir()) == []  # the stores and slices are gone
