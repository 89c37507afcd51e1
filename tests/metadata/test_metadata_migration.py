"""In-place upgrade from schema version 1 (one row per link) keeps every datum."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from metadata import Enqueue, MetadataStore
from metadata.schema import CURRENT_VERSION, MIGRATIONS
from metadata.urlkeys import host_of, url_hash
from metadata.views import VIEWS

URLS = ["http://a.example/", "http://a.example/x", "http://b.example/y", "http://b.example/z"]


def make_v1_file(path: Path) -> None:
    """A database exactly as version 1 wrote it, with data in every table we read back."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    MIGRATIONS[1][1](conn)
    conn.execute("INSERT INTO migrations VALUES (1, 'initial schema', 0)")
    hosts = sorted({host_of(u) for u in URLS})
    conn.executemany("INSERT INTO hosts (id, host) VALUES (?, ?)", enumerate(hosts, 1))
    for i, url in enumerate(URLS, 1):
        conn.execute("INSERT INTO urls (id, hash, host_id, depth, url, type, accesses) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (i, url_hash(url), hosts.index(host_of(url)) + 1, int(i > 1),
                      url, "html" if i <= 2 else "unread", int(i <= 2)))
    # page 1 links to 2, 3, 2 (order matters), page 2 to 4
    conn.executemany("INSERT INTO links (src, pos, dst) VALUES (?, ?, ?)",
                     [(1, 0, 2), (1, 1, 3), (1, 2, 2), (2, 0, 4)])
    conn.execute("INSERT INTO observations (url_id, prev_access, access, changed) "
                 "VALUES (1, NULL, 5.0, 0)")
    conn.executemany("INSERT INTO frontier VALUES (?, ?, ?, ?)", [(3, 2, 5.0, 0.0),
                                                                  (4, 3, 6.0, 0.0)])
    conn.execute("INSERT INTO state VALUES ('S', '2.5')")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("COMMIT")
    conn.close()


def test_v1_file_upgrades_in_place_with_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    make_v1_file(path)
    with MetadataStore.open(path) as store:
        assert store.schema_version == CURRENT_VERSION == 2
        assert store.url_ids(URLS, create=False) == [1, 2, 3, 4]
        g = store.export_graph()
        assert g.indptr.tolist() == [0, 3, 4, 4, 4]
        assert g.indices.tolist() == [1, 2, 1, 3]
        assert [(r.url_id, r.priority, r.depth) for r in store.frontier_rows()] == [
            (3, 2, 1), (4, 3, 1)]
        assert store.get_state("S") == 2.5
        assert store.status()["by_type"] == {"html": 2, "unread": 2}
        with store.writer() as w:  # the upgraded file takes new writes
            w.submit(Enqueue("http://c.example/", 1, enqueued_at=7.0))
        assert store.url_ids(["http://c.example/"], create=False) == [5]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version, name FROM migrations ORDER BY version").fetchall() == [
        (1, "initial schema"), (2, MIGRATIONS[2][0])]
    assert conn.execute("SELECT n, length(children) FROM links ORDER BY src").fetchall() == [
        (3, 12), (1, 4)]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"xml_versions", "pending", "links"} <= tables and "links_v2" not in tables
    views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='view'")}
    assert set(VIEWS) <= views
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_reopening_current_file_runs_no_migration(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    MetadataStore.open(path).close()
    MetadataStore.open(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM migrations").fetchone() == (CURRENT_VERSION,)
    conn.close()


def test_dropped_view_is_recreated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    MetadataStore.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP VIEW v_hosts")
    conn.close()
    MetadataStore.open(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM v_hosts").fetchone() == (0,)
    conn.close()
