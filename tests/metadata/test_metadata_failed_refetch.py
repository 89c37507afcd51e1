"""The writer on a stored page whose re-fetch fails (DESIGN.md §6, §7): the page stays what
it is, a failed fetch is no observation and replaces nothing stored; the failure is an
errors row and the page's last HTTP status."""

from __future__ import annotations

import struct

from metadata import MetadataStore, PageType

A, B, C = (f"http://site.example/{x}" for x in "abc")


def query(store: MetadataStore, sql: str, *args: object) -> list[tuple]:
    conn = store.read_connection()
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def page(store: MetadataStore, url: str, cols: str) -> tuple:
    return query(store, f"SELECT {cols} FROM urls WHERE url = ?", url)[0]


def children(store: MetadataStore, url: str) -> list[str]:
    (blob,), = query(store, "SELECT l.children FROM links l JOIN urls u ON u.id = l.src "
                            "WHERE u.url = ?", url)
    return [store.url_of(i) for i in struct.unpack(f"<{len(blob) // 4}i", blob)]


def test_a_broken_body_replaces_nothing_stored(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        w.submit(fetched(A, 10.0, "<doc/>", children=(B, C), etag='"v1"',
                         page_type=PageType.XML, content_type="application/xml", size=6))
        w.flush()
        w.submit(fetched(A, 20.0, "<doc><cut", page_type=PageType.ERROR, error_kind="parse",
                         error_detail="premature end of data", content_type="text/plain",
                         size=9))
    assert page(store, A, "type, etag, content_type, size, changes, accesses, http_status") \
        == ("xml", '"v1"', "application/xml", 6, 0, 2, 200)
    assert page(store, A, "signature")[0] == fetched(A, 0.0, "<doc/>").signature
    assert children(store, A) == [B, C]
    assert query(store, "SELECT count(*) FROM observations")[0][0] == 1
    assert query(store, "SELECT kind, at, detail FROM errors") == [
        ("parse", 20.0, "premature end of data")]


def test_a_read_then_a_failure_in_one_batch(store: MetadataStore, fetched) -> None:
    with store.writer() as w:
        w.submit(fetched(A, 10.0, "v1"))
        w.submit(fetched(A, 20.0, None, status=503, page_type=PageType.ERROR,
                         error_kind="http_status"))
        w.submit(fetched(B, 10.0, None, status=500, page_type=PageType.ERROR,
                         error_kind="http_status"))
    assert page(store, A, "type, http_status, last_access") == ("html", 503, 20.0)
    assert page(store, B, "type")[0] == "error"  # never read: nothing to keep
    assert [r[0] for r in query(store, "SELECT access FROM observations")] == [10.0]
    assert query(store, "SELECT kind, count(*) FROM errors GROUP BY kind") == [
        ("http_status", 2)]


def test_a_stored_page_robots_txt_now_forbids_leaves_the_plan_as_a_failing_one(
        store: MetadataStore, fetched) -> None:
    # A refusal is no access (no request was sent), so it must not hide the refusal before
    # it: the page leaves the plan once refused twice and unread for max(t_max, t_i) units,
    # as a page failing any other way, instead of being offered again every t_max for good.
    from metadata import FetchRecord, SetState
    from metadata.refresh_queries import FOLDER_UNIT_KEY, MAX_INTERVAL_KEY

    unit = 100.0
    with store.writer() as w:
        w.submit(SetState(FOLDER_UNIT_KEY, unit))
        w.submit(SetState(MAX_INTERVAL_KEY, 10.0))
        w.submit(fetched(A, 0.0, "<doc/>", page_type=PageType.XML))
    with store.atomic() as conn:
        conn.execute("UPDATE urls SET interval_units = 2.0, due_unit = 2 WHERE url = ?", (A,))
    for at in (500.0, 1600.0):   # 5 units, then 16 > t_max after the last good read
        with store.writer() as w:
            w.submit(FetchRecord(A, at, PageType.ERROR, error_kind="robots",
                                 error_detail="disallowed by robots.txt", requested=False))
        kind, accesses, last = page(store, A, "type, accesses, last_access")
        assert (accesses, last) == (1, 0.0)   # no request: no access
    assert kind == "error"   # out of the plan, its document kept in the warehouse
