"""Keeps tests/bench/global_pagerank.py from rotting: its --quick run (the first 20,000 pages
of LAW cnr-2000 and a 20,000-page synthetic web, 4 small domains each, 10 rounds), its one
JSON line checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "global_pagerank.py"
SUMMARY = {"cnr_sc_gain_over_local_pr_2n_median", "cnr_sc_l1_over_best_selector_2n_median",
           "seconds_20000_page_domain_2n"}


def test_global_pagerank_benchmark_quick_run_prints_one_json_line() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert SUMMARY <= set(report["summary"])
    assert report["summary"]["seconds_20000_page_domain_2n"] is None  # no such domain here
    web = report["graphs"]["site_web"]
    assert web["domains"] == 4 and web["timing"]["domain_sizes"] == 4
    for degree in ("within", "all"):
        rows = web["by_out_degree"][degree]
        assert rows["local_pr"]["l1_median"] > 0
        for name in ("sc", "sc_exact", "pf", "outlinks", "random", "oracle"):
            assert 0 <= rows[name]["l1_2n_median"] <= rows[name]["l1_2n_worst"] <= 2
    for domain in web["per_domain"]:
        assert domain["within"]["sc"]["extra_pages"] == 2 * domain["pages"]
