"""A restart that meets an OPIC checkpoint its configuration did not write, or a damaged one
(000/004, DESIGN.md §5 "OPIC", §7): `xyro crawl` continues, or stops with one line that
says what to do and exit code 2 (systemd's RestartPreventExitStatus=2), never a traceback.

Real crawls of a TreeSite on 127.0.0.1 through click's CliRunner, real SQLite files."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from ranking.opic import OpicParams, OpicState
from ranking.opic_adaptive import AdaptiveParams
from xyro.cli import cli
from xyro.crawl.opic_online import OnlineOpic, OpicCheckpointError


def _crawl(tmp_path: Path, site_base: str, *settings: str) -> Result:
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage: {{database: '{tmp_path / 'xyro.db'}', "
                      f"warehouse_dir: '{tmp_path / 'w'}'}}\n"
                      f"seeds: ['{site_base}/p0.html']\n"
                      "scope: {allow_private_addresses: true}\n"
                      "crawler: {politeness: {delay_s: 0}}\n")
    args = ["-c", str(config)]
    for setting in settings:
        args += ["-s", setting]
    if not (tmp_path / "xyro.db").exists():
        assert CliRunner().invoke(cli, [*args, "init"]).exit_code == 0
    return CliRunner().invoke(cli, [*args, "crawl", "--pages", "6"])


def _warnings(result: Result, *parts: str) -> list[str]:
    """The WARNING lines the run logged (to stderr, in the CLI's text format) with all
    ``parts``."""
    return [line for line in result.output.splitlines()
            if " WARNING " in line and all(p in line for p in parts)]


def _checkpoint(db: Path) -> bytes:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT data FROM opic_checkpoint").fetchone()[0]


def _replace_checkpoint(db: Path, data: bytes) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE opic_checkpoint SET data = ?", (data,))


@pytest.fixture
def crawled(tmp_path: Path, tree_site: Callable) -> Callable[..., Result]:
    """A store whose first crawl checkpointed OPIC under the default estimate (inflow);
    returns a function running `xyro crawl` on it again with settings."""
    site = tree_site(60)
    first = _crawl(tmp_path, site.base)
    assert first.exit_code == 0, first.output
    assert OnlineOpic.from_checkpoint(_checkpoint(tmp_path / "xyro.db")).facts()[
        "opic_damping"] == 0.85
    return lambda *settings: _crawl(tmp_path, site.base, *settings)


@pytest.mark.parametrize("estimate", ["bao", "fixed_window", "variable_window"])
def test_a_window_estimate_continues_an_inflow_checkpoint(
        crawled: Callable[..., Result], tmp_path: Path, estimate: str) -> None:
    again = crawled(f"ranking.opic.estimate={estimate}")
    assert again.exit_code == 0, again.output
    assert "Traceback" not in again.output
    assert len(_warnings(again, "no Adaptive OPIC histories", f"estimate {estimate}")) == 1
    restored = OnlineOpic.from_checkpoint(_checkpoint(tmp_path / "xyro.db"), estimate=estimate)
    urls, values = restored.estimates()  # the histories were kept: this estimate exists
    assert len(urls) > 6 and abs(values.sum() - 1.0) < 1e-9
    third = crawled(f"ranking.opic.estimate={estimate}")  # and a further restart is quiet
    assert third.exit_code == 0, third.output
    assert not _warnings(third, "no Adaptive OPIC histories")


@pytest.mark.parametrize("damage", ["truncated", "flipped", "no zip"])
def test_a_damaged_checkpoint_stops_with_one_line_and_exit_2(
        crawled: Callable[..., Result], tmp_path: Path, damage: str) -> None:
    db = tmp_path / "xyro.db"
    data = _checkpoint(db)
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "flipped":   # inside the first member's compressed bytes: zlib or CRC
        data = data[:200] + bytes(b ^ 0x5A for b in data[200:216]) + data[216:]
    else:
        data = b"\x00" * 64
    _replace_checkpoint(db, data)
    again = crawled()
    assert again.exit_code == 2, again.output
    assert "Traceback" not in again.output and "uncaught" not in again.output
    assert "DELETE FROM opic_checkpoint" in again.output and str(db) in again.output
    with sqlite3.connect(db) as conn:   # what the message says to do, works
        conn.execute("DELETE FROM opic_checkpoint")
    assert crawled().exit_code == 0


def test_a_damping_change_is_logged_with_the_damping_used(
        crawled: Callable[..., Result], tmp_path: Path) -> None:
    again = crawled("ranking.damping=0.5")
    assert again.exit_code == 0, again.output
    notes = _warnings(again, "damping c = 0.85, not ranking.damping = 0.5",
                      "DELETE FROM opic_checkpoint")
    assert len(notes) == 1
    facts = OnlineOpic.from_checkpoint(_checkpoint(tmp_path / "xyro.db")).facts()
    assert facts["opic_damping"] == 0.85


def test_checkpoint_bytes_altered_anywhere_raise_only_the_checkpoint_error() -> None:
    opic = OnlineOpic()
    rng = np.random.default_rng(3)
    for k in range(200):
        opic.visit(f"http://a.example/{k}",
                   [f"http://a.example/{j}" for j in rng.integers(0, 300, 5)])
    data = opic.checkpoint().data
    for cut in range(0, len(data), 97):
        with pytest.raises(OpicCheckpointError):
            OnlineOpic.from_checkpoint(data[:cut])
    for _ in range(600):
        altered = bytearray(data)
        for p in rng.integers(0, len(data), 2):
            altered[int(p)] ^= 1 << int(rng.integers(8))
        try:
            OnlineOpic.from_checkpoint(bytes(altered))
        except OpicCheckpointError as exc:
            assert exc.exit_code == 2 and "DELETE FROM opic_checkpoint" in str(exc)


def test_window_histories_start_at_each_page_s_inflow_rate() -> None:
    state = OpicState.create(0, OpicParams())
    state.add_pages(50, cash=1.0 / 50)
    rng = np.random.default_rng(5)
    for page in rng.integers(0, 50, 400):
        state.visit(int(page), rng.integers(0, 50, 3))
    adaptive = state.with_adaptive(AdaptiveParams())
    assert state.params.adaptive is None   # the original is unchanged
    inflow = state.estimate("inflow")
    uniform = np.abs(inflow - 1 / 50).sum()   # what a new page's default rate would give
    for kind in ("bao", "fixed_window", "variable_window"):
        assert np.abs(adaptive.estimate(kind) - inflow).sum() < 0.6 * uniform, kind
    assert np.array_equal(adaptive.cash(), state.cash()) and adaptive.clock == state.clock
    before = adaptive.total_cash()
    for page in rng.integers(0, 50, 200):   # the histories go on with the visits
        adaptive.visit(int(page), rng.integers(0, 50, 3))
    assert abs(adaptive.total_cash() - before) < 1e-12
