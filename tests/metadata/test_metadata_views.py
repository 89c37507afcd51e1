"""Every operator view answers with rows on a small real crawl database."""

from __future__ import annotations

import sqlite3

import pytest

from metadata import MetadataStore
from metadata.views import VIEWS


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_view_returns_rows(small_store: MetadataStore, view: str) -> None:
    conn = sqlite3.connect(small_store.path)
    rows = conn.execute(f"SELECT * FROM {view}").fetchall()
    conn.close()
    assert rows, f"{view} returned no rows"


def test_view_contents(small_store: MetadataStore) -> None:
    conn = sqlite3.connect(small_store.path)
    q = conn.execute
    assert dict(q("SELECT type, pages FROM v_pages_by_type").fetchall()) == {
        "html": 1, "xml": 1, "error": 2, "unread": 1}
    doc = q("SELECT url, versions, latest, latest_valid, dtd_url FROM v_xml_documents").fetchone()
    assert doc == ("http://shop.example/catalog.xml", 2, "2026-01-01 01:01:00", 0,
                   "http://shop.example/catalog.dtd")
    assert q("SELECT url FROM v_top_importance LIMIT 1").fetchone() == ("http://shop.example/",)
    assert q("SELECT changes_per_day, rate_source, observations FROM v_change_rates "
             "LIMIT 1").fetchone() == (24.0, "mle", 2)
    errors = dict(q("SELECT kind, errors FROM v_recent_errors").fetchall())
    assert errors == {"http": 1, "timeout": 1}
    hosts = {h: (f, e) for h, _, f, e, _ in q("SELECT * FROM v_hosts")}
    assert hosts["shop.example"] == (5, 1) and hosts["news.example"] == (1, 1)
    urls = dict(q("SELECT host, urls FROM v_hosts"))
    assert urls == dict(q("SELECT h.host, count(u.id) FROM hosts h LEFT JOIN urls u "
                          "ON u.host_id = h.id GROUP BY h.id"))
    assert q("SELECT sum(pages) FROM v_due_per_unit").fetchone() == (2,)
    top = q("SELECT url, estimate, estimate_x_n, cash, history FROM v_opic LIMIT 1").fetchone()
    assert top == ("http://shop.example/", 0.45, 1.8, 0.05, 0.4)
    conn.close()


def test_dtd_and_entity_files_are_no_xml_documents(small_store: MetadataStore) -> None:
    conn = sqlite3.connect(small_store.path)
    q = conn.execute
    dtd_id, dtd = q("SELECT id, url FROM urls WHERE url != 'http://shop.example/catalog.xml' "
                    "LIMIT 1").fetchone()  # stored as a DTD (a version with no signature)
    q("INSERT INTO xml_versions (url_id, md5, c14n_signature, fetched_at, size, storage_key) "
      "VALUES (?, x'00', NULL, 1767229260, 10, 'k')", (dtd_id,))
    conn.commit()
    documents = [r[0] for r in q("SELECT url FROM v_xml_documents")]
    assert documents == ["http://shop.example/catalog.xml"]
    kinds = dict(q("SELECT url, kind FROM v_xml_versions"))
    assert kinds == {"http://shop.example/catalog.xml": "document", dtd: "dtd_or_entity"}
    conn.close()


def test_a_writer_replaces_views_whose_sql_is_not_this_xyros(small_store: MetadataStore) -> None:
    conn = sqlite3.connect(small_store.path)
    conn.execute("DROP VIEW v_hosts")
    conn.execute("CREATE VIEW v_hosts AS SELECT 'old' AS host")
    conn.commit()
    conn.close()
    MetadataStore.open(small_store.path).close()
    conn = sqlite3.connect(small_store.path)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'v_hosts'").fetchone()[0]
    conn.close()
    assert sql == f"CREATE VIEW v_hosts AS {VIEWS['v_hosts']}"


def test_v_hosts_counts_the_urls_in_one_scan(small_store: MetadataStore) -> None:
    """Not one scan of urls per host (urls.host_id has no index of its own): that took
    hours over a million URLs and 5,000 hosts, holding a read snapshot the whole time."""
    conn = sqlite3.connect(small_store.path)
    plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN SELECT * FROM v_hosts"))
    conn.close()
    assert "CORRELATED" not in plan, plan
