"""Keeps tests/bench/crawl_throughput.py from rotting: a --quick run (Xyro and Scrapy over
one small synthetic web), its one JSON line checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "crawl_throughput.py"


def test_crawl_benchmark_quick_run_prints_one_json_line() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--quick", "--budget", "150",
                          "--workers", "8"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert {"xyro", "scrapy", "setup", "machine"} <= set(report)
    for system in ("xyro", "scrapy"):
        figures = report[system]
        assert figures["pages"] == 150, figures
        assert figures["stop_reason"] == "page budget reached"
        assert figures["pages_per_s"] > 0 and figures["cpu_ms_per_page"] > 0
        assert figures["peak_rss_mb"] > 0
    # robots.txt first, and every disallowed URL refused without a fetch
    assert report["xyro"]["robots_fetches"] == report["setup"]["web_hosts"]
    assert report["xyro"]["ratio_pages_per_s_vs_scrapy"] > 0
