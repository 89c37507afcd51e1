"""The daemon's "due this unit" (the ``summary:`` line, the demo's progress) counts the due
pages the planner queued, not its whole fetch list: the pages read ahead of their due time
to fill G are not due (real SQLite file, the daemon's own planning step)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from xyro.app import App, build_crawler
from xyro.clock import ManualClock
from xyro.config_load import load_config
from xyro.service.daemon import Daemon
from xyro.service.sdnotify import Notifier


def _plan_at(daemon: Daemon, clock: ManualClock, unit: float, start: float,
             unit_s: float) -> str:
    """Run the daemon's planning step at ``unit`` units after ``start``; return the
    plan's job-run detail once committed."""
    clock.set(start + unit_s * unit)
    daemon._plan_unit()
    assert daemon._parts is not None and daemon._store is not None
    daemon._parts.writer.flush()
    conn = daemon._store.read_connection()
    try:
        (detail,) = conn.execute("SELECT detail FROM job_runs WHERE name = 'plan' "
                                 "ORDER BY id DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    return detail


def test_due_this_unit_is_the_due_folder_not_the_fetch_list(
        tmp_path: Path, fill: Callable[[list], None],
        kit: SimpleNamespace) -> None:
    # As test_a_short_due_folder_is_filled_from_the_next_folders: nothing unread, and in
    # unit 22 the due folder holds less than G, so later folders fill the fetch list.
    fill([rec for i in range(30) for rec in kit.fetch_history(
        f"http://h{i % 3}.example/p{i}.xml", kit.regular(4, 3.0, 0.37 * i), [0, 1, 1, 2])])
    clock = ManualClock(kit.start)
    app = App(load_config(None, {}, [
        f"storage.database={tmp_path / 'xyro.db'}", f"storage.warehouse_dir={tmp_path / 'w'}",
        f"refresh.time_unit_s={kit.unit}", "refresh.bandwidth_pages_per_unit=12",
        "refresh.discovery_share=0", "refresh.max_interval_units=50"]), clock)
    daemon = Daemon(app, Notifier(""))
    with app.open_store() as daemon_store:
        daemon._store = daemon_store
        daemon._parts = parts = build_crawler(app, daemon_store, budget=True)
        try:
            for unit in (20.0, 21.0):
                _plan_at(daemon, clock, unit, kit.start, kit.unit)
            detail = _plan_at(daemon, clock, 22.3, kit.start, kit.unit)
            due_this_unit = daemon._due_this_unit
        finally:
            parts.close()
            daemon._parts = daemon._store = None
    due = int(re.search(r"(\d+) due", detail).group(1))  # type: ignore[union-attr]
    ahead = int(re.search(r"(\d+) ahead", detail).group(1))  # type: ignore[union-attr]
    assert 0 < due < 12 and ahead == 12 - due, detail  # the case at hand
    assert due_this_unit == due
