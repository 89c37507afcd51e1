"""t_max bounds how long a page goes unread (DESIGN.md §6: t_i ≤ t_max), also when the due
pages outnumber a unit's slots: the intervals are planned for the slots that exist,
G − round(ρ·G), and a page unread for longer than t_max goes before every other due page.
Units run on a real store through the writer, fetches simulated as FetchRecords."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType
from refresh import compose_unit
from xyro.clock import ManualClock
from xyro.crawl.frontier import REFRESH
from xyro.crawl.unit_budget import UnitBudget
from xyro.jobs.plan_job import RefreshPlanner
from xyro.jobs.plan_settings import PlannerSettings

START = 1_700_000_000.0  # as in conftest.py
UNIT = 3600.0
U0 = int(START // UNIT)


class Web:
    """Hot pages change at every read, cold ones never; the first hot page links a pool of
    unread URLs, each a 415 when fetched (it never joins the plan): discovery always has
    work, so the due pages get only their G − round(ρ·G) slots."""

    def __init__(self, store: MetadataStore, fill: Callable[[list], None], hot: int,
                 cold: int, pool: int) -> None:
        self.store, self.fill = store, fill
        self.hot = [f"http://hot.example/h{i}.xml" for i in range(hot)]
        self.cold = [f"http://cold.example/c{i}.xml" for i in range(cold)]
        self.version: Counter[str] = Counter()
        self.reads: dict[str, list[float]] = {url: [] for url in self.hot + self.cold}
        links = tuple(f"http://pool.example/new{i}.xml" for i in range(pool))
        records = []
        for k in range(6):  # six reads a unit apart before the planner's first unit
            for i, url in enumerate(self.hot + self.cold):
                records.append(self.read(url, START + UNIT * (k - 6) + i,
                                         links if k == 0 and i == 0 else ()))
        fill(records)

    def read(self, url: str, at: float, links: tuple[str, ...] = ()) -> FetchRecord:
        if "/new" in url:
            return FetchRecord(url, at, PageType.ERROR, http_status=415,
                               error_kind="content_type", error_detail="not XML")
        self.version[url] += "hot" in url
        self.reads[url].append(at)
        return FetchRecord(url, at, PageType.XML, http_status=200,
                           signature=f"{url}#{self.version[url]}".encode(), children=links)

    def unit(self, s: PlannerSettings, u: int) -> RefreshPlanner:
        """Plan unit ``u`` (its writes applied), then fetch its list, each page when due."""
        ops: list = []
        conn = self.store.read_connection()
        try:
            p = RefreshPlanner(conn, ops.append, ManualClock((U0 + u) * UNIT + 1.0), s)
            offers = p.offers(p.run_unit(U0 + u))
        finally:
            conn.close()
        self.fill(ops)
        records = []
        for items in offers.values():
            for url, _, not_before in items:
                at = max(not_before, (U0 + u) * UNIT + 2.0) + 1e-3 * len(records)
                records.append(self.read(url, at))
        self.fill(records)
        return p

    def longest_wait(self, urls: list[str], now: float, since: float = -math.inf) -> float:
        """The longest time any of ``urls`` went unread, up to ``now``, counting the waits
        that ended after ``since`` (units)."""
        waits = []
        for url in urls:
            ends = np.array(self.reads[url] + [now])
            waits.append(np.diff(ends)[ends[1:] > since].max())
        return max(waits) / UNIT


@pytest.mark.parametrize("share", [0.1, 1 / 7], ids=["rho_G_not_whole", "rho_G_whole"])
def test_static_pages_are_read_again_within_t_max(store, fill, kit, share) -> None:
    """G = 7: ρ = 0.1 leaves 6 slots a unit (ρ·G = 0.7 rounds to 1), ρ = 1/7 exactly 6.
    Planned for (1 − ρ)·G = 6.3 the folders overflowed, and deferral by √(r·λ) alone never
    read the static pages again; at the exact balance they waited up to twice t_max."""
    t_max, units = 20.0, 90
    s = kit.settings(bandwidth=7, discovery_share=share, max_interval_units=t_max)
    web = Web(store, fill, hot=30, cold=6, pool=1500)
    for u in range(units):
        web.unit(s, u)
    assert s.refresh_bandwidth == 6.0
    end = (U0 + units) * UNIT
    assert all(len(web.reads[url]) >= 6 + 3 for url in web.cold)  # read in the run
    assert web.longest_wait(web.cold, end) <= t_max + 2
    # The changing pages (t_i ≈ 5.3) are not starved in turn: past the first units, when
    # all 30 fell due together, each waits about its interval.
    assert web.longest_wait(web.hot, end, since=(U0 + 30) * UNIT) < 7


def test_the_full_scan_and_the_folders_put_overdue_pages_first(store, fill, kit) -> None:
    """Past t_max a page goes before every due page that is not, whatever its √(r·λ), in
    the unit the folders give (run_unit) and in the full scan's (due_now) alike; before,
    the order by √(r·λ) holds. 30 changing pages are due at once, 6 slots a unit."""
    hot = [f"http://hot.example/h{i}.xml" for i in range(30)]
    cold = "http://cold.example/c.xml"
    records = kit.fetch_history(cold, kit.regular(6, 1.0, -24.0), [0] * 6)
    for i, url in enumerate(hot):
        links = tuple(f"http://hot.example/new{k}.xml" for k in range(20)) if i == 0 else ()
        records += kit.fetch_history(url, kit.regular(6, 1.0, -12.0 + 0.01 * i),
                                     list(range(6)), children=links)
    fill(records)
    s = kit.settings(bandwidth=7, discovery_share=1 / 7, max_interval_units=20.0)

    def unit(u: int) -> tuple[list[str], list[str], bool]:
        """Unit ``u``'s refresh list from the full scan and from run_unit (writes applied)."""
        clock = ManualClock((U0 + u) * UNIT + 1.0)
        ops: list = []
        conns = [store.read_connection(), store.read_connection()]
        try:
            preview = RefreshPlanner(conns[0], [].append, clock, s).due_now(U0 + u)
            p = RefreshPlanner(conns[1], ops.append, clock, s)
            fetch = p.run_unit(U0 + u)
        finally:
            for conn in conns:
                conn.close()
        fill(ops)
        assert p.last_unit is not None
        return ([url for url, prio in preview if prio == REFRESH],
                [url for url, prio in fetch if prio == REFRESH], p.last_unit.full_scan)

    first, _, scanned = unit(0)  # the ledger is built (a full scan)
    assert scanned and len(first) == 6 and cold not in first
    # Unit 1: the cold page is due (read 20 units before, t_i = t_max) but has not waited
    # past t_max when the unit starts: the 24 deferred pages of higher √(r·λ) go first.
    preview, fetched, scanned = unit(1)
    assert not scanned and cold not in fetched and cold not in preview
    # Unit 2: it has, and goes first, though 18 pages of higher √(r·λ) are still waiting.
    preview, fetched, scanned = unit(2)
    assert not scanned and len(fetched) == 6
    assert fetched[0] == cold and preview[0] == cold


def test_compose_unit_hands_out_overdue_pages_first() -> None:
    """Overdue pages first, whatever their priority; each group by priority, then id."""
    due = np.array([10, 11, 12, 13, 14, 15])
    prio = np.array([5.0, 0.1, 4.0, 0.2, 3.0, 0.2])
    overdue = np.array([False, True, False, True, False, False])
    fetch = compose_unit(due, prio, [90, 91], bandwidth=5, discovery_share=0.2,
                         overdue=overdue)
    assert fetch.maintenance.tolist() == [13, 11, 10, 12]
    assert fetch.deferred.tolist() == [14, 15]
    assert fetch.discovery.tolist() == [90]
    plain = compose_unit(due, prio, [90, 91], bandwidth=5, discovery_share=0.2)
    assert plain.maintenance.tolist() == [10, 12, 14, 13]  # no flags: by priority
    with pytest.raises(ValueError, match="overdue flags"):
        compose_unit(due, prio, [], bandwidth=5, discovery_share=0.2, overdue=[True])


@pytest.mark.parametrize("g", [1, 3, 7, 10, 100])
@pytest.mark.parametrize("share", [0.0, 0.1, 0.25, 0.5, 1 / 7, 1.0])
def test_the_planner_plans_for_the_slots_compose_unit_and_the_budget_leave(
        kit, g: int, share: float) -> None:
    """One rounding of ρ·G for the planner's refresh bandwidth, the unit's split and the
    crawl's unit budget: each due page planned has a slot to go in."""
    s = kit.settings(bandwidth=g, discovery_share=share)
    fetch = compose_unit(np.arange(1000), np.ones(1000), np.arange(1000, 2000), g, share)
    budget = UnitBudget(g, UNIT, share, lambda: 0, lambda row: None)
    assert s.refresh_bandwidth == fetch.maintenance.size == g - budget.discovery
