"""In-place upgrades from schema versions 1 (one row per link) and 2 keep every datum."""

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
        assert store.schema_version == CURRENT_VERSION == 11
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
        (1, "initial schema"), (2, MIGRATIONS[2][0]), (3, MIGRATIONS[3][0]),
        (4, MIGRATIONS[4][0]), (5, MIGRATIONS[5][0]), (6, MIGRATIONS[6][0]),
        (7, MIGRATIONS[7][0]), (8, MIGRATIONS[8][0]), (9, MIGRATIONS[9][0]),
        (10, MIGRATIONS[10][0]), (11, MIGRATIONS[11][0])]
    assert conn.execute("SELECT n, length(children) FROM links ORDER BY src").fetchall() == [
        (3, 12), (1, 4)]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"xml_versions", "pending", "links", "opic_checkpoint", "seeds"} <= tables
    assert "links_v2" not in tables
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


def make_v2_file(path: Path) -> None:
    """A version-2 file: one fetched page (with validators) and one discovered URL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for version in (1, 2):
        MIGRATIONS[version][1](conn)
        conn.execute("INSERT INTO migrations VALUES (?, ?, 0)", (version, MIGRATIONS[version][0]))
    conn.execute("INSERT INTO hosts (id, host) VALUES (1, 'a.example')")
    conn.execute("INSERT INTO urls (id, hash, host_id, url, type, first_access, etag) "
                 "VALUES (1, ?, 1, ?, 'html', 5.0, '\"e1\"')", (url_hash(URLS[0]), URLS[0]))
    conn.execute("INSERT INTO urls (id, hash, host_id, depth, url) VALUES (2, ?, 1, 1, ?)",
                 (url_hash(URLS[1]), URLS[1]))
    conn.execute("PRAGMA user_version = 2")
    conn.execute("COMMIT")
    conn.close()


def test_v2_file_gets_the_partial_hash_index(tmp_path: Path) -> None:
    from metadata.crawl_queries import validators

    path = tmp_path / "v2.db"
    make_v2_file(path)
    with MetadataStore.open(path) as store:
        assert store.schema_version == CURRENT_VERSION
        assert store.url_ids([URLS[1], URLS[0], "http://new.example/"]) == [2, 1, 3]
        conn = store.read_connection()
        assert validators(conn, URLS[0]) == ('"e1"', None, "html")
        assert validators(conn, URLS[1]) == (None, None, None)  # discovered, never fetched
        plan = " ".join(r[-1] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT url FROM urls WHERE hash = ? AND first_access IS NOT NULL",
            (1,)))
        conn.close()
    assert "USING INDEX urls_hash" in plan
    conn = sqlite3.connect(path)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'urls_hash'").fetchone()[0]
    indexed = conn.execute("SELECT count(*) FROM urls INDEXED BY urls_hash "
                           "WHERE hash IS NOT NULL AND first_access IS NOT NULL").fetchone()[0]
    conn.close()
    assert sql.endswith("WHERE first_access IS NOT NULL") and indexed == 1


def make_v3_file(path: Path) -> None:
    """A version-3 file: a fetched page filed in a folder, unread and refused links."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for version in (1, 2, 3):
        MIGRATIONS[version][1](conn)
        conn.execute("INSERT INTO migrations VALUES (?, ?, 0)", (version, MIGRATIONS[version][0]))
    conn.execute("INSERT INTO hosts (id, host) VALUES (1, 'a.example')")
    conn.execute("INSERT INTO urls (id, hash, host_id, url, type, first_access, last_access, "
                 "accesses, rate, rate_source, due_unit, interval_units) VALUES "
                 "(1, ?, 1, ?, 'html', 5.0, 5.0, 1, 0.001, 'prior', 7, 2.0)",
                 (url_hash(URLS[0]), URLS[0]))
    for i, (url, kind, imp) in enumerate([(URLS[1], "unread", 0.5), (URLS[2], "unread", 2.0),
                                          (URLS[3], "refused", 9.0)], 2):
        conn.execute("INSERT INTO urls (id, hash, host_id, depth, url, type, importance) "
                     "VALUES (?, ?, 1, 1, ?, ?, ?)", (i, url_hash(url), url, kind, imp))
    conn.execute("PRAGMA user_version = 3")
    conn.execute("COMMIT")
    conn.close()


def schema_of(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    rows = [(t, n, " ".join((sql or "").split())) for t, n, sql in conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
        "ORDER BY type, name")]
    rows += [("column", *c[1:3]) for c in conn.execute("PRAGMA table_info(urls)")]
    conn.close()
    return rows


def test_v3_file_gets_the_weight_key_and_the_unread_index(tmp_path: Path) -> None:
    from metadata import refresh_queries as rq

    path = tmp_path / "v3.db"
    make_v3_file(path)
    with MetadataStore.open(path) as store:
        assert store.schema_version == CURRENT_VERSION == 11
        conn = store.read_connection()
        assert conn.execute("SELECT due_unit, weight, rate FROM urls WHERE id = 1"
                            ).fetchone() == (7, None, 0.001)
        assert rq.unread_ranked(conn, 10) == [3, 2]  # by importance; the refused one left out
        indexed = conn.execute("SELECT count(*) FROM urls INDEXED BY urls_unread "
                               "WHERE type = 'unread'").fetchone()[0]
        conn.close()
    assert indexed == 2
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT max(version), name FROM migrations").fetchone() == (
        CURRENT_VERSION, MIGRATIONS[CURRENT_VERSION][0])
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_fresh_and_migrated_files_have_the_same_schema(tmp_path: Path) -> None:
    MetadataStore.open(tmp_path / "fresh.db").close()
    make_v1_file(tmp_path / "v1.db")
    make_v3_file(tmp_path / "v3.db")
    for name in ("v1.db", "v3.db"):
        MetadataStore.open(tmp_path / name).close()
        assert schema_of(tmp_path / name) == schema_of(tmp_path / "fresh.db"), name
    names = {n for _, n, _ in schema_of(tmp_path / "fresh.db")}
    assert {"urls_weight", "urls_unread", "urls_due", "weight", "urls_lm_host",
            "lm_reliable"} <= names


def test_xyro_init_says_it_upgraded_the_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "old.db"
    make_v1_file(path)
    command = [sys.executable, "-m", "xyro", "-s", f"storage.database={path}",
               "-s", f"storage.warehouse_dir={tmp_path / 'w'}", "init"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == (f"upgraded from schema version 1: {path} "
                                    f"(schema version {CURRENT_VERSION})")
    again = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert again.stdout.strip() == f"checked {path} (schema version {CURRENT_VERSION})"


def _built_at(version: int, path: Path) -> sqlite3.Connection:
    """A new file brought to schema ``version`` by the migrations up to it (autocommit)."""
    from metadata import schema

    conn = sqlite3.connect(path, isolation_level=None)
    current = schema.CURRENT_VERSION
    schema.CURRENT_VERSION = version
    try:
        schema.migrate(conn, str(path))
    finally:
        schema.CURRENT_VERSION = current
    return conn


def test_v8_seeds_keep_their_rows_as_the_operator_s(tmp_path: Path) -> None:
    # A version 8 file (built by the migrations up to 8) with a seed of `xyro seed`.
    path = tmp_path / "v8.db"
    conn = _built_at(8, path)
    conn.execute("INSERT INTO seeds (url, priority, added_at) VALUES ('http://a.example/', 1, 5)")
    conn.close()
    with MetadataStore.open(path) as store:
        assert store.schema_version == 11
        assert [(s.url, s.priority, s.redirected_from) for s in store.seeds()] == [
            ("http://a.example/", 1, None)]


def test_v9_failed_pages_are_marked_for_retry_unless_lasting(tmp_path: Path) -> None:
    # Pages that failed before version 10 get the tries the writer now gives: a 500 or a
    # timeout, not robots.txt or a refused type, and not after four fetches.
    path = tmp_path / "v9.db"
    conn = _built_at(9, path)
    conn.execute("INSERT INTO hosts (id, host) VALUES (1, 'a.example')")
    pages = [(1, "500", 1, "http_status"), (2, "robots", 1, "robots"), (3, "slow", 2, "timeout"),
             (4, "worn", 4, "timeout"), (5, "type", 1, "content_type")]
    for i, name, accesses, kind in pages:
        conn.execute("INSERT INTO urls (id, hash, type, host_id, url, last_access, accesses) "
                     "VALUES (?, ?, 'error', 1, ?, 1.0, ?)",
                     (i, i, f"http://a.example/{name}", accesses))
        conn.execute("INSERT INTO errors (url_id, host_id, at, kind) VALUES (?, 1, 1.0, 'dns')",
                     (i,))   # an older failure: the last one decides
        conn.execute("INSERT INTO errors (url_id, host_id, at, kind) VALUES (?, 1, 1.0, ?)",
                     (i, kind))
    conn.close()
    with MetadataStore.open(path) as store:
        assert store.schema_version == 11
    conn = sqlite3.connect(path)
    try:
        marked = [u for (u,) in conn.execute("SELECT url FROM urls WHERE retry = 1 ORDER BY id")]
    finally:
        conn.close()
    assert marked == ["http://a.example/500", "http://a.example/slow"]
