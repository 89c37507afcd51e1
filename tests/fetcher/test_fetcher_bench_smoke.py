"""Keeps tests/bench/fetcher_throughput.py from rotting: a --quick run, every page fetched
whole over kept-alive connections."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fetcher_throughput.py"


def test_fetcher_benchmark_quick_run_prints_one_json_line() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--quick", "--requests", "60",
                          "--threads", "4"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert set(report) == {"xyro_fetcher", "requests_bare", "setup", "machine"}
    for system in ("xyro_fetcher", "requests_bare"):
        figures = report[system]
        # Every page fetched whole (status 200, every body byte) ...
        assert figures["pages"] == 60 and figures["failed"] == 0, figures
        # ... over kept-alive connections: at most one per thread, not one per page.
        assert 1 <= figures["connections"] <= 4, figures
        assert figures["pages_per_s"] > 0
        assert {"seconds", "cpu_ms_per_page", "rss_mb"} <= set(figures)
    # No speed bound: at 60 requests the ratio to bare requests swings 0.5-1.0 under load.
    assert report["xyro_fetcher"]["ratio_pages_per_s_vs_requests_bare"] > 0
    assert {"cpu", "cores", "ram_gb", "python", "load_avg_1min_at_start"} <= set(report["machine"])
