"""``xyro status`` shows G as the crawl's last unit spent it (``xyro demo`` gives its own G,
far below the configured one), and says what ``hosts_waiting`` counts: hosts with queued
URLs, not hosts waiting out a politeness delay (a real SQLite file, the real command)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from metadata import MetadataStore, SetState, UnitSpent
from xyro.cli import cli
from xyro.cli import status as cli_status

if "status" not in cli.commands:
    cli_status.register(cli)

UNIT_S = 600.0
SNAPSHOT = {"pages": 300, "pages_per_s": 200.0, "elapsed_s": 1.5, "errors_by_kind": {},
            "queued": 1394, "in_flight": 0, "hosts_waiting": 20}


def _site(tmp_path: Path, units: list[UnitSpent]) -> dict[str, str]:
    db = tmp_path / "xyro.db"
    with MetadataStore.open(db) as store, store.writer() as w:
        for row in units:
            w.submit(row)
        w.submit(SetState("crawl.last_run", json.dumps(SNAPSHOT)))
    config = tmp_path / "xyro.yaml"  # G and ρ as the defaults: 100,000 pages, 20 %
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {tmp_path / 'w'}\n")
    return {"XYRO_CONFIG": str(config)}


def _status(env: dict[str, str], *args: str) -> Result:
    result = CliRunner().invoke(cli, ["status", *args], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_budget_g_is_the_one_the_last_unit_had(tmp_path: Path) -> None:
    env = _site(tmp_path, [UnitSpent(2993131, UNIT_S, 300, 300, 240, 50, 10, 2, True, 1.0),
                           UnitSpent(2993132, UNIT_S, 300, 264, 0, 238, 26, None, False, 2.0)])
    text = _status(env).stdout
    assert ("budget G" in text and "300 pages/unit: 240 refresh + 60 discovery (ρ = 20%), "
            "as the crawl's last unit had it; the configuration says 100,000") in text
    assert "264 of 300 fetched" in text
    # no plan stored: the status counts in the configured day; these units were 10 min
    assert "unit 2993132 of 10 min " in text and "unit 2993131 of 10 min " in text
    plan = json.loads(_status(env, "--json").stdout)["refresh"]
    assert plan["bandwidth_pages_per_unit"] == 300
    assert plan["configured_bandwidth_pages_per_unit"] == 100_000
    assert plan["refresh_pages_per_unit"] == 240 and plan["discovery_pages_per_unit"] == 60


def test_budget_g_is_the_configured_one_before_any_unit(tmp_path: Path) -> None:
    text = _status(_site(tmp_path, [])).stdout
    assert "100,000 pages/unit: 80,000 refresh + 20,000 discovery (ρ = 20%)\n" in text


def test_hosts_waiting_is_named_for_what_it_counts(tmp_path: Path) -> None:
    text = _status(_site(tmp_path, [])).stdout
    assert "1,394 queued, 0 in flight, 20 host(s) with queued URLs" in text
    assert "politeness delay" not in text
