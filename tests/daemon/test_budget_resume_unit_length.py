"""A restart inside a unit continues its count of G after ``refresh.time_unit_s`` was made
longer: the rows of the old, shorter unit have larger numbers and must not be taken for the
unit running now (:func:`xyro.app.build_budget`, a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata import MetadataStore, UnitSpent
from xyro.app import UNIT_RESERVED, App, build_budget
from xyro.clock import ManualClock
from xyro.config_load import load_config
from xyro.crawl.frontier import DISCOVERY

G = 300
# 60-s units until 60,330 s (unit 1005, stopped in it); the restart is in 600-s unit 100.
OLD_ROWS = (UnitSpent(1004, 60.0, 50, 50, 40, 10, 0, 3, True, 60_300.0),
            UnitSpent(1005, 60.0, 50, 20, 15, 5, 0, None, False, 60_330.0))


def _app(tmp_path: Path, clock: ManualClock) -> App:
    return App(load_config(None, {}, [f"storage.database={tmp_path / 'xyro.db'}",
                                      f"storage.warehouse_dir={tmp_path / 'w'}",
                                      "refresh.time_unit_s=600",
                                      f"refresh.bandwidth_pages_per_unit={G}"]), clock)


def test_a_restart_in_a_longer_unit_keeps_what_the_unit_spent(tmp_path: Path) -> None:
    clock = ManualClock(60_340.0)
    app = _app(tmp_path, clock)
    with app.open_store(create=True) as store:
        with store.writer() as w:
            for row in OLD_ROWS:
                w.submit(row)
            first = build_budget(app, store, None, w)  # type: ignore[arg-type]
            assert first.unit == 100 and first.fetched == 0  # nothing spent in unit 100 yet
            for _ in range(120):
                assert first.allows(clock.now())
                first.spend(DISCOVERY)
            clock.advance(60.0)
            first.record(clock.now())  # the daemon's stop writes the running unit's row
        clock.advance(30.0)  # restarted 30 s later, still in unit 100
        with store.writer() as w:
            second = build_budget(app, store, None, w)  # type: ignore[arg-type]
    assert second.unit == 100 and second.fetched == 120
    assert store_unit(tmp_path).unit == 100  # the newest row is the running unit's


def store_unit(tmp_path: Path) -> UnitSpent:
    with MetadataStore.open(tmp_path / "xyro.db", read_only=True) as store:
        return store.fetch_units(1)[0]


def test_a_row_of_the_old_length_is_not_resumed(tmp_path: Path) -> None:
    """Nothing recorded in the running unit yet: its count starts at 0 even though a row
    of the old length, numbered above it, was written last."""
    clock = ManualClock(60_340.0)
    app = _app(tmp_path, clock)
    with app.open_store(create=True) as store:
        with store.writer() as w:
            for row in OLD_ROWS:
                w.submit(row)
        with store.writer() as w:
            budget = build_budget(app, store, None, w)  # type: ignore[arg-type]
    assert budget.unit == 100 and budget.fetched == 0 and budget.allows(clock.now())


@pytest.mark.parametrize("stored", ['"[100, 600.0, 1e999]"', '"[100, 600.0]"', '"x"', "7"])
def test_a_reservation_row_edited_by_hand_is_ignored(tmp_path: Path, stored: str) -> None:
    clock = ManualClock(60_340.0)
    app = _app(tmp_path, clock)
    with app.open_store(create=True) as store:
        with store.atomic() as conn:
            conn.execute("INSERT INTO state (key, value) VALUES (?, ?)",
                         (UNIT_RESERVED, stored))
        with store.writer() as w:
            budget = build_budget(app, store, None, w)  # type: ignore[arg-type]
    assert budget.unit == 100 and budget.fetched == 0


def test_a_reservation_counts_at_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(60_340.0)
    app = _app(tmp_path, clock)
    with app.open_store(create=True) as store:
        with store.writer() as w:
            first = build_budget(app, store, None, w)  # type: ignore[arg-type]
            first.spend(DISCOVERY)   # reserved: 5 % of G, committed before the fetch is sent
        with store.writer() as w:   # killed: no row, the reservation alone
            second = build_budget(app, store, None, w)  # type: ignore[arg-type]
    assert second.fetched == round(0.05 * G)
