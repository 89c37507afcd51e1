"""The crawl bandwidth as a budget: G page fetches per time unit (xyro.crawl.unit_budget)."""

from __future__ import annotations

import threading

import pytest

from metadata import UnitSpent
from xyro.crawl.frontier import BACKGROUND, DISCOVERY, LOADER, REFRESH, URGENT
from xyro.crawl.unit_budget import UnitBudget

UNIT_S = 100.0


def _budget(bandwidth: int = 3, queued: int = 0, share: float = 0.2,
            ) -> tuple[UnitBudget, list[UnitSpent]]:
    rows: list[UnitSpent] = []
    queued = [queued]  # type: ignore[assignment]
    return UnitBudget(bandwidth, UNIT_S, share, lambda: queued[0], rows.append), rows


def test_g_fetches_per_unit_then_none_until_the_next_unit() -> None:
    budget, rows = _budget(bandwidth=3, queued=7)
    spent = 0
    for _ in range(10):
        if budget.allows(250.0):
            budget.spend(REFRESH)
            spent += 1
    assert spent == 3 and budget.next_unit_at() == 300.0
    assert budget.allows(299.9) is False
    assert budget.allows(300.0) is True  # unit 3: a fresh G
    assert rows == [UnitSpent(2, UNIT_S, 3, 3, 3, 0, 0, 7, True, 300.0)]


def test_levels_are_counted_apart_and_loader_needs_are_not_counted() -> None:
    budget, _ = _budget(bandwidth=10)
    assert budget.allows(0.0)
    for level in (REFRESH, DISCOVERY, BACKGROUND, URGENT, LOADER, LOADER):
        budget.spend(level)
    snap = budget.snapshot()
    assert (snap["fetched"], snap["refresh"], snap["discovery"], snap["urgent"]) == (4, 1, 2, 1)


def test_unread_pages_beyond_their_share_wait_while_due_pages_are_queued() -> None:
    queued = [8]
    budget = UnitBudget(10, UNIT_S, 0.2, lambda: queued[0], lambda row: None)
    assert budget.max_level(0.0) == BACKGROUND
    budget.spend(DISCOVERY)
    budget.spend(BACKGROUND)  # rho * G = 2 unread pages: their share is spent
    assert budget.max_level(1.0) == REFRESH  # the 8 fetches left are the 8 due pages'
    queued[0] = 7  # one fetch more than the due pages need: unread pages may have it
    assert budget.max_level(1.5) == BACKGROUND
    queued[0] = 8
    assert budget.max_level(0.8 * UNIT_S) == BACKGROUND  # last fifth, no servable: no hold
    queued[0] = 0  # no due page left: unread pages may take the rest of G
    assert budget.max_level(2.0) == BACKGROUND
    for _ in range(8):
        budget.spend(DISCOVERY)
    assert budget.max_level(3.0) == LOADER  # G spent: only what loading documents need


def test_urgent_fetches_come_out_of_the_discovery_share_and_plans_are_awaited() -> None:
    queued = [0]
    budget = UnitBudget(10, UNIT_S, 0.2, lambda: queued[0], lambda row: None, planner=True)
    assert budget.max_level(0.0) == BACKGROUND
    budget.spend(URGENT)
    budget.spend(DISCOVERY)
    # The unit's due pages are not queued yet: unread pages wait for them.
    assert budget.max_level(1.0) == REFRESH
    budget.planned(0)
    assert budget.max_level(2.0) == BACKGROUND
    budget.planned(0)
    assert budget.max_level(UNIT_S + 1) == BACKGROUND  # a new unit: the share is fresh
    budget.spend(DISCOVERY)
    budget.spend(DISCOVERY)
    assert budget.max_level(UNIT_S + 2) == REFRESH  # ...and unit 1 is not planned yet


def test_a_restart_within_the_unit_continues_its_count() -> None:
    budget, _ = _budget(bandwidth=5)
    stored = UnitSpent(1, UNIT_S, 5, 4, 2, 1, 1, None, False, 150.0)
    budget.resume(stored, 160.0)
    assert budget.allows(160.0)
    budget.spend(DISCOVERY)
    assert not budget.allows(161.0)
    # A row of an ended unit, or of another unit, grants the full G again.
    for row in (UnitSpent(1, UNIT_S, 5, 4, 2, 1, 1, 0, True, 199.0),
                UnitSpent(0, UNIT_S, 5, 5, 5, 0, 0, None, False, 99.0), None):
        fresh, _ = _budget(bandwidth=5)
        fresh.resume(row, 160.0)
        assert fresh.snapshot()["fetched"] == 0


def test_running_rows_and_the_ended_row_of_a_unit() -> None:
    budget, rows = _budget(bandwidth=4, queued=2)
    assert budget.record(0.0) is None  # before the first unit: nothing to say
    budget.allows(10.0)
    budget.spend(URGENT)
    running = budget.record(20.0)
    assert running == UnitSpent(0, UNIT_S, 4, 1, 0, 0, 1, None, False, 20.0)
    budget.allows(100.0)
    assert rows[-1].ended and rows[-1].carried_over == 2 and rows[-1].fetched == 1
    assert budget.snapshot()["previous_carried_over"] == 2


def test_a_running_row_never_lands_after_its_units_ended_row() -> None:
    """The daemon's status job records from another thread while the dispatcher rolls."""
    budget, rows = _budget(bandwidth=10**9)
    stop = threading.Event()

    def status_job() -> None:
        while not stop.is_set():
            budget.record(0.0)

    thread = threading.Thread(target=status_job)
    thread.start()
    try:
        for t in range(0, 200 * int(UNIT_S), 7):
            if budget.allows(float(t)):
                budget.spend(REFRESH)
    finally:
        stop.set()
        thread.join()
    ended = {row.unit for row in rows if row.ended}
    for i, row in enumerate(rows):
        if row.unit in ended and not row.ended:
            assert any(r.unit == row.unit and r.ended for r in rows[i + 1:]), row


def test_bad_budgets_and_rows_are_refused() -> None:
    for bandwidth, unit_s, share in ((0, UNIT_S, 0.2), (5, 0.0, 0.2), (5, UNIT_S, 1.5)):
        with pytest.raises(ValueError, match="bandwidth >= 1.*positive time unit.*share"):
            UnitBudget(bandwidth, unit_s, share, lambda: 0, lambda row: None)
    with pytest.raises(ValueError, match="not refresh \\+ discovery \\+ urgent"):
        UnitSpent(0, UNIT_S, 5, 4, 1, 1, 1, None, False, 0.0)


def test_in_the_last_fifth_unread_pages_take_only_what_the_due_pages_cannot_use() -> None:
    """Due pages released together at 0.8 of the unit wait for their hosts' politeness;
    unread pages of ready hosts must not take the fetches those pages still need."""
    queued, servable = [8], [8]
    asked: list[tuple[float, int]] = []

    def can_start(until: float, cap: int) -> int:
        asked.append((until, cap))
        return min(servable[0], cap)

    budget = UnitBudget(10, UNIT_S, 0.2, lambda: queued[0], lambda row: None,
                        servable=can_start)
    assert budget.max_level(0.0) == BACKGROUND
    budget.spend(DISCOVERY)
    budget.spend(DISCOVERY)  # the unread share is spent; 8 fetches left
    assert budget.max_level(0.82 * UNIT_S) == REFRESH  # all 8 can start in time
    assert asked == [(0.9 * UNIT_S, 8)]  # before the last tenth, which holds nothing
    servable[0] = 5  # 3 of them cannot (their host's delay): unread pages may have those
    assert budget.max_level(0.85 * UNIT_S) == BACKGROUND
    servable[0] = 8
    assert budget.max_level(0.9 * UNIT_S) == BACKGROUND  # the last tenth: G is spent
    queued[0] = 7  # fewer due pages than fetches left: no need to ask the frontier
    asked.clear()
    assert budget.max_level(0.86 * UNIT_S) == BACKGROUND and asked == []
    queued[0], servable[0] = 9, 9
    assert budget.max_level(0.5 * UNIT_S) == REFRESH  # before the last fifth: all queued


def test_unread_pages_leave_room_for_as_many_urgent_fetches_as_the_last_unit_had() -> None:
    queued = [0]
    budget = UnitBudget(10, UNIT_S, 0.3, lambda: queued[0], lambda row: None)
    assert budget.max_level(0.0) == BACKGROUND
    budget.spend(URGENT)
    budget.spend(URGENT)
    queued[0] = 20
    budget.spend(DISCOVERY)  # share 3: 2 urgent + 1 unread
    assert budget.max_level(1.0) == REFRESH
    # Unit 1: its re-reads have not come yet, but the last unit had 2: unread pages take 1.
    assert budget.max_level(UNIT_S) == BACKGROUND
    budget.spend(DISCOVERY)
    assert budget.max_level(UNIT_S + 1) == REFRESH
    budget.spend(URGENT)
    budget.spend(URGENT)  # they came: the refresh share is whole (7 of 10 left)
    assert budget.bandwidth - budget.fetched == 7
    # A unit after one with no urgent fetch gives unread pages the whole share again.
    for level in (REFRESH,) * 6:
        budget.spend(level)
    assert budget.max_level(2 * UNIT_S) == BACKGROUND
    for _ in range(3):
        budget.spend(DISCOVERY)
    assert budget.max_level(3 * UNIT_S) == BACKGROUND  # unit 2 had no urgent fetch
    for _ in range(3):
        budget.spend(DISCOVERY)
    assert budget.max_level(3 * UNIT_S + 1) == REFRESH


def test_fetches_are_reserved_ahead_before_they_are_sent() -> None:
    # The records of a kill's last fetches are lost while their requests reached the
    # servers: a committed reservation covers every request before it goes out.
    reserved: list[tuple[int, float, int]] = []
    budget = UnitBudget(100, UNIT_S, 1.0, lambda: 0, lambda row: None,
                        reserve=lambda unit, unit_s, count: reserved.append((unit, unit_s, count)))
    assert budget.allows(250.0)
    for n in range(1, 13):
        budget.spend(DISCOVERY)
        assert reserved[-1][2] >= n            # sent only once reserved
    budget.spend(LOADER)                       # a DTD: not a page of G
    assert reserved == [(2, UNIT_S, 5), (2, UNIT_S, 10), (2, UNIT_S, 15)]  # 5 % of G a time
    for _ in range(88):
        budget.spend(DISCOVERY)
    assert reserved[-1] == (2, UNIT_S, 100)   # never beyond G


@pytest.mark.parametrize("reserved, expected", [
    ((2, UNIT_S, 37), 37),          # a kill after 37 were sent, 30 recorded: 37 spent
    ((2, UNIT_S, 20), 30),          # the row is ahead: it stands
    ((1, UNIT_S, 90), 30),          # another unit's
    ((2, 60.0, 90), 30),            # another unit length's
    ((2, UNIT_S, 500), 100),        # never beyond G
])
def test_a_restart_counts_at_least_the_reservation_as_spent(
        reserved: tuple[int, float, int], expected: int) -> None:
    budget = UnitBudget(100, UNIT_S, 0.5, lambda: 0, lambda row: None,
                        reserve=lambda *args: None)
    row = UnitSpent(2, UNIT_S, 100, 30, 10, 20, 0, None, False, 210.0)
    budget.resume(row, 250.0, reserved)
    assert budget.fetched == expected
    assert budget.snapshot()["refresh"] == 10   # the unknown ones count as unread pages'


def test_a_clean_stop_brings_the_reservation_down_to_the_fetches_made() -> None:
    # Else every restart within the unit (an upgrade, `systemctl restart`) counted the
    # reserved rest as spent: five stops after 3 fetches each took 44 of G = 200.
    reserved: list[int] = []
    budget = UnitBudget(200, UNIT_S, 1.0, lambda: 0, lambda row: None,
                        reserve=lambda unit, unit_s, count: reserved.append(count))
    assert budget.allows(250.0)
    for _ in range(3):
        budget.spend(DISCOVERY)
    row = budget.close(251.0)
    assert row is not None and row.fetched == 3 and reserved == [10, 3]
    again = UnitBudget(200, UNIT_S, 1.0, lambda: 0, lambda row: None, reserve=lambda *a: None)
    again.resume(row, 260.0, (2, UNIT_S, reserved[-1]))
    assert again.fetched == 3
