"""The loader benchmark runs (--quick), prints one JSON line, and every timing it reports
stands for the work it names: all documents loaded with all their links, valid against the
DTD when validated, each with its own canonical signature when signed."""

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
    assert {"cpu", "cores", "ram_gb", "python", "load_avg_1min_at_start"} <= data["machine"].keys()
    assert [(r["validation"], r["canonical_signature"]) for r in data["runs"]] == [
        (False, False), (False, True), (True, False), (True, True)]
    expected_links = data["links_in_documents"]
    assert expected_links > 300 * 100  # ~135 items of ~150 bytes per 20 KB document
    for run in data["runs"]:
        assert {"documents_per_s", "mb_per_s", "seconds"} <= run.keys()
        assert run["documents_per_s"] > 0
        # Every document loaded with every link, valid against the DTD when validated, and
        # with its own C14N signature when signed: the work each timing stands for was done.
        assert run["documents"] == data["documents"] == 300
        assert run["links"] == expected_links
        assert run["valid"] == (300 if run["validation"] else 0)
        assert run["distinct_signatures"] == (300 if run["canonical_signature"] else 0)
    assert 15_000 < data["mean_document_bytes"] < 25_000
