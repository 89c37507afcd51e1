"""Keeps tests/bench/politeness_frontier.py from rotting: run --quick, check its one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "politeness_frontier.py"


def test_bench_quick_prints_one_json_line() -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True,
                          timeout=120, check=True)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert {"host_scheduler_heap", "host_scheduler_scan", "frontier", "seenset", "ratios",
            "machine"} <= set(out)
    assert out["host_scheduler_heap"]["ops_per_s"] > 0
    assert out["frontier"]["ops"] == out["frontier"]["urls"]   # every URL popped and done once
    assert out["seenset"]["memory_bytes"] == out["seenset"]["formula_bytes"]
    assert {"cpu", "cores", "ram_gb", "python"} <= set(out["machine"])
