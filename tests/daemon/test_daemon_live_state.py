"""``crawl.live`` holds the running daemon's counters only: a previous run's are cleared at
the start (before this run publishes its own) and at the stop, so that `xyro status` never
shows a stopped crawl as "live crawl of the daemon" (in-process daemon, real SQLite file)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from metadata import MetadataStore, SetState
from xyro.app import App
from xyro.cli import cli
from xyro.cli import status as cli_status
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.service.daemon import Daemon
from xyro.service.sdnotify import Notifier

if "status" not in cli.commands:
    cli_status.register(cli)

STALE = {"pages": 77, "pages_per_s": 7.0, "elapsed_s": 11.0, "updated_at": 1.0}


class _ReadyProbe(Notifier):
    """Reads ``crawl.live`` from the file when the daemon says READY (frontier restored,
    nothing published yet), after its writer has committed what it was given; then
    publishes the live counters once, so that the stop has some to clear."""

    def __init__(self, db: Path) -> None:
        super().__init__("")
        self.db = db
        self.daemon: Daemon | None = None
        self.live_at_ready: object = "not read"

    def ready(self, status: str) -> bool:
        assert self.daemon is not None and self.daemon._parts is not None
        self.daemon._parts.writer.flush()
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM state WHERE key = 'crawl.live'").fetchone()
        finally:
            conn.close()
        self.live_at_ready = None if row is None else json.loads(row[0])
        self.daemon._publish(final=False)  # as the status job does every 10 s
        return super().ready(status)


def test_a_previous_runs_live_counters_are_cleared_at_start_and_at_stop(
        tmp_path: Path) -> None:
    db = tmp_path / "xyro.db"
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage: {{database: '{db}', warehouse_dir: '{tmp_path / 'w'}'}}\n"
                      "ranking: {schedule_s: 3600}\nrefresh: {time_unit_s: 3600}\n")
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(SetState("crawl.live", json.dumps(STALE)))  # a daemon killed earlier
    probe = _ReadyProbe(db)
    daemon = Daemon(App(load_config(config, {}), WallClock()), probe)
    probe.daemon = daemon
    daemon.run(max_seconds=0.5)  # no seeds: the crawl loop idles, then stops
    assert probe.live_at_ready is None
    with MetadataStore.open(db, read_only=True) as store:
        assert store.get_state("crawl.live") is None
        assert json.loads(store.get_state("crawl.last_run"))["pages"] == 0
    result = CliRunner().invoke(cli, ["status"], env={"XYRO_CONFIG": str(config)},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "live crawl: none published" in result.stdout
    assert "live crawl of the daemon" not in result.stdout
