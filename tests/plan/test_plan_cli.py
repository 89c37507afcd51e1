"""``xyro plan`` through click's CliRunner on a real database file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from metadata import MetadataStore
from xyro.cli import cli
from xyro.cli.plan import register
from xyro.clock import WallClock


@pytest.fixture
def xyro(tmp_path: Path, fill, store: MetadataStore, kit):
    """A config pointing at the filled store; returns a function running the CLI."""
    if "plan" not in cli.commands:
        register(cli)
    now = WallClock().now()
    records = []
    for i in range(5):  # histories that end a few units before now (wall clock)
        url = f"http://h.example/p{i}.xml"
        times = [now - kit.unit * (10 - 2 * k) for k in range(5)]
        records += kit.fetch_history(url, times, [0, 1, 1, 2, 3][: 5] if i % 2 else [0] * 5,
                                     children=(f"http://h.example/new{i}.xml",))
    fill(records)
    config = tmp_path / "xyro.yaml"
    config.write_text(
        f"storage: {{database: '{store.path}', warehouse_dir: '{tmp_path / 'w'}'}}\n"
        f"refresh: {{time_unit_s: {kit.unit}, bandwidth_pages_per_unit: 6, "
        "discovery_share: 0.5, max_interval_units: 40}\n")

    def run(*args: str):
        return CliRunner().invoke(cli, ["-c", str(config), "plan", *args])
    return run


def test_plan_json_shows_due_units_omega_and_quantiles(xyro) -> None:
    result = xyro("--json", "--units", "5")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["planned_pages"] == 5
    assert len(report["due_per_unit"]) == 5
    assert sum(report["due_per_unit"].values()) <= 5
    assert report["omega_G_unclamped"] > 0 and report["omega_plan"] >= report["omega_G_unclamped"]
    assert set(report["interval_units_quantiles"]) == {"p0", "p10", "p50", "p90", "p100"}
    assert report["rate_sources"] == {"never-changed": 3, "signature-mle": 2}


def test_plan_text_and_explain(xyro) -> None:
    text = xyro()
    assert text.exit_code == 0 and "due_per_unit:" in text.stdout
    explained = xyro("--explain", "HTTP://H.example/p1.xml", "--json")
    assert explained.exit_code == 0, explained.output
    info = json.loads(explained.stdout.strip().splitlines()[-1])
    assert info["url"] == "http://h.example/p1.xml"
    assert info["rate_source"] == "signature-mle" and info["observations"] == 5
    assert info["observed_changes"] == 3 and info["interval_units"] >= 1


def test_plan_run_enqueues_due_and_discovery_into_the_frontier(xyro, store) -> None:
    result = xyro("--run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["enqueued"] == 6
    conn = sqlite3.connect(store.path)
    rows = conn.execute("SELECT u.url, f.priority FROM frontier f JOIN urls u ON "
                        "u.id = f.url_id").fetchall()
    planned = conn.execute("SELECT count(*) FROM urls WHERE due_unit IS NOT NULL AND "
                           "rate > 0 AND interval_units >= 1").fetchone()[0]
    jobs = conn.execute("SELECT name, status FROM job_runs").fetchall()
    conn.close()
    assert {p for _, p in rows} == {2, 3}
    refresh = [u for u, p in rows if p == 2]
    discovery = [u for u, p in rows if p == 3]
    assert all("/p" in u for u in refresh) and all("/new" in u for u in discovery)
    # rho * G = 3 slots for unread pages; maintenance slots the due folder leaves go too.
    assert len(discovery) >= 3 and len(refresh) + len(discovery) == 6
    assert planned == 5 and ("plan", "ok") in jobs


def test_plan_errors_are_one_line(xyro, tmp_path: Path) -> None:
    unknown = xyro("--explain", "http://nowhere.example/x")
    assert unknown.exit_code == 1 and "not in the database" in unknown.output
    assert "Traceback" not in unknown.output and len(unknown.output.strip().splitlines()) <= 2
    both = xyro("--run", "--explain", "http://h.example/p1.xml")
    assert both.exit_code == 2 and "do not go together" in both.output
    bad = xyro("--explain", "ftp://h.example/x")
    assert bad.exit_code == 2 and "not an http(s) URL" in bad.output
    missing = CliRunner().invoke(cli, ["--set", f"storage.database={tmp_path / 'no.db'}",
                                       "plan"])
    assert missing.exit_code == 2 and "xyro init" in missing.output
