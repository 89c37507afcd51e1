"""A stored document whose re-fetch fails stays in the refresh plan with a growing back-off
(DESIGN.md §6); only gone answers (404/410, ``dead_after`` of them) or failing for longer
than t_max take it out. Its stored content and versions stay; the failure is an errors row."""

from __future__ import annotations

import hashlib

from metadata import FetchRecord, MetadataStore, PageType, XmlVersion
from metadata import refresh_queries as rq
from xyro.clock import ManualClock
from xyro.jobs.plan_job import RefreshPlanner

START = 1_700_000_000.0  # as in conftest.py
UNIT = 3600.0
DOC = "http://slow.example/p1.xml"  # read 8 times, unchanged, last at unit 14.1
GOOD = f"{DOC}#0".encode()          # its signature (conftest.fetch_history)
T_MAX = 50.0                        # kit.settings()'s max_interval_units


def planner(store: MetadataStore, ops: list, unit_now: float, kit) -> RefreshPlanner:
    return RefreshPlanner(store.read_connection(), ops.append,
                          ManualClock(START + UNIT * unit_now), kit.settings())


def run_unit(store: MetadataStore, unit_now: float, kit) -> RefreshPlanner:
    """One planner unit, its writes applied."""
    ops: list = []
    p = planner(store, ops, unit_now, kit)
    p.run_unit()
    with store.writer() as writer:
        writer.submit_many(ops)
    return p


def row(store: MetadataStore, url: str = DOC) -> dict:
    conn = store.read_connection()
    try:
        return rq.url_row(conn, url)
    finally:
        conn.close()


def count(store: MetadataStore, sql: str) -> int:
    conn = store.read_connection()
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def at(units: float) -> float:
    """Clock time ``units`` after START."""
    return START + UNIT * units


def folder(t: float) -> int:
    return int(t // UNIT)


def failed(t: float, status: int | None = 500, kind: str = "http_status",
           body: bytes | None = None) -> FetchRecord:
    return FetchRecord(DOC, t, PageType.ERROR, http_status=status,
                       signature=None if body is None else hashlib.md5(body).digest(),
                       error_kind=kind, error_detail=f"HTTP {status}")


def planned_store(store, fill, kit) -> dict:
    """The conftest pages, planned once at unit 20, with one stored version of DOC."""
    kit.build(fill)
    fill([XmlVersion(DOC, GOOD, b"c14n", at(14.1), 10, "ab/cd", True)])
    run_unit(store, 20.0, kit)
    return row(store)


def backoff_folder(t: float, t_i: float, last_good: float) -> int:
    """Wait t_i + the units since the last good read, at most t_max (refresh_queries)."""
    return rq.folder_after(t, min(t_i + (t - last_good) / UNIT, max(T_MAX, t_i)), UNIT)


def test_a_server_error_keeps_the_document_planned_with_a_growing_backoff(
        store, fill, kit) -> None:
    before = planned_store(store, fill, kit)
    t_i, good = before["interval_units"], before["last_access"]
    assert store.get_state(rq.MAX_INTERVAL_KEY) == T_MAX
    fill([failed(at(20.7))])
    first = row(store)
    assert (first["type"], first["http_status"], first["signature"]) == ("xml", 500, GOOD)
    assert first["due_unit"] == backoff_folder(at(20.7), t_i, good)
    assert first["due_unit"] > rq.folder_after(at(20.7), t_i, UNIT)  # later than planned
    p = run_unit(store, 21.0, kit)
    assert p.last_unit.planned == 18 and row(store)["weight"] is not None
    t2 = (first["due_unit"] + 0.5) * UNIT  # read in its back-off folder
    fill([failed(t2, status=None, kind="timeout")])
    second = row(store)
    assert second["type"] == "xml"
    assert second["due_unit"] == backoff_folder(t2, t_i, good)
    assert second["due_unit"] - folder(t2) > first["due_unit"] - folder(at(20.7))  # grew
    assert store.status()["errors_by_kind"] == {"http_status": 1, "timeout": 1}
    t3 = (second["due_unit"] + 0.2) * UNIT
    fill([FetchRecord(DOC, t3, PageType.XML, http_status=200, signature=GOOD)])
    back = row(store)
    assert (back["type"], back["http_status"], back["changes"]) == ("xml", 200, 0)
    assert back["due_unit"] == rq.folder_after(t3, t_i, UNIT)  # its own interval again
    assert count(store, "SELECT count(*) FROM xml_versions") == 1


def test_a_malformed_body_now_keeps_the_document_and_its_signature(store, fill, kit) -> None:
    before = planned_store(store, fill, kit)
    observations = count(store, "SELECT count(*) FROM observations")
    t = at(20.7)
    fill([failed(t, status=200, kind="parse", body=b"<doc><unclosed>")])
    after = row(store)
    assert (after["type"], after["signature"], after["changes"]) == ("xml", GOOD, 0)
    assert after["due_unit"] == backoff_folder(t, before["interval_units"],
                                               before["last_access"])
    assert count(store, "SELECT count(*) FROM observations") == observations
    assert store.status()["errors_by_kind"] == {"parse": 1}
    assert run_unit(store, 21.0, kit).last_unit.planned == 18


def test_gone_answers_keep_the_document_until_dead_after(store, fill, kit) -> None:
    planned_store(store, fill, kit)
    for k, units in enumerate((20.7, 30.0)):
        fill([failed(at(units), status=410)])
        assert (row(store)["type"], row(store)["dead_count"]) == ("xml", k + 1)
        assert row(store)["due_unit"] > folder(at(units)) + 1
    fill([failed(at(40.0), status=410)])  # the third in a row (the writer's dead_after)
    assert (row(store)["type"], row(store)["due_unit"]) == ("dead", folder(at(40.0)))
    p = run_unit(store, 41.0, kit)
    assert p.last_unit.planned == 17
    gone = row(store)
    assert (gone["rate"], gone["weight"], gone["due_unit"]) == (None, None, None)
    assert count(store, "SELECT count(*) FROM xml_versions") == 1  # nothing stored is lost


def test_a_document_failing_longer_than_t_max_leaves_the_plan(store, fill, kit) -> None:
    planned_store(store, fill, kit)
    late = at(14.1 + T_MAX + 5)
    fill([failed(late)])  # unread that long, but its first failure: it stays
    assert row(store)["type"] == "xml"
    assert row(store)["due_unit"] == rq.folder_after(late, T_MAX, UNIT)  # the bounded wait
    fill([failed(late + UNIT)])  # failing again, unread for over t_max: it leaves
    assert (row(store)["type"], row(store)["due_unit"]) == ("error", folder(late) + 1)
    p = run_unit(store, 14.1 + T_MAX + 7, kit)
    assert p.last_unit.planned == 17 and row(store)["rate"] is None
    assert row(store)["signature"] == GOOD
