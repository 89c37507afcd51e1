"""Opening, ids, transactions and bad input of the metadata store (real SQLite files)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from metadata import (
    Enqueue, FetchRecord, MetadataError, MetadataStore, PageType, SetRanks, SetState,
)
from metadata.errors import StoreUnusableError
from metadata.schema import CURRENT_VERSION
from metadata.urlkeys import host_of, url_hash


def test_fresh_file_is_current_version_in_wal(db_path: Path) -> None:
    with MetadataStore.open(db_path) as store:
        assert store.schema_version == CURRENT_VERSION
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    versions = [r[0] for r in conn.execute("SELECT version FROM migrations ORDER BY version")]
    assert versions == list(range(1, CURRENT_VERSION + 1))
    conn.close()


def test_url_ids_survive_restart(db_path: Path) -> None:
    urls = [f"http://h{i % 7}.example/p/{i}" for i in range(300)]
    with MetadataStore.open(db_path) as store:
        first = store.url_ids(urls)
        with store.writer() as w:
            w.submit(Enqueue("http://seed.example/", 1))
    assert first == list(range(1, 301))
    with MetadataStore.open(db_path) as store:
        assert store.url_ids(urls[::-1], create=False) == first[::-1]
        assert store.url_ids(["http://seed.example/"]) == [301]
        assert store.url_ids(["http://new.example/"]) == [302]
        assert store.url_of(150) == urls[149]
        assert store.url_of(10_000) is None


def test_url_ids_dedupe_and_unknown(store: MetadataStore) -> None:
    assert store.url_ids(["http://a/", "http://b/", "http://a/"]) == [1, 2, 1]
    assert store.url_ids(["http://a/", "http://zzz/"], create=False) == [1, None]


def test_hash_collisions_resolve_by_text(db_path: Path) -> None:
    """A constant hash makes every URL collide: ids must still be right."""
    def collide(url: str) -> int:
        return 42

    urls = [f"http://c.example/{i}" for i in range(50)]
    with MetadataStore.open(db_path, hash_fn=collide) as store:
        ids = store.url_ids(urls)
        with store.writer() as w:
            w.submit(FetchRecord(urls[3], 1.0, "html", 200, b"s", children=(urls[7], "http://x/")))
        assert store.url_ids(urls, create=False) == ids
        assert store.url_ids(["http://x/"], create=False) == [51]
        graph = store.export_graph()
        assert graph.indices[graph.indptr[3]:graph.indptr[4]].tolist() == [7, 50]
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(DISTINCT hash), count(*) FROM urls").fetchone() == (1, 51)
    conn.close()


def test_url_hash_is_stable_and_signed_64_bit() -> None:
    assert url_hash("http://example.org/") == url_hash("http://example.org/")
    assert url_hash("http://example.org/") != url_hash("http://example.org/a")
    assert -2**63 <= url_hash("http://é.example/\udc80") < 2**63


@pytest.mark.parametrize("url,host", [
    ("http://Example.org:8080/a?b#c", "example.org:8080"),
    ("https://user:pw@h.example", "h.example"),
    ("http://h.example?q=1", "h.example"),
    ("urn:isbn:123", ""),
])
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


def test_atomic_rolls_back_and_nests(store: MetadataStore) -> None:
    with pytest.raises(RuntimeError):
        with store.atomic():
            store.url_ids(["http://rolled.back/"])
            raise RuntimeError("boom")
    assert store.url_ids(["http://rolled.back/"], create=False) == [None]
    with store.atomic() as conn:
        conn.execute("INSERT INTO state (key, value) VALUES ('a', '1')")
        with pytest.raises(ValueError):
            with store.atomic() as inner:
                inner.execute("INSERT INTO state (key, value) VALUES ('b', '2')")
                raise ValueError("inner")
    assert store.get_state("a") == 1
    assert store.get_state("b", "missing") == "missing"


def test_corrupt_file_gives_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not an sqlite database at all" * 200)
    with pytest.raises(MetadataError, match="not a usable metadata database"):
        MetadataStore.open(bad)


@pytest.mark.parametrize("user_version", [0, 7, 74])
def test_foreign_sqlite_file_is_refused(tmp_path: Path, user_version: int) -> None:
    # Other programs number their schemas with user_version too: a foreign file with one
    # is no Xyro store to migrate ("no such table: migrations") or to call newer.
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.execute(f"PRAGMA user_version = {user_version}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreUnusableError, match="not a Xyro metadata store"):
        MetadataStore.open(other)


def test_newer_version_is_refused(db_path: Path) -> None:
    MetadataStore.open(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {CURRENT_VERSION + 1}")
    conn.close()
    with pytest.raises(MetadataError, match="newer than this Xyro supports"):
        MetadataStore.open(db_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(MetadataError, match="does not exist"):
        MetadataStore.open(tmp_path / "nope" / "x.db")


def test_closed_store_refuses_work(db_path: Path) -> None:
    store = MetadataStore.open(db_path)
    store.close()
    store.close()
    with pytest.raises(MetadataError, match="closed"):
        store.url_ids(["http://a/"])
    with pytest.raises(MetadataError, match="closed"):
        store.writer()


def test_bad_urls_rejected(store: MetadataStore) -> None:
    with pytest.raises(MetadataError, match="non-empty string"):
        store.url_ids([""])
    with pytest.raises(MetadataError, match="non-empty string"):
        store.url_ids([None])  # type: ignore[list-item]


@pytest.mark.parametrize("make", [
    lambda: FetchRecord("", 1.0, "html"),
    lambda: FetchRecord("http://a/", float("nan"), "html"),
    lambda: FetchRecord("http://a/", float("-inf"), "html"),
    lambda: FetchRecord("http://a/", "1.0", "html"),  # type: ignore[arg-type]
    lambda: FetchRecord("http://a/", 1.0, "pdf"),
    lambda: FetchRecord("http://a/", 1.0, "html", signature="abc"),  # type: ignore[arg-type]
    lambda: FetchRecord("http://a/", 1.0, "html", children=("",)),
    lambda: FetchRecord("http://a/", 1.0, "html", children=("http://b/", "")),
    lambda: FetchRecord("http://a/", 1.0, "html", children=("http://b/", None)),
    lambda: FetchRecord("http://a/", 1.0, "html", children=[b"http://b/"]),
    lambda: FetchRecord("http://a/", 1.0, "html", enqueue=(("http://b/", 9),)),
    lambda: Enqueue("http://a/", -1),
    lambda: Enqueue("http://a/", 1, not_before=float("inf")),
    lambda: SetState("", 1),
    lambda: SetState("k", [1, 2]),  # type: ignore[arg-type]
    lambda: SetRanks([1, 2], None, None),  # type: ignore[arg-type]
    lambda: SetRanks(np_ids(), np_ids().astype(float)[:2], None),
])
def test_bad_ops_fail_at_construction(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        make()


class _Url(str):
    pass


def test_good_fetch_records_pass_the_fast_checks_or_the_slow_ones() -> None:
    rec = FetchRecord(_Url("http://a/"), 5, "xml", children=[_Url("http://b/"), "http://c/"],
                      enqueue=[["http://b/", 2]])
    assert rec.children == ("http://b/", "http://c/")
    assert rec.enqueue == (("http://b/", 2),)
    assert rec.page_type is PageType.XML and rec.fetched_at == 5


def np_ids():  # type: ignore[no-untyped-def]
    import numpy as np
    return np.arange(1, 4)


def test_only_one_writer(store: MetadataStore) -> None:
    w = store.writer()
    with pytest.raises(MetadataError, match="already has a writer"):
        store.writer()
    w.close()
    w.close()
    with pytest.raises(MetadataError, match="closed"):
        w.submit(Enqueue("http://a/", 1))
    store.writer().close()


@pytest.mark.parametrize("read_only", [False, True])
def test_a_folder_given_as_the_database_is_named_as_such(tmp_path: Path, read_only: bool) -> None:
    # storage.database pointing at a folder: the error said to check the permissions.
    from metadata.errors import StoreAccessError

    folder = tmp_path / "db"
    folder.mkdir()
    with pytest.raises(StoreAccessError, match=f"{folder} is a folder, not a database file"):
        MetadataStore.open(folder, read_only=read_only)


def test_database_failures_met_after_opening_are_one_line_each(tmp_path: Path) -> None:
    """A write lock held past the busy timeout and a corrupt page found by a query (the
    file opened fine) become one line naming the file and what to do (the CLI prints it)."""
    from metadata import database_failure
    path = tmp_path / "xyro.db"
    with MetadataStore.open(path):
        pass
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as locked:
        waiter.execute("BEGIN IMMEDIATE")
    holder.execute("ROLLBACK")
    holder.close()
    waiter.close()
    failure = database_failure(path, locked.value)
    assert failure is not None and str(path) in str(failure)
    assert "locked by another connection" in str(failure) and "sqlite3 -readonly" in str(failure)
    assert database_failure(path, sqlite3.OperationalError("no such table: x")) is None


def test_a_corrupt_page_met_by_a_command_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    path = tmp_path / "xyro.db"
    with MetadataStore.open(path) as store:
        with store.writer() as w:
            for i in range(3000):
                w.submit(Enqueue(f"http://site.example/page/{i}.html", 3, 1))
    size = path.stat().st_size
    assert size > 200_000
    with open(path, "r+b") as f:   # the schema's page 1 intact: the file opens
        f.seek(size // 2)
        f.write(os.urandom(64 * 1024))
    done = subprocess.run(
        [sys.executable, "-m", "xyro", "-s", f"storage.database={path}",
         "-s", f"storage.warehouse_dir={tmp_path / 'wh'}", "status"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr   # a restart meets the same file
    assert "Traceback" not in done.stderr and "bug" not in done.stderr, done.stderr
    assert "not a usable metadata database" in done.stderr
    assert "restore it from a backup" in done.stderr


def test_the_wal_shrinks_back_after_a_long_reader_lets_go(tmp_path: Path) -> None:
    """An operator's read transaction left open blocks checkpoints and the WAL grows; once
    it ends, the next checkpoint cuts the file back to the limit (it used to keep its
    size until the daemon exited)."""
    from metadata.connection import connect
    path = tmp_path / "xyro.db"
    limit = 256 * 1024
    writer = connect(path, journal_size_limit=limit)
    writer.execute("CREATE TABLE t (x BLOB)")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()   # a snapshot: no checkpoint past it
    wal = Path(f"{path}-wal")
    for _ in range(200):
        writer.execute("INSERT INTO t VALUES (randomblob(8000))")
    grown = wal.stat().st_size
    assert grown > 4 * limit
    reader.execute("COMMIT")
    reader.close()
    writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
    writer.execute("INSERT INTO t VALUES (randomblob(100))")   # restarts the WAL, cut to the limit
    assert wal.stat().st_size <= limit
    writer.close()


def test_a_durable_transaction_commits_at_synchronous_full_and_only_that_one(
        store: MetadataStore) -> None:
    level = "PRAGMA synchronous"
    with store.atomic() as conn:
        normal = conn.execute(level).fetchone()[0]
    with store.atomic(durable=True) as conn:
        assert conn.execute(level).fetchone()[0] == 2   # FULL: the WAL synced at COMMIT
        conn.execute("INSERT INTO state (key, value) VALUES ('k', 1)")
    with pytest.raises(ZeroDivisionError), store.atomic(durable=True) as conn:
        conn.execute("INSERT INTO state (key, value) VALUES ('j', 1)")
        1 / 0
    with store.atomic() as conn:
        assert conn.execute(level).fetchone()[0] == normal == 1   # NORMAL again, even so
        assert conn.execute("SELECT key FROM state WHERE key IN ('k', 'j')").fetchall() \
            == [("k",)]
        with pytest.raises(MetadataError, match="cannot be nested"), \
                store.atomic(durable=True):
            pass


def test_a_file_that_looks_malformed_to_an_immutable_reader_is_not_called_corrupt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An operator without write access to the folder reads as immutable; a daemon writing
    # meanwhile makes the sound file look malformed to that reader. "Restore it from a
    # backup" would throw a good database away.
    import os

    from metadata.connection import database_failure
    path = tmp_path / "xyro.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    with pytest.raises(sqlite3.DatabaseError) as raised:
        sqlite3.connect(path).execute("SELECT * FROM sqlite_master").fetchall()
    assert database_failure(path, raised.value) is not None
    assert "restore it from a backup" in str(database_failure(path, raised.value))
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == tmp_path
                        and mode == os.W_OK else real(p, mode, **kw))
    message = str(database_failure(path, raised.value))
    assert "changed while this command read it as immutable" in message
    assert "restore" not in message and "database's owner" in message
