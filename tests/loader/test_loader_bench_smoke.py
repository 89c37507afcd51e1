"""The loader benchmark runs (--quick) and prints one JSON line with its keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "loader.py"


def test_loader_benchmark_quick_prints_one_json_line() -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    lines = out.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert {"runs", "machine", "peak_rss_mb", "target_met"} <= data.keys()
    assert len(data["runs"]) == 4
    for run in data["runs"]:
        assert {"documents_per_s", "mb_per_s", "seconds", "validation",
                "canonical_signature"} <= run.keys()
        assert run["documents_per_s"] > 0 and run["links"] > 0
    assert 15_000 < data["mean_document_bytes"] < 25_000
