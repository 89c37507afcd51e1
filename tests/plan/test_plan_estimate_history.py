"""A page's observations as the change-rate estimator reads them (xyro.jobs.plan_estimate:
PageEstimator.history, DESIGN.md §6): one access per time, and no change lost in merging."""

from __future__ import annotations

import sqlite3

from xyro.jobs.plan_estimate import PageEstimator
from xyro.jobs.plan_settings import PlannerSettings

UNIT = 3600.0


def _history(rows: list[tuple[float, int, float | None]]) -> tuple[list, list]:
    settings = PlannerSettings(time_unit_s=UNIT, bandwidth=20, discovery_share=0.25,
                               min_interval_units=1.0, max_interval_units=50.0,
                               importance_floor=0.0, importance_source="rank")
    conn = sqlite3.connect(":memory:")
    try:
        history = PageEstimator(conn, settings).history(rows)
    finally:
        conn.close()
    return history.access_times.tolist(), history.changed.tolist()


def test_a_change_seen_at_the_first_access_time_counts_in_the_next_interval() -> None:
    # Two fetches within the clock's resolution, the second with another body: the page
    # changed, and the only interval that can hold it is the one after that time.
    times, changed = _history([(0.0, 0, None), (0.0, 1, None),
                                                 (UNIT, 0, None), (2 * UNIT, 0, None)])
    assert times == [0.0, 1.0, 2.0]
    assert changed == [True, False]


def test_a_change_seen_at_a_repeated_later_time_counts_in_the_interval_ending_there() -> None:
    times, changed = _history([(0.0, 0, None), (UNIT, 0, None),
                                                 (UNIT, 1, None), (2 * UNIT, 0, None)])
    assert times == [0.0, 1.0, 2.0]
    assert changed == [True, False]
