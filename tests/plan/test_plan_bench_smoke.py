"""Keeps tests/bench/planner_job.py from rotting: a run with tiny stores, its one JSON line
checked (the keys the report relies on, and figures that make sense at that size)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "planner_job.py"


def test_planner_benchmark_small_run_prints_one_json_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--small", "2000", "--big", "8000",
                          "--bandwidth", "200", "--units", "3", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    summary = report["summary"]
    assert list(summary)[:3] == ["unit_seconds_100k", "unit_seconds_5m",
                                 "unit_ratio_5m_over_100k"]
    ratio = summary["unit_ratio_5m_over_100k"]
    assert isinstance(ratio, float) and math.isfinite(ratio) and ratio > 0
    assert 0 < summary["unit_seconds_100k"] < 30 and 0 < summary["unit_seconds_5m"] < 30
    for name, pages in (("small", 2000), ("big", 8000)):
        system = report["systems"][name]
        assert system["pages"] == pages
        assert system["warmup_was_full_scan"] and system["full_scan_units_timed"] == 0
        # about G = 200 pages per unit: (1 - rho)·G = 160 due, the rest discovery
        assert 120 <= system["due_per_unit_mean"] <= 200, system
        assert system["estimated_per_unit_mean"] >= 150, system
        assert len(system["units"]) == 4
    assert {"cpu", "cores", "ram_gb", "python", "sqlite"} <= set(report["machine"])
    assert not list(tmp_path.iterdir())  # the stores were built in a temporary directory
