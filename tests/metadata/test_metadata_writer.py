"""What the writer stores for each op: links, changes, DEAD, frontier, ranks, CSR export."""

from __future__ import annotations

import sqlite3
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from metadata import (
    MAX_CHILDREN, ClearPending, Dequeue, Enqueue, JobRun, MetadataError, MetadataStore,
    PageType, SaveOpic, SetPending, SetRanks, SetRefresh, SetState, UnitSpent, XmlVersion,
)

A, B, C, D = (f"http://site.example/{x}" for x in "abcd")


def row(store: MetadataStore, url: str, cols: str) -> tuple:
    (url_id,) = store.url_ids([url], create=False)
    conn = store.read_connection()
    try:
        return conn.execute(f"SELECT {cols} FROM urls WHERE id = ?", (url_id,)).fetchone()
    finally:
        conn.close()


def children_of(store: MetadataStore, url: str) -> list[str]:
    (url_id,) = store.url_ids([url], create=False)
    conn = store.read_connection()
    try:
        blob = conn.execute("SELECT children FROM links WHERE src = ?", (url_id,)).fetchone()[0]
    finally:
        conn.close()
    return [store.url_of(i) for i in struct.unpack(f"<{len(blob) // 4}i", blob)]


def test_ordered_children_round_trip(store: MetadataStore, fetched) -> None:
    kids = (C, B, D, B, A)  # order and duplicates kept as on the page
    with store.writer() as w:
        w.submit(fetched(A, 10.0, children=kids))
    assert children_of(store, A) == list(kids)
    assert row(store, C, "type, depth") == ("unread", 1)
    assert row(store, A, "type, depth, accesses") == ("html", 0, 1)


def test_child_list_capped_at_65534(store: MetadataStore, fetched) -> None:
    kids = tuple(f"http://big.example/{i}" for i in range(MAX_CHILDREN + 10))
    with store.writer() as w:
        w.submit(fetched(A, 10.0, children=kids))
    got = children_of(store, A)
    assert len(got) == MAX_CHILDREN == 65534
    assert got == list(kids[:MAX_CHILDREN])
    assert store.url_ids([kids[-1]], create=False) == [None]  # beyond the cap: not stored


def test_refetch_replaces_children(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        w.submit(fetched(A, 10.0, "v1", children=(B, C)))
        w.flush()
        w.submit(fetched(A, 20.0, "v2", children=(D,)))
    assert children_of(store, A) == [D]


def test_change_counting_by_signature_and_304(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        w.submit(fetched(A, 100.0, "v1", last_modified=90.0))
        w.submit(fetched(A, 200.0, "v1"))                     # same MD5: no change
        w.submit(fetched(A, 300.0, "v2"))                     # change
        w.submit(fetched(A, 400.0, None, status=304, not_modified=True))  # 304: no change
        w.submit(fetched(A, 500.0, "v3", children=(B,)))      # change
    accesses, changes, unchanged, last_change, first, last = row(
        store, A, "accesses, changes, unchanged, last_change, first_access, last_access")
    assert (accesses, changes, unchanged, last_change, first, last) == (5, 2, 0, 500.0, 100.0,
                                                                          500.0)
    conn = store.read_connection()
    obs = conn.execute("SELECT prev_access, access, changed, last_modified FROM observations "
                       "ORDER BY access").fetchall()
    conn.close()
    assert obs == [(None, 100.0, 0, 90.0), (100.0, 200.0, 0, None), (200.0, 300.0, 1, None),
                   (300.0, 400.0, 0, None), (400.0, 500.0, 1, None)]
    assert children_of(store, A) == [B]


def test_304_keeps_signature_and_links(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        w.submit(fetched(A, 1.0, "v1", children=(B, C), etag='"e1"'))
        w.submit(fetched(A, 2.0, None, status=304, not_modified=True, etag='"e2"'))
        w.flush()
        assert children_of(store, A) == [B, C]
        assert row(store, A, "changes, unchanged, etag") == (0, 1, '"e2"')
        w.submit(fetched(A, 3.0, "v1"))
    assert row(store, A, "changes, unchanged, etag") == (0, 2, None)
    assert children_of(store, A) == []  # a page read again with no links has none


def test_unchanged_counts_since_last_change(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        for i, body in enumerate(["a", "a", "a", "b", "b"]):
            w.submit(fetched(A, float(i), body))
    assert row(store, A, "changes, unchanged, baseline_at") == (1, 1, 3.0)


def test_dead_after_repeated_404(store: MetadataStore, fetched) -> None:
    with store.writer(dead_after=3) as w:
        w.submit(fetched(A, 1.0, "v1"))
        for t in (2.0, 3.0):
            w.submit(fetched(A, t, None, status=404, page_type=PageType.ERROR,
                             error_kind="http", error_detail="404 Not Found"))
        w.flush()
        # A stored page stays what it is until the gone answers make it DEAD.
        assert row(store, A, "type, dead_count") == ("html", 2)
        w.submit(fetched(A, 4.0, None, status=410, page_type=PageType.ERROR, error_kind="http"))
        w.submit(fetched(B, 4.0, None, status=404, page_type=PageType.ERROR, error_kind="http"))
        w.submit(fetched(B, 5.0, "back"))
        w.submit(fetched(B, 6.0, None, status=404, page_type=PageType.ERROR, error_kind="http"))
    assert row(store, A, "type, dead_count") == ("dead", 3)
    assert row(store, B, "type, dead_count") == ("html", 1)  # a 200 resets the count
    st = store.status()
    assert st["errors_by_kind"] == {"http": 5}
    assert st["by_type"]["dead"] == 1


def test_frontier_fetched_leaves_children_enter(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        w.submit(Enqueue(A, 1, enqueued_at=0.0))
        w.flush()
        assert [r.url for r in store.frontier_rows()] == [A]
        w.submit(fetched(A, 10.0, children=(B, C, D), enqueue=((B, 2), (C, 3))))
        w.flush()
        rows = {r.url: r for r in store.frontier_rows()}
        assert set(rows) == {B, C}
        assert (rows[B].priority, rows[B].depth, rows[C].priority) == (2, 1, 3)
        w.submit(Enqueue(B, 0, not_before=50.0, enqueued_at=11.0))  # more urgent: kept
        w.submit(Enqueue(C, 4, enqueued_at=11.0))                   # less urgent: ignored
        w.flush()
        rows = {r.url: r for r in store.frontier_rows()}
        assert (rows[B].priority, rows[B].not_before, rows[C].priority) == (0, 0.0, 3)
        b_id, = store.url_ids([B])
        w.submit(Dequeue(b_id))
    assert [r.url for r in store.frontier_rows()] == [C]


def test_frontier_order_within_one_batch(store: MetadataStore, fetched) -> None:
    """Ops apply in submission order even inside a batch."""
    with store.writer(batch_size=100, flush_interval_s=5.0) as w:
        w.submit(Enqueue(A, 1, enqueued_at=0.0))
        w.submit(fetched(A, 1.0, enqueue=((B, 2),)))
        w.submit(fetched(B, 2.0, enqueue=((A, 4),)))   # A queued again after its fetch
        w.submit(fetched(C, 3.0))
        w.submit(Enqueue(C, 2, enqueued_at=4.0))
    rows = {r.url: r.priority for r in store.frontier_rows()}
    assert rows == {A: 4, C: 2}
    assert w.stats["batches"] == 1


def test_same_page_twice_in_one_batch(store: MetadataStore, fetched) -> None:
    with store.writer(batch_size=100, flush_interval_s=5.0) as w:
        w.submit(fetched(A, 1.0, "x"))
        w.submit(fetched(A, 2.0, "y"))
    assert row(store, A, "accesses, changes") == (2, 1)


def test_export_graph_matches_links(store: MetadataStore, fetched) -> None:
    rng = np.random.default_rng(7)
    urls = [f"http://g{i % 5}.example/{i}" for i in range(200)]
    expected: dict[int, list[int]] = {}
    ids = store.url_ids(urls[::-1])[::-1]  # ids not in list order, on purpose
    with store.writer(batch_size=37) as w:
        for i in range(0, 200, 3):
            kids = [int(k) for k in rng.integers(0, 200, size=int(rng.integers(0, 12)))]
            is_xml = i % 2 == 0
            w.submit(fetched(urls[i], float(i), str(i), children=tuple(urls[k] for k in kids),
                             page_type=PageType.XML if is_xml else PageType.HTML))
            expected[i] = kids
    g = store.export_graph()
    assert g.n == 200 and g.indptr.shape == (201,) and g.indptr.dtype == np.int64
    assert g.indices.dtype == np.int32 and g.ids.tolist() == list(range(1, 201))
    assert g.m == sum(len(k) for k in expected.values())
    for i, kids in expected.items():
        k = ids[i] - 1
        assert g.indices[g.indptr[k]:g.indptr[k + 1]].tolist() == [ids[j] - 1 for j in kids]
        assert g.xml_mask[k] == (i % 2 == 0)
    fetched_rows = {ids[i] - 1 for i in expected}
    assert all(g.indptr[k] == g.indptr[k + 1] for k in range(200) if k not in fetched_rows)


def test_export_empty_graph(store: MetadataStore) -> None:
    g = store.export_graph()
    assert (g.n, g.m, g.indptr.tolist()) == (0, 0, [0])


def test_refresh_ranks_opic_state_jobs(store: MetadataStore) -> None:
    ids = np.array(store.url_ids([A, B, C]), dtype=np.int64)
    with store.writer() as w:
        w.submit(SetRanks(ids, importance=np.array([3.0, 1.0, 0.5]), interest=None))
        w.submit(SetRanks(ids[:1], importance=None, interest=np.array([2.5])))
        w.submit(SaveOpic(5.0, 0.75, b"npz", (A, "http://not.stored/", C),
                          cash=np.array([0.1, 0.2, 0.3]), history=np.array([0.5, 0.6, 0.7]),
                          estimate=np.array([0.2, 0.3, 0.5])))
        w.submit(SetRefresh(int(ids[1]), 1e-5, "mle", 7, 3.5))
        w.submit(SetState("S", 12.5))
        w.submit(SetState("S", 13.5))
        w.submit(JobRun("rank", 1.0, 2.5, "ok", "12 iterations"))
    assert row(store, A, "importance, interest, opic_cash") == (3.0, 2.5, 0.1)
    assert row(store, C, "opic_cash, opic_history, opic_estimate") == (0.3, 0.7, 0.5)
    assert store.opic_checkpoint() == (5.0, 3, 0.75, b"npz")
    assert row(store, B, "rate, rate_source, due_unit, interval_units") == (1e-5, "mle", 7, 3.5)
    assert store.get_state("S") == 13.5
    st = store.status(current_unit=7)
    assert st["due_now"] == 1 and store.status(current_unit=6)["due_now"] == 0
    assert st["last_job_runs"][0]["name"] == "rank"


def test_unit_spending_rows_replace_each_other_and_show_in_the_view(
        store: MetadataStore) -> None:
    with store.writer() as w:
        w.submit(UnitSpent(4, 600.0, 10, 3, 2, 1, 0, None, False, 2450.0))
        w.submit(UnitSpent(4, 600.0, 10, 9, 6, 2, 1, 5, True, 3000.0))
        w.submit(UnitSpent(5, 600.0, 10, 1, 1, 0, 0, None, False, 3010.0))
    assert store.fetch_units(2) == [UnitSpent(5, 600.0, 10, 1, 1, 0, 0, None, False, 3010.0),
                                    UnitSpent(4, 600.0, 10, 9, 6, 2, 1, 5, True, 3000.0)]
    assert store.fetch_units(1, before=5)[0].unit == 4
    conn = store.read_connection()
    try:
        view = conn.execute("SELECT unit, starts, unspent, carried_over, state "
                            "FROM v_fetch_units").fetchall()
    finally:
        conn.close()
    assert view == [(5, "1970-01-01 00:50:00", 9, None, "stopped in it, never closed"),
                    (4, "1970-01-01 00:40:00", 1, 5, "ended")]
    assert [u["unit"] for u in store.status()["fetch_units"]] == [5, 4]
    now = int(time.time() // 600)  # the view reads the wall clock
    with store.writer() as w:
        w.submit(UnitSpent(now, 600.0, 10, 1, 1, 0, 0, None, False, 4000.0))
    conn = store.read_connection()
    try:
        (state,) = conn.execute("SELECT state FROM v_fetch_units WHERE unit = ?",
                                (now,)).fetchone()
    finally:
        conn.close()
    assert state == "running or stopped in it"


def test_xml_versions_and_pending(store: MetadataStore, fetched) -> None:
    dtd = "http://site.example/doc.dtd"
    with store.writer() as w:
        w.submit(fetched(A, 1.0, "<a/>", page_type=PageType.XML))
        w.submit(SetPending(A, (dtd,), 1.0, "waiting for DTD"))
        w.flush()
        assert store.status()["pending"] == 1
        w.submit(XmlVersion(A, b"m" * 16, b"c" * 16, 2.0, 4, "ab/cd", True, dtd_url=dtd))
        w.submit(ClearPending(A))
    st = store.status()
    assert (st["pending"], st["xml_versions"]) == (0, 1)
    assert store.url_ids([dtd], create=False)[0] is not None


def test_enqueue_uses_injected_clock(store: MetadataStore) -> None:
    with store.writer(now=lambda: 1234.5) as w:
        w.submit(Enqueue(A, 2))
    conn = store.read_connection()
    assert conn.execute("SELECT enqueued_at FROM frontier").fetchone() == (1234.5,)
    conn.close()


def test_failed_batch_stops_writer_with_clear_error(db_path: Path) -> None:
    with MetadataStore.open(db_path) as store:
        # A batch that fails inside its transaction (a lock held by another connection is
        # waited for: test_a_write_lock_held_past_the_busy_timeout_...).
        blocker = sqlite3.connect(db_path, isolation_level=None)
        w = store.writer()
        blocker.execute("CREATE TRIGGER refuse BEFORE INSERT ON urls "
                        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
        w.submit(Enqueue(A, 1, enqueued_at=0.0))
        with pytest.raises(MetadataError, match="batch failed and was rolled back"):
            w.flush()
        with pytest.raises(MetadataError, match="writer stopped"):
            w.submit(Enqueue(B, 1, enqueued_at=0.0))
        blocker.execute("DROP TRIGGER refuse")
        blocker.close()
        with pytest.raises(MetadataError):
            w.close()
        w.close()  # idempotent
        assert list(store.frontier_rows()) == []
        with store.writer() as w2:  # a new writer works again
            w2.submit(Enqueue(A, 1, enqueued_at=0.0))
        assert [r.url for r in store.frontier_rows()] == [A]


def test_back_pressure_and_many_producers(store: MetadataStore, fetched) -> None:
    with store.writer(batch_size=8, flush_interval_s=0.01, max_batch_size=8) as w:
        assert w._queue.maxsize == 32  # noqa: SLF001 - the bound is the point of the test

        def produce(k: int) -> None:
            for i in range(200):
                w.submit(fetched(f"http://p{k}.example/{i}", float(i), str(i)))

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        w.flush()
        assert w.stats["ops_written"] == 800 and w.stats["queue_size"] == 0
    assert store.status()["by_type"] == {"html": 800}
    assert store.status()["hosts"] == 4


def test_group_commit_grows_batches_under_backlog(db_path: Path, fetched) -> None:
    """With a backlog the writer commits up to max_batch_size ops at once, not batch_size."""
    with MetadataStore.open(db_path) as store:
        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the writer waits: a backlog builds up
        w = store.writer(batch_size=10, flush_interval_s=0.001, max_batch_size=100)
        for i in range(101):
            w.submit(fetched(f"http://gc.example/{i}", float(i)))
        blocker.execute("ROLLBACK")
        blocker.close()
        w.flush()
        assert w.stats["ops_written"] == 101
        assert w.stats["batches"] <= 3  # 11 or more without group commit
        w.close()


def test_a_write_lock_held_past_the_busy_timeout_makes_the_writer_wait_not_fail(
        store: MetadataStore, fetched, caplog) -> None:
    """An operator's sqlite3 session left in BEGIN IMMEDIATE (or a VACUUM, a backup) holds
    the lock for longer than the busy timeout: the writer warns and waits, and commits when
    the lock is let go; nothing submitted is lost."""
    other = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Timer(1.0, lambda: other.execute("COMMIT"))
    with caplog.at_level("INFO", logger="metadata.writer"):
        with store.writer(flush_interval_s=0.05, busy_timeout_s=0.2) as w:
            released.start()
            w.submit(fetched(A, 10.0, children=(B,)))
            w.flush()
    released.join()
    other.close()
    assert row(store, A, "type, accesses") == ("html", 1)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings and "is locked by another connection" in warnings[0]
    assert any("is ours again" in r.getMessage() for r in caplog.records)


def test_a_lock_still_held_when_the_writer_closes_fails_after_one_more_timeout(
        store: MetadataStore, fetched) -> None:
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        w = store.writer(flush_interval_s=0.05, busy_timeout_s=0.2)
        w.submit(fetched(A, 10.0))
        started = time.monotonic()
        with pytest.raises(MetadataError, match="locked by another connection"):
            w.close()
        assert time.monotonic() - started < 5.0
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_full_disk_stops_the_writer_with_exit_code_2(store: MetadataStore, fetched) -> None:
    """SQLITE_FULL (here: the file may not grow by a page): one error saying so, exit 2,
    so systemd does not restart into the same full disk."""
    from metadata.errors import StoreFullError
    w = store.writer(flush_interval_s=0.05)
    w.submit(fetched(A, 10.0))
    w.flush()
    conn = w._conn  # noqa: SLF001 - the real SQLite error, without filling a real disk
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    w.submit(fetched(B, 11.0, children=tuple(f"http://big.example/{i}" for i in range(5000))))
    with pytest.raises(StoreFullError, match="is full") as full:
        w.flush()
    assert full.value.exit_code == 2 and "free space" in str(full.value)
    with pytest.raises(StoreFullError):
        w.close()
    assert row(store, A, "type, accesses") == ("html", 1)   # what was stored stays
