"""Keeps tests/bench/global_pagerank.py from rotting: its --quick run (the first 20,000 pages
of LAW cnr-2000 and a 20,000-page synthetic web, 4 small domains each, 10 rounds), its one
JSON line checked; and its site-aligned domains on a graph whose sites are known."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ranking.graph import LinkGraph

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
    if "skipped" not in report["graphs"]["cnr-2000"]:  # ../shared/data is beside the clone
        summary = report["summary"]
        assert len(summary["cnr_within_sc_over_random_l1_median_by_extra_over_n"]) == 6
        assert summary["cnr_within_sc_l1_over_best_link_based_selector_2n_median"] > 0
    web = report["graphs"]["site_web"]
    assert web["domains"] == 4 and web["timing"]["domain_sizes"] == 4
    assert 0 <= web["timing"]["r2_of_size_means"] <= 1 and 0 <= web["timing"]["r2"] <= 1
    for degree in ("within", "all"):
        rows = web["by_out_degree"][degree]
        assert rows["local_pr"]["l1_median"] > 0
        for name in ("sc", "sc_exact", "sc_learned", "pf", "outlinks", "random", "oracle"):
            assert 0 <= rows[name]["l1_2n_median"] <= rows[name]["l1_2n_worst"] <= 2
            assert 0 <= rows[name]["links_into_local_share_2n_median"] <= 1
            curve = rows[name]["l1_median_by_extra_over_n"]
            assert list(curve) == ["0.2", "0.4", "0.6", "1.0", "1.5", "2.0"]
            assert curve["1.0"] == rows[name]["l1_n_median"]
            assert curve["2.0"] == rows[name]["l1_2n_median"]
        assert rows["sc_over_random_l1_median_by_extra_over_n"]["2.0"] == pytest.approx(
            rows["sc"]["l1_2n_median"] / rows["random"]["l1_2n_median"])
        low, high = rows["sc_gain_over_local_pr_2n_median_90pct"]
        assert 0 < low <= high
    for domain in web["per_domain"]:
        assert domain["within"]["sc"]["extra_pages"] == 2 * domain["pages"]


def test_site_aligned_domains_cut_between_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH.parent))  # as when run as a script
    bench = importlib.import_module(BENCH.stem)
    rng = np.random.default_rng(0)
    site = np.repeat(np.arange(10), 100)  # ten sites of 100 contiguous ids
    src = rng.integers(0, 1000, 20_000)
    dst = np.where(rng.random(20_000) < 0.9, site[src] * 100 + rng.integers(0, 100, 20_000),
                   rng.integers(0, 1000, 20_000))  # a tenth of the links go anywhere
    graph = LinkGraph.from_edges(src, dst, 1000)
    assert bench.site_aligned(graph, [(290, 300), (415, 180)], span=150) == [(300, 300),
                                                                          (400, 200)]


def test_rounds_sweep_spreads_the_same_budget_over_fewer_rounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH.parent))
    bench = importlib.import_module(BENCH.stem)
    graph, sites = bench.site_web(4000, [300, 500], seed=1)
    truth = bench.global_truth("site_web", graph)
    main = bench.bench_graph("site_web", graph, truth, sites, rounds=6, jobs=1)
    main["rounds"] = 6
    table = bench.rounds_sweep(graph, truth, sites, main, (2, 3), jobs=1)
    assert list(table) == ["2", "3", "6"]
    within = main["by_out_degree"]["within"]
    assert table["6"]["l1_2n_median"]["sc"] == within["sc"]["l1_2n_median"]
    assert table["6"]["sc_gain_over_local_pr_2n_median"] == pytest.approx(
        within["sc_gain_over_local_pr_2n_median"])
    assert table["6"]["sc_l1_over_best_selector_2n_median"] == pytest.approx(
        within["sc_l1_over_best_selector_2n_median"])
    start, size = sites[0]
    again = bench.sweep_domain(graph, truth, start, size, 6)  # the main run, redone
    assert again["sc"] == pytest.approx(main["per_domain"][0]["within"]["sc"]["l1_2n"])
    for row in table.values():
        assert row["l1_2n_median"]["local_pr"] == within["local_pr"]["l1_median"]
        assert row["sc_l1_over_best_selector_2n_median"] >= 1.0
    assert table["6"]["sc_learned_l1_over_best_other_selector_2n_median"] == pytest.approx(
        within["sc_learned_l1_over_best_other_selector_2n_median"])
