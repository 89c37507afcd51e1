"""Keeps tests/bench/fetcher_throughput.py from rotting: a --quick run, JSON keys checked."""

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
        assert report[system]["pages"] == 60
        assert report[system]["failed"] == 0
        assert report[system]["pages_per_s"] > 0
        assert {"seconds", "cpu_ms_per_page", "rss_mb"} <= set(report[system])
    assert report["xyro_fetcher"]["ratio_pages_per_s_vs_requests_bare"] > 0
    assert {"cpu", "cores", "ram_gb", "python"} <= set(report["machine"])
