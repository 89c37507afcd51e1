"""The ingest benchmark still runs (--quick) and prints the keys the report relies on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "metadata_ingest.py"


def test_metadata_ingest_quick(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--quick", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result = json.loads(lines[0])
    ours = result["xyro_batched_writer"]
    for key in ("pages_per_s", "links_per_s", "bytes_per_url", "peak_rss_mb",
                "export_csr_seconds"):
        assert ours[key] > 0, key
    assert ours["graph_m"] == ours["links"] == 20_000 * 10
    assert ours["urls"] == 100 + 20_000 * 5  # seeds + five brand-new URLs per page
    assert result["per_fetch_transaction"]["pages_per_s"] > 0
    assert result["per_fetch_transaction"]["batches"] >= 1000  # one commit per fetch
    assert result["ratios"]["pages_per_s_batched_vs_per_fetch_transaction_same_slice"] > 0
    assert {"cpu", "cores", "ram_gb", "python"} <= set(result["machine"])
