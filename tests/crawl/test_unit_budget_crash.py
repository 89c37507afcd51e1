"""A crash within a time unit never lets the restarted crawl overspend G (DESIGN.md §6,
xyro.crawl.unit_budget): the stored count covers every page record that survived.

Real HTTP server on 127.0.0.1, real crawl, real SQLite file. The crash is simulated by
dropping every budget row written after the moment of the "kill" (the crawl's final row at
its stop among them), as SIGKILL would; the page records already submitted are committed
(a real kill may lose some of them too, which only makes the stored count safer).
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from metadata import UnitSpent
from xyro.app import build_crawler
from xyro.clock import unit_index
from xyro.crawl.frontier import DISCOVERY
from xyro.crawl.unit_budget import UnitBudget
from xyro.service.crawl_run import queue_seeds, restore_frontier

PAGES = 200
G = 40
KILL_AT = 20        # page records made when the process "dies"
STATUS_AT = 10      # page records made when the daemon's status job last wrote the row
UNIT_S = 10_000_000.0  # one unit for the whole test, on the wall clock


class Kill:
    """The budget's way to the writer, cut at the moment of the kill."""

    def __init__(self, submit: Any) -> None:
        self._submit = submit
        self.dead = False

    def __call__(self, row: UnitSpent) -> None:
        if not self.dead:
            self._submit(row)


def _crawl_until_killed(app: Any) -> None:
    """The first run: the status job writes the row once, then the process dies."""
    with app.open_store() as store:
        parts = build_crawler(app, store)
        crawler = parts.crawler
        kill = Kill(parts.writer.submit)
        crawler.budget = UnitBudget(G, UNIT_S, 1.0, lambda: 0, kill)
        crawler.settings = replace(crawler.settings, progress_interval_s=0.0)
        stop, status = threading.Event(), threading.Event()

        def progress(snap: dict[str, Any]) -> None:
            if snap["pages"] >= STATUS_AT and not status.is_set():
                status.set()
                crawler.budget.record(app.clock.now())  # type: ignore[union-attr]
            if snap["pages"] >= KILL_AT:
                kill.dead = True
                stop.set()

        try:
            assert queue_seeds(crawler.frontier, app.config.seeds) == 1
            crawler.run(max_seconds=30, stop=stop, on_progress=progress)
        finally:
            parts.close()


def _page_records(app: Any) -> tuple[int, UnitSpent | None]:
    with app.open_store() as store:
        conn = store.read_connection()
        try:
            (records,) = conn.execute("SELECT coalesce(sum(accesses), 0) FROM urls").fetchone()
        finally:
            conn.close()
        return records, store.fetch_unit(unit_index(app.clock.now(), UNIT_S), UNIT_S)


def test_the_count_that_survives_a_kill_covers_the_records_and_g_is_not_overspent(
        tmp_path: Path, tree_site: Any, local_app_for: Any) -> None:
    site = tree_site(PAGES)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0.html'])}",
                        f"refresh.time_unit_s={UNIT_S}", f"refresh.bandwidth_pages_per_unit={G}",
                        "refresh.discovery_share=1.0", "crawler.workers=4")
    unit = unit_index(app.clock.now(), UNIT_S)
    _crawl_until_killed(app)
    records, stored = _page_records(app)
    assert records >= KILL_AT and len(site.requests) == records
    assert stored is not None and stored.unit == unit and not stored.ended
    assert stored.fetched >= records, (stored, records)

    resumed = UnitBudget(G, UNIT_S, 1.0, lambda: 0, lambda row: None)
    resumed.resume(stored, app.clock.now())
    granted = 0
    while resumed.allows(app.clock.now()):
        resumed.spend(DISCOVERY)
        granted += 1
    assert records + granted <= G

    # The restarted crawl (the daemon's budget, resumed from the store) fetches only what
    # G has left: the web sees no more than G page requests in the unit.
    with app.open_store() as store:
        parts = build_crawler(app, store, budget=True)
        try:
            restore_frontier(store, parts.crawler)
            parts.crawler.run(max_seconds=1.0)
        finally:
            parts.close()
    assert unit_index(app.clock.now(), UNIT_S) == unit
    assert len(site.requests) <= G, (len(site.requests), records, stored)
    assert len(site.requests) >= G - 4  # the budget was spent, not refused (in flight: 4)
