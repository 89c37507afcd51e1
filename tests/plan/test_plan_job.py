"""The refresh planner on a real SQLite store filled through the metadata writer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType, SetRefresh, SetState
from metadata.records import Refuse
from metadata import refresh_queries as rq
from refresh import ChangeObservations, folders_after, signature_rate
from xyro.clock import ManualClock
from xyro.crawl.frontier import DISCOVERY, REFRESH
from xyro.jobs.plan_explain import summary
from xyro.jobs.plan_job import (DISCOVERY_END_UNITS, LATEST_IN_UNIT, RefreshPlanner,
                                WATERMARK_KEY)

START = 1_700_000_000.0  # as in conftest.py
UNIT = 3600.0


@pytest.fixture
def planner(kit):
    def make(store: MetadataStore, ops: list, now_unit: float = 20.0, **over: object
             ) -> RefreshPlanner:
        return RefreshPlanner(store.read_connection(), ops.append,
                              ManualClock(START + UNIT * now_unit), kit.settings(**over))
    return make


def test_rates_sources_and_mle_agree_with_refresh(store, fill, kit, planner) -> None:
    kit.build(fill)
    plan = planner(store, []).plan()
    by_url = {store.url_of(int(i)): k for k, i in enumerate(plan.ids)}
    fast = by_url["http://fast.example/p0.xml"]
    slow = by_url["http://slow.example/p0.xml"]
    mixed = by_url["http://mixed.example/p0.html"]
    assert plan.sources[fast] == "always-changed"
    assert plan.sources[slow] == "never-changed"
    assert plan.sources[mixed] == "signature-mle"
    expected = signature_rate(ChangeObservations([2.0] * 7, [1, 0, 1, 0, 1, 0, 1]),
                              bias_reduced=True).rate  # what the planner uses
    assert plan.rates[mixed] == pytest.approx(expected, rel=1e-9)
    assert plan.rates[slow] == pytest.approx(0.5 / 14.0)
    assert plan.rates[fast] > plan.rates[mixed] > plan.rates[slow]
    assert plan.n_estimated == 18


def test_intervals_fill_the_refresh_bandwidth_and_follow_k(store, fill, kit, planner) -> None:
    kit.build(fill)
    plan = planner(store, [], max_interval_units=1000.0).plan()
    g_refresh = 20 * (1 - 0.25)
    assert np.sum(1.0 / plan.intervals) == pytest.approx(g_refresh, rel=1e-9)
    w = np.sqrt(plan.importance * plan.rates)
    free = (plan.intervals > 1.0 + 1e-9) & (plan.intervals < 1000.0 - 1e-9)
    assert free.any()
    assert np.allclose(plan.intervals[free] * w[free], plan.k, rtol=1e-9)
    assert plan.omega >= plan.omega_unclamped * (1 - 1e-12)


def test_with_nothing_left_to_discover_all_of_g_refreshes(store, fill, kit, planner) -> None:
    kit.build(fill)
    ops: list = []
    planner(store, ops, max_interval_units=1000.0).run_unit()
    fill(ops)  # a unit planned for (1 - rho) G, its ledger stored
    assert planner(store, [], now_unit=21.0, max_interval_units=1000.0).plan().bandwidth == 15
    conn = store.read_connection()
    unread = [u for (u,) in conn.execute("SELECT url FROM urls WHERE type = 'unread'")]
    conn.close()
    assert len(unread) == 6
    with store.writer() as w:  # the unread pages end up refused: nothing unread is left
        for url in unread:
            w.submit(Refuse(url, "scope", depth=1))
    first = planner(store, ops := [], now_unit=21.0, max_interval_units=1000.0)
    first.run_unit()  # the first unit that began with nothing to discover
    fill(ops)
    assert first.last_unit is not None and not first.last_unit.full_scan
    end = 21.0 + DISCOVERY_END_UNITS - 1  # the last unit of the run: discovery's end
    assert planner(store, [], now_unit=end - 1, max_interval_units=1000.0).plan(
        ).bandwidth == 15
    plan = planner(store, [], now_unit=end, max_interval_units=1000.0).plan()
    # All of G = 20 may refresh, not (1 - rho) G = 15: each of the 18 pages every unit.
    assert np.sum(1.0 / plan.intervals) == pytest.approx(18.0, rel=1e-9)
    assert np.all(plan.intervals == 1.0)
    # The daemon's unit re-plans every page for it (a full scan), not page by page.
    later = planner(store, [], now_unit=end, max_interval_units=1000.0)
    later.run_unit()
    assert later.last_unit is not None and later.last_unit.full_scan


def test_importance_for_xml_interest_for_html_and_uniform(store, fill, kit, planner) -> None:
    kit.build(fill)
    xml, html = "http://fast.example/p1.xml", "http://mixed.example/p1.html"
    kit.set_ranks(store, [xml, html], importance=[4.0, 9.0], interest=[7.0, 0.5])
    plan = planner(store, []).plan()
    pos = plan.index(np.asarray(store.url_ids([xml, html], create=False)))
    assert plan.importance[pos].tolist() == [4.0, 0.5]
    assert plan.importance[plan.index(np.asarray(store.url_ids(
        ["http://slow.example/p1.xml"], create=False)))][0] == 1.0  # missing: 1
    uniform = planner(store, [], importance_source="uniform").plan()
    assert np.all(uniform.importance == 1.0)
    direct = planner(store, [], importance_source="importance").plan()
    assert direct.importance[pos].tolist() == [4.0, 9.0]  # the HTML page's importance too


def test_folders_are_last_access_plus_interval(store, fill, kit, planner) -> None:
    pages = kit.build(fill)
    plan = planner(store, [], now_unit=0.0).plan(unit=0 + int(START // UNIT))
    for url, times in pages.items():
        k = int(plan.index(np.asarray(store.url_ids([url], create=False)))[0])
        expected = max(int(folders_after([times[-1]], [plan.intervals[k]], UNIT)[0]),
                       plan.unit)
        assert plan.due[k] == expected
    assert plan.refile.all()


def test_last_modified_used_when_reliable_and_refused_when_stamped_now(store, fill, kit, planner) -> None:
    records = []
    change_at = [START + UNIT * 3.5, START + UNIT * 9.2]
    for i in range(3):
        url = f"http://dated.example/p{i}.xml"
        times = kit.regular(6, 2.0, 1.0 + 0.01 * i)
        lms, vers = [], []
        for t in times:
            done = [c for c in [START - UNIT * 5] + change_at if c <= t]
            lms.append(done[-1])
            vers.append(len(done))
        records += kit.fetch_history(url, times, vers, last_modified=lms)
        url = f"http://stamped.example/p{i}.xml"
        records += kit.fetch_history(url, times, vers, last_modified=times)
    fill(records)
    plan = planner(store, []).plan()
    for i in range(3):
        dated = int(plan.index(np.asarray(store.url_ids([f"http://dated.example/p{i}.xml"],
                                                           create=False)))[0])
        stamped = int(plan.index(np.asarray(store.url_ids([f"http://stamped.example/p{i}.xml"],
                                                             create=False)))[0])
        assert plan.sources[dated] == "last-modified"
        assert plan.sources[stamped] == "signature-mle"
    ev = plan.evidence[int(store.url_ids(["http://stamped.example/p0.xml"], create=False)[0])]
    assert not ev.lm_reliable and "access time" in ev.lm_reason


def test_run_unit_writes_refresh_data_and_returns_due_then_discovery(store, fill, kit, planner) -> None:
    kit.build(fill)
    kit.set_ranks(store, ["http://fast.example/new3.xml", "http://fast.example/new1.xml"],
              importance=[5.0, 2.0])
    ops: list = []
    p = planner(store, ops)
    unit = p.current_unit()
    fetch = p.run_unit(unit)
    assert len(fetch) == 20  # G, work-conserving
    prios = [pr for _, pr in fetch]
    assert prios == sorted(prios) and set(prios) == {REFRESH, DISCOVERY}
    discovery = [u for u, pr in fetch if pr == DISCOVERY]
    assert discovery[:2] == ["http://fast.example/new3.xml", "http://fast.example/new1.xml"]
    assert len(discovery) == 5  # rho * G, there are 6 unread pages
    refresh_ops = [op for op in ops if isinstance(op, SetRefresh)]
    assert len(refresh_ops) == 18  # first run: every planned page
    popped = {u for u, pr in fetch if pr == REFRESH}
    for op in refresh_ops:
        assert op.rate > 0 and op.interval_units >= 1.0
        if store.url_of(op.url_id) in popped:
            assert op.due_unit > unit  # retry folder until a fetch re-files it
    assert any(isinstance(op, SetState) and op.key == WATERMARK_KEY for op in ops)
    writer = store.writer()
    for op in ops:
        writer.submit(op)
    writer.close()
    conn = store.read_connection()
    stored = conn.execute("SELECT count(*) FROM urls WHERE rate IS NOT NULL AND "
                          "due_unit IS NOT NULL").fetchone()[0]
    assert stored == 18
    assert rq.state_value(conn, WATERMARK_KEY) == rq.max_observation_id(conn)
    conn.close()
    # Nothing observed since: the next unit writes only the pages it pops or defers.
    ops2: list = []
    fetch2 = planner(store, ops2, now_unit=21.0).run_unit(unit + 1)
    written = [op for op in ops2 if isinstance(op, SetRefresh)]
    assert len(written) <= sum(1 for _, pr in fetch2 if pr == REFRESH) + 18 - len(popped)
    assert not any(op.url_id in {store.url_ids([u], create=False)[0] for u in popped}
                   for op in written if op.due_unit is not None and op.due_unit <= unit)


def test_new_observations_refile_only_those_pages(store, fill, kit, planner) -> None:
    kit.build(fill)
    ops: list = []
    p = planner(store, ops)
    unit = p.current_unit()
    p.run_unit(unit)
    writer = store.writer()
    for op in ops:
        writer.submit(op)
    writer.close()
    url = "http://slow.example/p2.xml"
    fill(kit.fetch_history(url, [START + UNIT * 20.5], [1]))
    ops.clear()
    plan = p.plan(unit)
    assert plan.n_estimated == 1
    k = int(plan.index(np.asarray(store.url_ids([url], create=False)))[0])
    assert plan.sources[k] == "signature-mle" and plan.refile[k]
    t = START + UNIT * 20.5
    assert plan.due[k] == max(int(folders_after([t], [plan.intervals[k]], UNIT)[0]), unit)


def test_floor_means_never_refreshed_and_explain_says_so(store, fill, kit, planner) -> None:
    kit.build(fill)
    url = "http://mixed.example/p3.html"
    kit.set_ranks(store, [url], interest=[0.01])
    p = planner(store, [], importance_floor=0.1)
    plan = p.plan()
    k = int(plan.index(np.asarray(store.url_ids([url], create=False)))[0])
    assert math.isinf(plan.intervals[k]) and plan.due[k] == rq.NO_UNIT
    info = p.explain(url, plan)
    assert info["interval_units"] is None and "floor" in info["why_not"]


def test_a_floor_of_0_refreshes_a_page_of_interest_0_every_t_max(store, fill, kit,
                                                                  planner) -> None:
    """Interest 0 (no known path to XML yet) is not below a floor of 0 (DESIGN.md §6): the
    page is re-read at the clamp, t_max, since its new links may lead to XML."""
    kit.build(fill)
    url = "http://mixed.example/p3.html"
    kit.set_ranks(store, [url], interest=[0.0])
    p = planner(store, [])
    plan = p.plan()
    k = int(plan.index(np.asarray(store.url_ids([url], create=False)))[0])
    assert plan.intervals[k] == pytest.approx(kit.settings().max_interval_units)
    assert plan.due[k] != rq.NO_UNIT
    assert "why_not" not in p.explain(url, plan)


def test_explain_gives_rate_evidence_interval_and_due(store, fill, kit, planner) -> None:
    kit.build(fill)
    info = planner(store, []).explain("http://mixed.example/p0.html")
    assert info["rate_source"] == "signature-mle" and info["observations"] == 8
    assert info["observed_changes"] == 4 and info["last_modified_reliable"] is False
    assert info["r_source"].startswith("interest")
    assert info["interval_units"] >= 1.0 and isinstance(info["due_unit"], int)
    direct = planner(store, [], importance_source="importance")
    assert direct.explain("http://mixed.example/p0.html")["r_source"] == \
        "importance (direct rank) missing: 1"
    unread = planner(store, []).explain("http://fast.example/new0.xml")
    assert unread["planned"] is False and "only fetched" in unread["why_not"]


def test_empty_store_and_repeated_access_times(store, fill, kit, planner) -> None:
    p = planner(store, [])
    s = summary(p.plan())
    assert s["planned_pages"] == 0 and s["interval_units_quantiles"] is None
    assert p.run_unit() == []
    url = "http://dup.example/a.xml"
    t = START + UNIT
    fill(kit.fetch_history(url, [t, t, t + UNIT, t + 2 * UNIT], [0, 1, 1, 1]))
    plan = p.plan()
    assert plan.ids.size == 1 and plan.rates[0] > 0 and math.isfinite(plan.intervals[0])


def test_too_many_pages_for_t_max_stretch_it(store, fill, kit, planner) -> None:
    kit.build(fill)
    plan = planner(store, [], bandwidth=2, discovery_share=0.0, max_interval_units=3.0).plan()
    assert plan.t_max_used == pytest.approx(18 / 2, rel=1e-6)
    assert np.sum(1.0 / plan.intervals) == pytest.approx(2.0, rel=1e-6)


def test_due_now_matches_run_unit_and_writes_nothing(store, fill, kit, planner) -> None:
    kit.build(fill)
    ops: list = []
    p = planner(store, ops)
    unit = p.current_unit()
    preview = p.due_now(unit)
    assert ops == []
    assert preview == planner(store, []).run_unit(unit)


@pytest.mark.parametrize("policy", ["uniform", "change_proportional"])
def test_baseline_policies_pick_by_age_or_expected_changes(store, fill, kit, planner,
                                                           policy) -> None:
    """A baseline's unit: the pages it would refresh (oldest read, or most expected changes
    since), plus the same discovery share; the folders keep their pages (nothing popped)."""
    kit.build(fill)
    first: list = []
    planner(store, first).run_unit()  # rates estimated and written, as the daemon's first unit
    fill(first)
    ops: list = []
    p = planner(store, ops, now_unit=21.0, policy=policy)
    fetch = p.run_unit()
    refresh = [u for u, pr in fetch if pr == REFRESH]
    assert len(fetch) == 20 and len(refresh) == 15  # G, rho = 0.25
    conn = store.read_connection()
    rows = conn.execute("SELECT url, last_access, rate FROM urls WHERE accesses > 0 AND "
                        "type IN ('html', 'xml')").fetchall()
    conn.close()
    now = START + UNIT * 21.0
    mean = np.mean([r for _, _, r in rows if r is not None])
    key = {u: (now - t) if policy == "uniform" else (r or mean) * (now - t)
           for u, t, r in rows}
    expected = sorted(key, key=lambda u: -key[u])[:15]
    assert sorted(refresh) == sorted(expected)
    assert not any(isinstance(op, SetRefresh) and op.due_unit is not None
                   and op.due_unit > 21 for op in ops)  # no retry folders


def test_a_short_due_folder_is_filled_from_the_next_folders(store, fill, kit, planner) -> None:
    """With nothing unread, the part of G the due folder leaves goes to the pages of the
    next folders, earliest first, offered for the end of the unit; due_now agrees."""
    fill([rec for i in range(30) for rec in kit.fetch_history(
        f"http://h{i % 3}.example/p{i}.xml", kit.regular(4, 3.0, 0.37 * i), [0, 1, 1, 2])])
    for now in (20.0, 21.0):  # unit 21 holds more than G: it defers 4 to unit 22
        ops: list = []
        planner(store, ops, now_unit=now, bandwidth=12, discovery_share=0.0).run_unit()
        fill(ops)
    conn = store.read_connection()
    rows = conn.execute("SELECT url, due_unit FROM urls WHERE due_unit IS NOT NULL "
                        "ORDER BY due_unit, id").fetchall()
    conn.close()
    unit = 22 + int(START // UNIT)
    due = {u for u, f in rows if f <= unit}
    assert 0 < len(due) < 12  # the case at hand
    later = [u for u, f in rows if f > unit][:12 - len(due)]
    check = planner(store, [], now_unit=22.3, bandwidth=12, discovery_share=0.0)
    p = planner(store, [], now_unit=22.3, bandwidth=12, discovery_share=0.0)
    fetch = p.run_unit(unit)
    assert fetch == check.due_now(unit)
    assert all(pr == REFRESH for _, pr in fetch) and len(fetch) == 12
    assert {u for u, _ in fetch} == due | set(later)
    assert [u for u, _ in fetch][len(due):] == later
    assert p.last_unit.ahead == len(later) and p.last_unit.due == len(due)
    assert all(p.due_at[u] == (unit + LATEST_IN_UNIT) * UNIT for u in later)
    baseline = planner(store, [], now_unit=22.3, bandwidth=12, discovery_share=0.0,
                       policy="uniform")
    assert len(baseline.run_unit(unit)) == 12 and baseline.last_unit.ahead == 0


def _filed(store: MetadataStore) -> dict[int, int]:
    conn = store.read_connection()
    try:
        return dict(conn.execute("SELECT id, due_unit FROM urls WHERE due_unit IS NOT NULL"))
    finally:
        conn.close()


def test_a_larger_bandwidth_pulls_the_waiting_pages_forward(store, fill, kit, planner) -> None:
    """When the refresh bandwidth grows (here discovery's end: ρ 0.25 -> 0) every t_i
    shrinks: a page filed for its longer interval is re-filed from its last access with the
    new one (this unit's folder when that makes it overdue), never later than it was; a
    rebuild at the bandwidth the folders were filed for moves no page it did not observe."""
    kit.build(fill)
    over = dict(bandwidth=6, max_interval_units=1000.0)
    ops: list = []
    planner(store, ops, now_unit=20.0, **over).run_unit()
    fill(ops)
    stored = _filed(store)
    same = planner(store, [], now_unit=29.0, **over).plan()
    # G − round(ρ·G) = 6 − round(1.5) = 4: the slots a unit leaves due pages.
    assert same.bandwidth == pytest.approx(4.0) and not same.refile.any()
    assert all(stored[int(i)] == d for i, d in zip(same.ids, same.due))
    conn = store.read_connection()
    unread = [u for (u,) in conn.execute("SELECT url FROM urls WHERE type = 'unread'")]
    last = dict(conn.execute("SELECT id, last_access FROM urls"))
    conn.close()
    with store.writer() as w:  # nothing unread is left: all of G refreshes, once the
        for url in unread:     # units in a row that began so are DISCOVERY_END_UNITS
            w.submit(Refuse(url, "scope", depth=1))
        # As the daemon records it when unit 29 is the last of them (test above).
        w.submit(SetState(rq.UNREAD_EMPTY_SINCE_KEY,
                          int(START // UNIT) + 29 - DISCOVERY_END_UNITS + 1))
    p = planner(store, ops := [], now_unit=29.0, **over)
    grown = p.plan()
    assert grown.bandwidth == pytest.approx(6.0)
    unit = grown.unit
    moved = overdue = 0
    for k, url_id in enumerate(grown.ids.tolist()):
        new = max(int(folders_after([last[url_id]], [grown.intervals[k]], UNIT)[0]), unit)
        if new < stored[url_id]:
            assert grown.refile[k] and grown.due[k] == new
            moved += 1
            overdue += new == unit
        else:
            assert not grown.refile[k] and grown.due[k] == stored[url_id]
    assert moved >= 3 and overdue >= 1
    p.run_unit(unit)
    fill(ops)  # what the rebuild wrote is what the plan said (the due pages re-filed after)
    due_now = {int(i) for i, d in zip(grown.ids, grown.due) if d <= unit}
    assert {i: d for i, d in _filed(store).items() if i not in due_now} == {
        int(i): int(d) for i, d in zip(grown.ids, grown.due) if int(i) not in due_now}


def test_a_host_is_judged_on_all_its_checked_pages_not_the_units_few(
        store, fill, kit, planner) -> None:
    # Nine pages with consistent Last-Modified dates and one whose date never moves: the
    # host passes (1 bad page of 10). A later unit that re-estimates only a good page and
    # the bad one used to judge the host on those two, and dropped the good page's dates.
    host = "http://lm.example"
    change = START + UNIT * 4.0
    records = []
    for i in range(10):
        times = kit.regular(4, 2.0, 1.0 + 0.01 * i)
        dates = [START - UNIT * 5] * 2 + [change if i < 9 else START - UNIT * 5] * 2
        records += kit.fetch_history(f"{host}/p{i}.xml", times, [0, 0, 1, 1], dates)
    fill(records)

    def unit_sources(now_unit: float) -> dict[str, str]:
        ops: list = []
        p = planner(store, ops, now_unit=now_unit)
        p.run_unit(p.current_unit())
        writer = store.writer()
        for op in ops:
            writer.submit(op)
        writer.close()
        return {store.url_of(op.url_id): op.rate_source for op in ops
                if isinstance(op, SetRefresh) and op.rate_source}

    first = unit_sources(10.0)
    assert first[f"{host}/p0.xml"] == "last-modified"
    assert first[f"{host}/p9.xml"] != "last-modified"
    again = [START + UNIT * 11.0, START + UNIT * 11.5]
    fill(kit.fetch_history(f"{host}/p0.xml", again[:1], [1], [change])
         + kit.fetch_history(f"{host}/p9.xml", again[1:], [1], [START - UNIT * 5]))
    second = unit_sources(12.0)
    assert second[f"{host}/p0.xml"] == "last-modified"
    conn = store.read_connection()
    assert conn.execute("SELECT count(*), sum(lm_reliable) FROM urls WHERE lm_reliable "
                        "IS NOT NULL").fetchone() == (10, 9)
    conn.close()


def test_a_never_loaded_page_whose_fetch_failed_is_tried_again_with_back_off(
        store, fill, planner) -> None:
    # Its links led here and a 500, a timeout or a body cut short may pass: it is discovered
    # again after one unit, then two, then four (ERROR_TRIES fetches in all); a lasting
    # failure (robots.txt, a refused type) is not tried again. Never a refresh: it is no
    # document yet.
    def failed(url: str, at_unit: float, kind: str, status: int | None = None) -> FetchRecord:
        return FetchRecord(url, START + UNIT * at_unit, PageType.ERROR, http_status=status,
                           error_kind=kind, error_detail=f"{kind} at unit {at_unit}")

    fill([failed("http://a.example/500.xml", 10.0, "http_status", 500),
          failed("http://a.example/slow.xml", 10.5, "timeout"),
          failed("http://a.example/cut.xml", 19.5, "truncated"),     # less than a unit ago
          failed("http://a.example/private.xml", 10.0, "robots"),
          failed("http://a.example/pdf", 10.0, "content_type")])

    def discovered(now_unit: float) -> list[str]:
        due = planner(store, [], now_unit=now_unit).due_now(int(now_unit))
        return [url for url, level in due if level == DISCOVERY]

    assert discovered(20.0) == ["http://a.example/500.xml", "http://a.example/slow.xml"]
    fill([failed("http://a.example/500.xml", 20.0, "http_status", 503)])   # second try
    assert discovered(20.6) == ["http://a.example/slow.xml", "http://a.example/cut.xml"]
    assert "http://a.example/500.xml" not in discovered(21.9)             # waits 2 units
    assert "http://a.example/500.xml" in discovered(22.0)
    fill([failed("http://a.example/500.xml", 22.0, "connect"),
          failed("http://a.example/500.xml", 26.0, "http_status", 500)])  # 4 tries: final
    assert "http://a.example/500.xml" not in discovered(100.0)
    assert rq.ERROR_TRIES == 4
    # Refused by the admission now (the scope narrowed): no more tries, and it says why.
    with store.writer() as w:
        w.submit(Refuse("http://a.example/slow.xml", "scope: matches deny pattern", depth=1))
    assert discovered(100.0) == ["http://a.example/cut.xml"]
    conn = store.read_connection()
    assert conn.execute("SELECT type FROM urls WHERE url = 'http://a.example/slow.xml'"
                        ).fetchone() == ("error",)
    conn.close()


def test_pages_read_in_this_unit_are_not_taken_ahead_again(store, fill, kit, planner) -> None:
    """A plan made again within its unit (a restart) must not fill the unused G with pages
    the unit already read (filed in the next folders since): a plan made at the unit's start
    never could, and a site would get the same page twice in a unit."""
    fill([rec for i in range(30) for rec in kit.fetch_history(
        f"http://h{i % 3}.example/p{i}.xml", kit.regular(4, 3.0, 0.37 * i), [0, 1, 1, 2])])
    for now in (20.0, 21.0):
        ops: list = []
        planner(store, ops, now_unit=now, bandwidth=12, discovery_share=0.0).run_unit()
        fill(ops)
    unit = 22 + int(START // UNIT)
    before = planner(store, [], now_unit=22.3, bandwidth=12, discovery_share=0.0)
    ahead = [u for u, _ in before.run_unit(unit)][-before.last_unit.ahead:]
    assert len(ahead) >= 2
    read_now = ahead[0]
    with store.atomic() as conn:   # read early in this unit (filed later since)
        conn.execute("UPDATE urls SET last_access = ? WHERE url = ?",
                     ((unit + 0.1) * UNIT, read_now))
    again = planner(store, [], now_unit=22.3, bandwidth=12, discovery_share=0.0)
    taken = [u for u, _ in again.run_unit(unit)]
    assert read_now not in taken and ahead[1] in taken
