"""Keeps tests/bench/html_extract.py from rotting: its --quick run prints one JSON line,
finds the links Scrapy finds (every difference explained) and is faster at it."""

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
    xyro, scrapy = result["xyro"], result["scrapy_linkextractor"]
    for system in (xyro, scrapy):
        assert {"median_ms", "p95_ms", "pages_per_s", "seconds", "links"} <= system.keys()
        assert system["links"] > 20 * 10  # every docs page links to dozens of others
    assert result["pages"] == 20
    # Speed: medians, which a few preempted pages cannot move; Xyro's is about 4.5x lower
    # (0.5 against 2.4 ms here), so this holds under load and fails if extraction regresses
    # to the peer's cost.
    assert xyro["median_ms"] < scrapy["median_ms"], (xyro, scrapy)
    # Quality: the same links as Scrapy's LinkExtractor up to the documented differences
    # (Xyro drops fragment-only hrefs), on every page, with no page failing.
    agreement = result["agreement"]
    assert agreement["unexplained_differences"] == 0
    assert agreement["xyro_errors"] == []
    peer = agreement["scrapy"]
    assert peer["explained_share"] == 1.0 and peer["mean_jaccard"] >= 0.9, peer
    assert peer["common_distinct_urls"] == peer["xyro_distinct_urls"]  # nothing Scrapy lacks
    machine = result["machine"]
    assert {"cpu", "cores", "ram_gb", "python", "load_avg_1min_at_start"} <= machine.keys()
