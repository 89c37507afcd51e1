"""The ranking and the re-read of known sitemaps count their period from their last run, by
this daemon or an earlier one: APScheduler's interval jobs first fire one period after the
start, so a daemon restarted more often than ``ranking.schedule_s`` (or
``publication.refresh_s``) never ranked nor re-read anything (in-process daemons on a real
SQLite file; the first runs as scheduled at the start, on an injected clock)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from metadata import JobRun, MetadataStore, SetState
from xyro.app import App
from xyro.clock import ManualClock, WallClock
from xyro.config_load import load_config
from xyro.service.daemon import CATCH_UP_AFTER_S, PUBLICATION_KEY, Daemon
from xyro.service.sdnotify import Notifier

RANK_S, REREAD_S = 3600.0, 7200.0


def _settings(tmp_path: Path) -> list[str]:
    return [f"storage.database={tmp_path / 'x.db'}", f"storage.warehouse_dir={tmp_path / 'w'}",
            f"ranking.schedule_s={RANK_S}", f"publication.refresh_s={REREAD_S}",
            "refresh.time_unit_s=3600", "scope.allow_private_addresses=true"]


def _first_runs(tmp_path: Path, clock: ManualClock) -> dict[str, float]:
    """Real seconds from now to the first run of the ranking and of the re-read, as a
    daemon starting on ``clock`` schedules them."""
    daemon = Daemon(App(load_config(None, {}, _settings(tmp_path)), clock), Notifier(""))
    with daemon.app.open_store(create=True) as store:
        daemon._store = store
        scheduler = daemon._scheduler()
    now = datetime.now(timezone.utc)
    return {job: (scheduler.get_job(job).next_run_time - now).total_seconds()
            for job in ("rank", "publication")}


def _record(tmp_path: Path, *records: object, urls: tuple[str, ...] = ()) -> None:
    """What earlier daemons left in the database."""
    with MetadataStore.open(tmp_path / "x.db") as store:
        store.url_ids(list(urls))
        with store.writer() as writer:
            for record in records:
                writer.submit(record)


def test_a_period_counts_from_the_last_run_of_an_earlier_daemon(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now()
    _record(tmp_path, JobRun("rank", now - 1100.0, now - 1000.0, "ok"),
            SetState(PUBLICATION_KEY, now - 7000.0))
    first = _first_runs(tmp_path, clock)
    assert first["rank"] == pytest.approx(RANK_S - 1000.0, abs=1.0), first
    assert first["publication"] == pytest.approx(200.0, abs=1.0), first


def test_an_overdue_run_comes_soon_after_the_start(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now()
    _record(tmp_path, JobRun("rank", now - 5100.0, now - 5000.0, "ok"),
            JobRun("plan", now - 10.0, now - 9.0, "ok"),  # newer runs of other jobs
            SetState(PUBLICATION_KEY, now - 10 * REREAD_S))
    first = _first_runs(tmp_path, clock)
    assert first == pytest.approx({"rank": CATCH_UP_AFTER_S,
                                   "publication": CATCH_UP_AFTER_S}, abs=0.5), first


def test_a_run_recorded_ahead_of_the_clock_waits_one_period_not_more(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now()  # the clock was set back after the last ranking
    _record(tmp_path, JobRun("rank", now + 86400.0, now + 86500.0, "ok"))
    assert _first_runs(tmp_path, clock)["rank"] == pytest.approx(RANK_S, abs=1.0)


def test_without_a_recorded_run_a_database_with_urls_catches_up_a_new_one_waits(
        tmp_path: Path) -> None:
    fresh = _first_runs(tmp_path, ManualClock())  # nothing to rank nor re-read yet
    assert fresh == pytest.approx({"rank": RANK_S, "publication": REREAD_S}, abs=1.0), fresh
    _record(tmp_path, urls=("http://a.example/",))
    crawled = _first_runs(tmp_path, ManualClock())
    assert crawled == pytest.approx({"rank": CATCH_UP_AFTER_S,
                                     "publication": CATCH_UP_AFTER_S}, abs=0.5), crawled


def test_a_daemon_restarted_within_the_periods_still_ranks_and_rereads(
        tmp_path: Path, tree_site: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    site = tree_site(20)
    settings = [*_settings(tmp_path), f"seeds=[\"{site.base}/p0.html\"]"]

    def run(seconds: float) -> tuple[float, list[str]]:
        caplog.clear()
        clock = WallClock()
        started = clock.now()
        with caplog.at_level(logging.INFO, logger="xyro.service.daemon"):
            Daemon(App(load_config(None, {}, settings), clock), Notifier("")).run(
                max_seconds=seconds)
        return started, [r.getMessage() for r in caplog.records]

    _, first = run(1.5)   # a new database: its first periods count from this start
    assert "ranking started" not in first
    with MetadataStore.open(tmp_path / "x.db", read_only=True) as store:
        assert store.get_state(PUBLICATION_KEY) is None
    started, second = run(CATCH_UP_AFTER_S + 2.0)  # restarted long before either period
    assert "ranking started" in second, second
    assert any(m.startswith("publication sources queued for a re-read") for m in second)
    with MetadataStore.open(tmp_path / "x.db", read_only=True) as store:
        reread = store.get_state(PUBLICATION_KEY)
    assert isinstance(reread, float) and reread >= started
