"""``xyro plan --explain`` says why a planned page is never refreshed (DESIGN.md §6): its r
below the importance floor, or no refresh bandwidth at all while pages are unread."""

from __future__ import annotations

import pytest

from xyro.clock import ManualClock
from xyro.jobs.plan_job import RefreshPlanner

START = 1_700_000_000.0  # as in conftest.py
URL = "http://a.example/p.xml"


def explain(store, kit, **over: object) -> dict:
    conn = store.read_connection()
    try:
        return RefreshPlanner(conn, [].append, ManualClock(START),
                              kit.settings(**over)).explain(URL)
    finally:
        conn.close()


@pytest.fixture
def page(store, fill, kit) -> None:
    """One XML page read three times, linking one unread page (discovery has work)."""
    fill(kit.fetch_history(URL, kit.regular(3, 1.0, -3.0), [0, 1, 2],
                           children=("http://a.example/new.xml",)))


@pytest.mark.parametrize("over", [{"discovery_share": 1.0},
                                  {"bandwidth": 1, "discovery_share": 0.6}],
                         ids=["rho_1", "rho_G_rounds_to_G"])
def test_no_refresh_bandwidth_is_named_not_the_floor(store, kit, page, over) -> None:
    info = explain(store, kit, **over)
    assert info["planned"] is True and info["interval_units"] is None
    why = info["why_not"]
    assert "refresh bandwidth" in why and "is 0" in why and "floor" not in why
    assert "refresh.bandwidth_pages_per_unit" in why and "refresh.discovery_share" in why


def test_below_the_floor_still_says_the_floor(store, kit, page) -> None:
    kit.set_ranks(store, [URL], importance=[0.01])
    why = explain(store, kit, discovery_share=1.0, importance_floor=0.1)["why_not"]
    assert "below the importance floor 0.1" in why
    assert "why_not" not in explain(store, kit)  # refreshed: nothing to explain
