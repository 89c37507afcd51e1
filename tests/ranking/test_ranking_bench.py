"""The PageRank benchmark still runs: ``tests/bench/pagerank.py --quick`` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "pagerank.py"


def test_pagerank_bench_quick_prints_one_json_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--quick", "--work-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout[:2000]
    result = json.loads(lines[0])
    assert {"machine", "params", "graphs", "out_of_core", "seconds"} <= set(result)
    assert {"cpu", "cores", "ram_gb", "python"} <= set(result["machine"])
    (graph,) = result["graphs"].values()
    xyro = graph["xyro"]
    assert xyro["l1_error"] <= result["params"]["target_l1_error"]
    assert xyro["gauss_seidel"]["sweeps"] >= 1 and xyro["jacobi"]["sweeps"] >= 1
    assert xyro["gauss_seidel"]["links_per_s_per_iteration"] > 0
    for peer in ("igraph", "networkx"):  # igraph is absent when only .[test] is installed
        assert "skipped" in graph[peer] or graph[peer]["l1_error"] <= 1e-8, graph[peer]
    assert "xyro_speedup_vs_networkx_solve" in graph["ratios"]
    counts = graph["sweeps_gauss_seidel_vs_jacobi"]
    assert {"importance_paper", "importance_teleport", "interest"} <= set(counts)
    ooc = result["out_of_core"]
    assert ooc["sweeps"] >= 1 and ooc["peak_rss_mb"] > 0 and ooc["seconds_per_sweep"] >= 0
    assert list(tmp_path.iterdir()) == []
