"""The dispatcher's running rows (UnitBudget.record_spent): written after each round of
dispatches, before the fetches' records, so the stored count covers the records a crash
keeps (xyro.crawl.unit_budget)."""

from __future__ import annotations

import threading

from metadata import UnitSpent
from xyro.crawl.frontier import DISCOVERY, LOADER, REFRESH
from xyro.crawl.unit_budget import UnitBudget

UNIT_S = 100.0


def test_a_row_follows_each_round_that_spent_and_only_those() -> None:
    rows: list[UnitSpent] = []
    budget = UnitBudget(10, UNIT_S, 0.2, lambda: 0, rows.append)
    assert budget.record_spent(5.0) is None  # before the first unit
    budget.allows(5.0)
    assert budget.record_spent(5.0) is None and rows == []
    budget.spend(REFRESH)
    budget.spend(DISCOVERY)
    assert budget.record_spent(6.0) == UnitSpent(0, UNIT_S, 10, 2, 1, 1, 0, None, False, 6.0)
    budget.spend(LOADER)  # not counted against G: no new row
    assert budget.record_spent(7.0) is None and len(rows) == 1
    budget.record(8.0)  # the status job's row has the count: nothing to add
    budget.spend(REFRESH)
    assert budget.record_spent(9.0) is not None and rows[-1].fetched == 3
    budget.allows(UNIT_S)  # the unit's ended row, then a fresh count
    assert rows[-1].ended and budget.record_spent(UNIT_S) is None


def test_a_resumed_count_is_written_again_only_once_it_grows() -> None:
    rows: list[UnitSpent] = []
    budget = UnitBudget(10, UNIT_S, 0.2, lambda: 0, rows.append)
    budget.resume(UnitSpent(1, UNIT_S, 10, 4, 2, 1, 1, None, False, 150.0), 160.0)
    assert budget.record_spent(160.0) is None
    budget.spend(DISCOVERY)
    assert budget.record_spent(161.0) is not None and rows[-1].fetched == 5


def test_the_status_jobs_rows_never_hide_a_dispatch_from_the_next_row() -> None:
    """The status job records from another thread while the dispatcher spends: after each
    round, the last row submitted counts every fetch dispatched so far."""
    rows: list[UnitSpent] = []
    budget = UnitBudget(10**9, UNIT_S, 0.2, lambda: 0, rows.append)
    budget.allows(1.0)
    stop = threading.Event()

    def status_job() -> None:
        while not stop.is_set():
            budget.record(1.0)

    thread = threading.Thread(target=status_job)
    thread.start()
    try:
        for dispatched in range(1, 20_001):
            budget.spend(DISCOVERY)
            budget.record_spent(1.0)
            assert rows[-1].fetched >= dispatched
    finally:
        stop.set()
        thread.join()
