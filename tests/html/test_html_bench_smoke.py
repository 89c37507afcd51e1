"""Keeps tests/bench/html_extract.py from rotting: its --quick run prints one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "bench" / "html_extract.py"
DOCS = Path("/usr/share/doc/python3.11/html")


@pytest.mark.skipif(not DOCS.is_dir(), reason=f"{DOCS} is absent: apt-get install python3.11-doc")
def test_html_extract_benchmark_quick_run() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--quick"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    result = json.loads(lines[0])
    for system in ("xyro", "scrapy_linkextractor"):
        assert {"median_ms", "p95_ms", "pages_per_s", "seconds", "links"} <= result[system].keys()
        assert result[system]["pages_per_s"] > 0
    assert result["pages"] == 20 and result["ratio_pages_per_s_xyro_over_scrapy"] > 0
    assert result["agreement"]["unexplained_differences"] == 0
    assert {"cpu_model", "cores", "ram_gb", "python"} <= result["machine"].keys()
