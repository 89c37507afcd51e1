"""The writer's in-memory hash → id map and the look-ups it spares (real SQLite files)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata.connection import connect
from metadata.idmap import IdMap
from metadata.resolver import UrlResolver
from metadata.urlkeys import url_hash

TRICKY = ('http://q.example/a"b', "http://q.example/back\\slash", "http://q.example/\x01ctl",
          "http://q.example/nul\x00x", "http://q.example/é€😀", "http://q.example/\u2028",
          "http://q.example/tab\t", 'http://q.example/"\\"')


def _fetch(url: str, at: float, children: tuple[str, ...]) -> FetchRecord:
    return FetchRecord(url, at, PageType.HTML, 200, b"%16d" % int(at), children=children)


def _count(path: Path, sql: str = "SELECT count(*) FROM urls") -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def test_map_loads_syncs_merges_and_keeps_colliding_ids(db_path: Path) -> None:
    def coarse(url: str) -> int:  # 8 buckets: many URLs share a hash
        return url_hash(url) % 8 - 4

    urls = [f"http://m.example/{i}" for i in range(40)]
    with MetadataStore.open(db_path, hash_fn=coarse) as store:
        ids = store.url_ids(urls[:30])
        conn = connect(db_path)
        id_map = IdMap(merge_at=4)
        id_map.sync(conn, 30)  # first sync: loads every row
        assert len(id_map) == 30
        store.url_ids(urls[30:])  # rows created by another connection ...
        id_map.sync(conn, 40)  # ... are picked up through the dense ids
        assert len(id_map) == 40
        id_map.add([coarse("http://m.example/new"), 12345], [41, 42], 42)
        conn.close()
    by_hash: dict[int, set[int]] = {}
    for url, url_id in zip(urls, ids + list(range(31, 41))):
        by_hash.setdefault(coarse(url), set()).add(url_id)
    by_hash.setdefault(coarse("http://m.example/new"), set()).add(41)
    by_hash[12345] = {42}
    hashes = sorted(by_hash) + [99, -99]
    for h, cand in zip(hashes, id_map.candidates(hashes)):
        want = by_hash.get(h, set())
        got = set() if cand is None else ({cand} if isinstance(cand, int) else set(cand))
        assert got == want, h


def test_map_keeps_every_id_of_a_hash_added_twice() -> None:
    id_map = IdMap(merge_at=1000)
    id_map.add([5, 6], [1, 2], 2)
    id_map.add([5], [3], 3)  # same hash again (not yet merged): both ids are candidates
    id_map.add([7, 7], [4, 5], 5)  # two new rows sharing a hash in one call
    assert id_map.candidates([5, 6, 7, 8]) == [[1, 3], 2, [4, 5], None]


def test_known_urls_skip_the_hash_index(db_path: Path) -> None:
    """With the map, the writer reads candidate rows by id: no ``hash IN`` probe at all."""
    parent, kids = "http://k.example/", tuple(f"http://k.example/{i}" for i in range(20))
    with MetadataStore.open(db_path) as store:
        with store.writer() as w:
            w.submit(_fetch(parent, 1.0, kids))
            w.flush()
            statements: list[str] = []
            w._conn.set_trace_callback(statements.append)  # noqa: SLF001 - what SQL ran
            w.submit(_fetch(kids[0], 2.0, kids[::-1] + ("http://k.example/new",)))
            w.flush()
            w._conn.set_trace_callback(None)  # noqa: SLF001
    assert statements and not [s for s in statements if "hash IN" in s or "hash =" in s]
    assert _count(db_path) == 22


@pytest.mark.parametrize("hash_fn", [url_hash, lambda url: 7], ids=["md5", "all-collide"])
def test_text_compare_is_exact_for_tricky_urls(db_path: Path, hash_fn) -> None:  # type: ignore[no-untyped-def]
    """Quotes, backslashes, control characters, NUL and non-ASCII survive the look-up: a URL
    seen again gets its id back (a copy that differs in one character would be a new row)."""
    with MetadataStore.open(db_path, hash_fn=hash_fn) as store:
        with store.writer() as w:
            w.submit(_fetch("http://q.example/", 1.0, TRICKY))
            w.flush()
            w.submit(_fetch("http://q.example/2", 2.0, TRICKY[::-1]))
        first = store.url_ids(TRICKY, create=False)
        assert first == list(range(2, 2 + len(TRICKY)))
        assert [store.url_of(i) for i in first] == list(TRICKY)
    assert _count(db_path) == 2 + len(TRICKY)


def test_writer_sees_urls_created_by_other_connections(db_path: Path) -> None:
    with MetadataStore.open(db_path) as store:
        with store.writer() as w:
            w.submit(_fetch("http://o.example/", 1.0, ("http://o.example/a",)))
            w.flush()
            (made,) = store.url_ids(["http://o.example/b"])  # between two writer batches
            w.submit(_fetch("http://o.example/a", 2.0, ("http://o.example/b",)))
        assert store.url_ids(["http://o.example/b"], create=False) == [made]
    assert _count(db_path) == 3


def test_writer_reloads_the_map_after_a_failed_batch(db_path: Path) -> None:
    from metadata import MetadataError

    with MetadataStore.open(db_path) as store:
        w = store.writer()
        w.submit(_fetch("http://f.example/", 1.0, ("http://f.example/a",)))
        w.flush()
        # A batch that fails inside its transaction (a lock held by another connection
        # is waited for instead: test_metadata_writer.py).
        blocker = sqlite3.connect(db_path, isolation_level=None)
        blocker.execute("CREATE TRIGGER refuse BEFORE INSERT ON urls "
                        "WHEN NEW.url = 'http://f.example/lost' "
                        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
        w.submit(_fetch("http://f.example/a", 2.0, ("http://f.example/lost",)))
        with pytest.raises(MetadataError, match="refused by the test"):
            w.flush()
        blocker.execute("DROP TRIGGER refuse")
        blocker.close()
        with pytest.raises(MetadataError):
            w.close()
        with store.writer() as w2:
            w2.submit(_fetch("http://f.example/a", 3.0, ("http://f.example/", "http://f.example/b")))
        assert store.url_ids(["http://f.example/", "http://f.example/a", "http://f.example/b"],
                             create=False) == [1, 2, 3]
    assert _count(db_path) == 3


def _two_buckets(url: str) -> int:  # every URL shares its hash with many others
    return url_hash(url) % 2


@pytest.mark.parametrize("hash_fn", [url_hash, _two_buckets], ids=["md5", "two-buckets"])
@pytest.mark.parametrize("url", TRICKY, ids=range(len(TRICKY)))
def test_each_tricky_url_alone_keeps_its_id(db_path: Path, hash_fn, url: str) -> None:  # type: ignore[no-untyped-def]
    """One URL per batch (a batch's other URLs cannot mask an escape or a collision): the
    URL seen again gets its stored id back."""
    with MetadataStore.open(db_path, hash_fn=hash_fn) as store:
        with store.writer() as w:
            w.submit(_fetch("http://q.example/", 1.0, (url,)))
            w.flush()
            w.submit(_fetch("http://q.example/2", 2.0, (url,)))
        assert store.url_ids([url], create=False) == [2]
    assert _count(db_path) == 3


def test_a_single_candidate_with_another_text_is_a_new_url(db_path: Path) -> None:
    """The map names one stored row for the hash, but its text differs (a 64-bit collision):
    the URL is new, while the stored URL seen in the same batch keeps its id."""
    collide = {"http://p.example/a": 1, "http://p.example/b": 1,  # /b's hash is /a's,
               "http://p.example/c": 3, "http://p.example/é": 3}  # and /é's is /c's
    old = ("http://p.example/a", "http://p.example/c")
    with MetadataStore.open(db_path, hash_fn=lambda u: collide.get(u, url_hash(u))) as store:
        with store.writer() as w:
            w.submit(_fetch("http://p.example/", 1.0, old))
            w.flush()
            w.submit(_fetch(old[0], 2.0, ("http://p.example/b", "http://p.example/é") + old))
        ids = store.url_ids(["http://p.example/b", "http://p.example/é", *old], create=False)
    assert ids == [4, 5, 2, 3]
    assert _count(db_path) == 5


def test_resolve_list_refuses_a_repeated_new_url(db_path: Path) -> None:
    MetadataStore.open(db_path).close()
    conn = connect(db_path)
    try:
        resolver = UrlResolver(conn, url_hash, IdMap())
        conn.execute("BEGIN IMMEDIATE")
        assert resolver.resolve_list(["http://r.example/a"]).tolist() == [1]
        twice = ["http://r.example/a", "http://r.example/a"]
        assert resolver.resolve_list(twice).tolist() == [1, 1]  # known: the same id twice
        with pytest.raises(ValueError, match="distinct URLs"):
            resolver.resolve_list(["http://r.example/b", "http://r.example/b"])
        conn.execute("ROLLBACK")
    finally:
        conn.close()
