"""Keeps tests/bench/crawl_throughput.py from rotting: a --quick run (Xyro and Scrapy over
one small synthetic web), its one JSON line checked, and what the web's own request log says
Xyro did held to the rules of DESIGN.md §7."""

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
    assert {"cpu", "cores", "ram_gb", "python", "load_avg_1min_at_start"} <= set(report["machine"])
    for system in ("xyro", "scrapy"):
        figures = report[system]
        assert figures["pages"] == 150, figures
        assert figures["stop_reason"] == "page budget reached"
        assert figures["pages_per_s"] > 0 and figures["cpu_ms_per_page"] > 0
        assert figures["peak_rss_mb"] > 0
    hosts = report["setup"]["web_hosts"]
    assert report["xyro"]["robots_fetches"] == hosts
    # The server's account of Xyro's crawl: exactly the 150 pages asked for, one robots.txt
    # per host and before anything else there, no disallowed URL, and never a second request
    # to a host before the first was answered (the politeness rule at delay 0).
    assert report["xyro"]["server_log"] == {
        "requests": 150 + hosts, "page_requests": 150, "hosts": hosts, "robots_requests": hosts,
        "hosts_robots_not_first": 0, "disallowed_fetched": 0, "overlapping_requests": 0}
    # The peer is only described: Scrapy 2.19 does not keep CONCURRENT_REQUESTS_PER_DOMAIN=1
    # (its log shows overlapping requests), and it sends more than the budget before closing.
    assert report["scrapy"]["server_log"]["page_requests"] >= 150
    assert report["xyro"]["ratio_pages_per_s_vs_scrapy"] > 0  # 0.2 s of crawling: no bound
    # The OPIC variants ran in the same invocation, politely too; no bound at this size.
    for variant in ("xyro_opic_off", "xyro_focus_off", "xyro_fsync_off"):
        assert report[variant]["pages"] == 150
        assert report[variant]["server_log"]["overlapping_requests"] == 0
        assert report[variant]["server_log"]["page_requests"] == 150
    assert report["xyro"]["ratio_pages_per_s_vs_opic_off"] > 0
    assert "fsync_throughput_cost_pct" in report["xyro"]
    assert report["xyro"]["xml_docs_per_1000_fetches"] >= 0
