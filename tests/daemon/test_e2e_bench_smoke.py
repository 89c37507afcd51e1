"""Keeps tests/bench/e2e_freshness.py from rotting: a tiny run (400 pages, 4 hosts, 4 units at
3,000x, the planner and the uniform baseline, with §6's weights, the non-default ones), its one
JSON line checked; and the two weightings of its ground truth."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xyro.synthweb.spec import WebSpec

BENCH = Path(__file__).resolve().parents[1] / "bench" / "e2e_freshness.py"
SUMMARY = {"planner_over_clamped_optimum", "uniform_over_planner",
           "change_proportional_over_planner", "politeness_violations", "pages", "hosts",
           "units"}


def test_e2e_benchmark_tiny_run_prints_one_json_line() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--pages", "400", "--hosts", "4",
                          "--units", "4", "--speed", "3000", "--policies", "planner,uniform",
                          "--weights", "rank"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert SUMMARY <= set(report["summary"])
    summary = report["summary"]
    assert (summary["pages"], summary["hosts"], summary["units"]) == (400, 4, 4)
    assert summary["planner_over_clamped_optimum"] > 0 and summary["uniform_over_planner"] > 0
    assert summary["change_proportional_over_planner"] is None  # not run
    assert isinstance(summary["daemon_kept_up"], bool)  # its value depends on the machine's load
    assert report["setup"]["pages_scored"] > 0 and report["setup"]["weights"] == "rank"
    for policy in ("planner", "uniform"):
        figures = report[policy]
        assert 0 < figures["freshness"] <= 1 and figures["obsolescence"] > 0
        assert figures["fetched_per_unit"] <= 40  # G = 10 % of the pages per unit


def test_truth_weights_html_pages_by_interest_or_by_importance(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH.parent))  # as when run as a script
    bench = importlib.import_module(BENCH.stem)
    web = WebSpec(seed=3, n_hosts=4, n_pages=400, hostile=frozenset())
    rank, importance = bench.Truth.of(web, "rank"), bench.Truth.of(web)  # default: importance
    html = np.array([p.kind == "html" for p in rank.model.pages])
    assert np.array_equal(rank.r[~html], importance.r[~html])  # XML: importance both ways
    assert not np.allclose(rank.r[html], importance.r[html])   # HTML: interest vs importance
    assert importance.r.mean() == pytest.approx(1.0)


def test_the_window_counts_its_whole_units_and_a_unit_never_opened_as_none_fetched(
        monkeypatch) -> None:
    """A daemon starved by a loaded machine may write no row for a unit, and it is stopped
    as the last unit begins (a row, cut short, or none): neither may shift the window."""
    monkeypatch.syspath_prepend(str(BENCH.parent))
    bench = importlib.import_module(BENCH.stem)
    rows = [(9, 40, 40, 0, 0, 0), (10, 40, 32, 8, 0, 0), (12, 40, 30, 10, 0, 3),
            (13, 5, 5, 0, 0, 0)]  # unit 11 never opened; 13 began as the run stopped
    run = bench.Run("planner", "agent", [], rows, Path("unused"))
    window = bench.window_units(run, 10, 13)
    assert window["fetched_per_unit"] == pytest.approx(80 / 3)
    assert window["refresh_per_unit"] == pytest.approx(62 / 3)
    assert window["carried_over_per_unit"] == pytest.approx(1.0)
    assert bench.window_units(bench.Run("planner", "agent", [], rows[:3], Path("unused")),
                              10, 13) == window
