"""Persisted folders (DESIGN.md §6): one folder formula, re-filing as fetches are applied,
a unit that reads only through indexes, and the ledger's rebuilds."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata import refresh_queries as rq
from metadata.records import SetRefresh, SetState
from refresh import folders_after
from xyro.clock import ManualClock
from xyro.crawl.frontier import DISCOVERY
from xyro.jobs.plan_job import LEDGER_KEY, RUN_KEY, RefreshPlanner

START = 1_700_000_000.0  # as in conftest.py
UNIT = 3600.0


def test_writer_and_planner_use_the_same_folder_formula() -> None:
    rng = np.random.default_rng(5)
    last = np.concatenate((rng.uniform(1e9, 2e9, 20_000), np.arange(0.0, 50.0) * 3600.0))
    interval = np.concatenate((rng.lognormal(1.0, 2.0, 20_000), np.full(50, 2.0)))
    unit = np.concatenate((rng.choice([1.0, 60.0, 3600.0, 86400.0, 7 * 86400.0, 1e-3, 7.3],
                                      20_000), np.full(50, 3600.0)))
    for u in np.unique(unit):
        m = unit == u
        want = folders_after(last[m], interval[m], float(u))
        got = [rq.folder_after(float(t), float(i), float(u))
               for t, i in zip(last[m], interval[m])]
        assert got == want.tolist()


def planner(store: MetadataStore, ops: list, unit_now: float, kit, **over) -> RefreshPlanner:
    return RefreshPlanner(store.read_connection(), ops.append,
                          ManualClock(START + UNIT * unit_now), kit.settings(**over))


def apply(store: MetadataStore, ops: list) -> None:
    with store.writer() as writer:
        for op in ops:
            writer.submit(op)


def row(store: MetadataStore, url: str) -> dict:
    conn = store.read_connection()
    out = rq.url_row(conn, url)
    conn.close()
    return out


def test_a_fetch_refiles_its_page_and_a_moved_one_leaves_the_plan(store, fill, kit) -> None:
    kit.build(fill)
    ops: list = []
    planner(store, ops, 20.0, kit).run_unit()
    apply(store, ops)
    ok, failing = "http://slow.example/p1.xml", "http://fast.example/p2.xml"
    before = row(store, ok)
    t = START + UNIT * 20.7
    # A redirect is an answer, not a failure: the target holds the document from now on.
    fill([FetchRecord(ok, t, PageType.XML, http_status=200, signature=b"same"),
          FetchRecord(failing, t, PageType.ERROR, http_status=301, error_kind="redirect",
                      children=("https://fast.example/p2.xml",))])
    after = row(store, ok)
    assert after["due_unit"] == int(folders_after([t], [before["interval_units"]], UNIT)[0])
    gone = row(store, failing)
    assert gone["due_unit"] == int(t // UNIT)  # due now: the next unit takes it out
    ops = []
    p = planner(store, ops, 21.0, kit)
    p.run_unit()
    assert not p.last_unit.full_scan and p.last_unit.planned == 17
    apply(store, ops)
    gone = row(store, failing)
    assert (gone["rate"], gone["weight"], gone["due_unit"], gone["interval_units"]) == (
        None, None, None, None)
    assert row(store, ok)["rate_source"] == "signature-mle"  # re-estimated, re-filed


def test_a_folder_unit_reads_only_through_indexes(store, fill, kit) -> None:
    kit.build(fill)
    statements: list[str] = []
    for unit in (20, 21, 22, 23):
        ops: list = []
        p = planner(store, ops, unit, kit)
        if unit == 23:
            p._conn.set_trace_callback(statements.append)  # noqa: SLF001 - what it reads
        fetch = p.run_unit()
        apply(store, ops)
        t = START + UNIT * (unit + 0.5)
        fill([FetchRecord(u, t + k, PageType.HTML if u.endswith("html") else PageType.XML,
                          http_status=200, signature=f"{u}{unit}".encode())
              for k, (u, _) in enumerate(fetch)])
    assert not p.last_unit.full_scan and p.last_unit.estimated > 0
    check = sqlite3.connect(store.path)
    plans = {}
    for sql in statements:
        if sql.startswith("SELECT"):
            plans[sql] = [r[-1] for r in check.execute("EXPLAIN QUERY PLAN " + sql)]
    check.close()
    assert any("urls_due" in " ".join(v) for v in plans.values())
    for sql, steps in plans.items():  # look-ups; sorts only of what they found
        for step in steps:
            assert step.startswith(("SEARCH", "USE TEMP B-TREE FOR", "SCAN CONSTANT ROW")) \
                or step == "SCAN urls USING INDEX urls_unread", (sql, step)


def test_a_unit_whose_writes_were_cut_short_is_followed_by_a_rebuild(store, fill, kit) -> None:
    kit.build(fill)
    ops: list = []
    planner(store, ops, 20.0, kit).run_unit()
    apply(store, ops)
    ops = []
    planner(store, ops, 21.0, kit).run_unit()
    cut = [op for op in ops if isinstance(op, SetState) and op.key == RUN_KEY]
    cut += [op for op in ops if isinstance(op, SetRefresh)][:3]
    apply(store, cut)  # the writer died after three pages: no ledger for this token
    ops = []
    p = planner(store, ops, 21.0, kit)
    p.run_unit()
    assert p.last_unit.full_scan
    apply(store, ops)
    ops = []
    p = planner(store, ops, 22.0, kit)
    p.run_unit()
    assert not p.last_unit.full_scan  # the rebuilt ledger is trusted again


def test_other_time_unit_rebuilds_and_refiles_every_page(store, fill, kit) -> None:
    kit.build(fill)
    ops: list = []
    planner(store, ops, 20.0, kit).run_unit()
    apply(store, ops)
    ops = []
    p = RefreshPlanner(store.read_connection(), ops.append, ManualClock(START + UNIT * 21),
                       kit.settings(time_unit_s=UNIT / 2))
    p.run_unit()
    assert p.last_unit.full_scan
    refiled = {op.url_id for op in ops if isinstance(op, SetRefresh)}
    assert len(refiled) == 18
    assert any(isinstance(op, SetState) and op.key == rq.FOLDER_UNIT_KEY
               and op.value == UNIT / 2 for op in ops)


@pytest.mark.parametrize("factor", [24.0, 0.25])
def test_a_new_time_unit_refiles_every_page_in_its_own_numbering(store, fill, kit,
                                                                factor: float) -> None:
    # A folder is a unit number: kept through a change of refresh.time_unit_s, an hour's
    # folder read as a day's is centuries away (none refreshed again), and a day's read as
    # a quarter hour's long past (all due at once).
    kit.build(fill)
    ops: list = []
    planner(store, ops, 20.0, kit).run_unit()
    apply(store, ops)
    unit_s = UNIT * factor
    now = START + UNIT * 21
    ops = []
    p = RefreshPlanner(store.read_connection(), ops.append, ManualClock(now),
                       kit.settings(time_unit_s=unit_s))
    p.run_unit()
    filed = {op.url_id: op for op in ops if isinstance(op, SetRefresh) and op.due_unit}
    assert p.last_unit.full_scan and len(filed) == 18
    current = int(now // unit_s)
    t_max = kit.settings(time_unit_s=unit_s).max_interval_units
    for op in filed.values():   # from its last access, in units of the new length
        assert current - t_max <= op.due_unit <= current + t_max, (op, current)
        assert op.interval_units <= t_max


def test_a_smaller_t_max_bounds_every_page_at_the_next_plan(store, fill, kit) -> None:
    kit.build(fill)
    ops: list = []
    planner(store, ops, 20.0, kit).run_unit()
    apply(store, ops)
    ops = []
    p = planner(store, ops, 21.0, kit, max_interval_units=2)
    p.run_unit()
    assert p.last_unit.full_scan   # the folders were filed for a longer t_max: rebuilt
    apply(store, ops)
    conn = store.read_connection()
    try:
        waits = [due - 21 for (due,) in conn.execute(
            "SELECT due_unit - ? FROM urls WHERE due_unit IS NOT NULL", (int(START // UNIT),))]
    finally:
        conn.close()
    assert waits and max(waits) <= 2, waits


def test_discovery_reads_the_unread_index_in_rank_order(tmp_path, kit) -> None:
    rng = np.random.default_rng(2)
    with MetadataStore.open(tmp_path / "d.db") as store:
        urls = [f"http://d.example/u{i}" for i in range(400)]
        ids = store.url_ids(urls)
        cash = np.where(rng.random(400) < 0.3, rng.random(400), np.nan)
        imp = np.where(rng.random(400) < 0.6, rng.choice([0.5, 1.0, 2.0], 400), np.nan)
        refused = rng.random(400) < 0.2
        with store.atomic() as conn:
            conn.executemany("UPDATE urls SET opic_cash = ?, importance = ?, type = ? "
                             "WHERE id = ?",
                             [(None if np.isnan(c) else c, None if np.isnan(m) else m,
                               "refused" if r else "unread", i)
                              for c, m, r, i in zip(cash, imp, refused, ids)])
        conn = store.read_connection()
        got = rq.unread_ranked(conn, 50)
        naive = [r[0] for r in conn.execute(
            "SELECT id FROM urls WHERE type = 'unread' ORDER BY opic_cash IS NULL, "
            "opic_cash DESC, importance IS NULL, importance DESC, id LIMIT 50")]
        steps = [r[-1] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM urls WHERE type = 'unread' ORDER BY "
            "opic_cash DESC, importance DESC, id LIMIT 50")]
        conn.close()
        assert got == naive and len(got) == 50
        assert not set(got) & {i for i, r in zip(ids, refused) if r}
        assert steps == ["SCAN urls USING INDEX urls_unread"]  # no sort of all unread rows
        ops: list = []
        fetch = RefreshPlanner(store.read_connection(), ops.append, ManualClock(START),
                               kit.settings()).run_unit()
        assert [store.url_of(store.url_ids([u], create=False)[0]) for u, _ in fetch] == \
            [store.url_of(i) for i in naive[:20]]
        assert {p for _, p in fetch} == {DISCOVERY}


def test_status_keys_stay_and_the_ledger_is_json(store, fill, kit) -> None:
    kit.build(fill)
    ops: list = []
    planner(store, ops, 20.0, kit).run_unit()
    apply(store, ops)
    for key in ("refresh.k", "refresh.omega", "refresh.prior_rate_per_unit",
                "refresh.observations_done"):
        assert isinstance(store.get_state(key), float | int), key
    ledger = json.loads(store.get_state(LEDGER_KEY))
    assert store.get_state(RUN_KEY) == ledger["token"] and ledger["unit"] == 20 + START // UNIT
    assert store.get_state(rq.FOLDER_UNIT_KEY) == UNIT


def test_the_fetch_list_comes_with_each_url_s_stored_depth(store, fill, kit) -> None:
    kit.build(fill)
    ops: list = []
    p = planner(store, ops, 20.0, kit)
    fetch = p.run_unit()
    assert set(p.last_depths) == {u for u, _ in fetch}
    for url, priority in fetch:  # seeds of the fill at depth 0, their links at depth 1
        assert p.last_depths[url] == (1 if priority == DISCOVERY else 0), url
