"""The batch applier against a plain reference model, on random batches (hypothesis).

Children, enqueued URLs and fetched pages overlap within and across batches, child lists
repeat URLs and link to their own page, and the hash function may collide (so look-ups go
through the text comparison): the stored URL ids, child lists and frontier must be what
applying the records one by one says.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import FetchRecord, MetadataStore, PageType
from metadata.apply import BatchApplier
from metadata.connection import connect
from metadata.idmap import IdMap
from metadata.resolver import UrlResolver
from metadata.urlkeys import url_hash

UNIVERSE = [f"http://m{i % 3}.example/p{i}" for i in range(12)] + ["http://m0.example/é\"\\"]
HASHES = {"md5": url_hash, "two buckets": lambda url: len(url) % 2}

_url = st.sampled_from(UNIVERSE)
_record = st.tuples(_url, st.lists(_url, max_size=6),
                    st.lists(st.tuples(_url, st.integers(0, 4)), max_size=3))
_batches = st.lists(st.lists(_record, min_size=1, max_size=5), min_size=1, max_size=5)


def _apply(path: Path, hash_name: str, batches: list[list[FetchRecord]]) -> None:
    conn = connect(path)
    try:
        applier = BatchApplier(conn, UrlResolver(conn, HASHES[hash_name], IdMap()), 3, None)
        for batch in batches:
            conn.execute("BEGIN IMMEDIATE")
            applier.apply(batch)
            conn.execute("COMMIT")
    finally:
        conn.close()


def _reference(batches: list[list[FetchRecord]]) -> tuple[set[str], dict, dict]:
    """URLs named, last child list of each fetched page, frontier priorities."""
    named: set[str] = set()
    children: dict[str, tuple[str, ...]] = {}
    frontier: dict[str, int] = {}
    for rec in (r for batch in batches for r in batch):
        named.update((rec.url, *rec.children, *(u for u, _ in rec.enqueue)))
        children[rec.url] = rec.children
        frontier.pop(rec.url, None)
        for url, priority in rec.enqueue:
            frontier[url] = min(frontier.get(url, priority), priority)
    return named, children, frontier


@settings(max_examples=60, deadline=None)
@given(batches=_batches, hash_name=st.sampled_from(sorted(HASHES)))
def test_batches_match_the_reference_model(batches: list, hash_name: str) -> None:
    records = [[FetchRecord(url, float(t), PageType.HTML, 200, b"%16d" % t,
                            children=tuple(kids), enqueue=tuple(enq))
                for url, kids, enq in batch]
               for t, batch in enumerate(batches, 1)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.db"
        MetadataStore.open(path).close()
        _apply(path, hash_name, records)
        conn = sqlite3.connect(path)
        try:
            id_of = dict(conn.execute("SELECT url, id FROM urls"))
            links = {src: blob for src, blob in conn.execute("SELECT src, children FROM links")}
            queued = dict(conn.execute(
                "SELECT url, priority FROM frontier JOIN urls ON urls.id = url_id"))
        finally:
            conn.close()
    named, children, frontier = _reference(records)
    assert set(id_of) == named
    assert sorted(id_of.values()) == list(range(1, len(named) + 1))
    for url, kids in children.items():
        want = b"".join(id_of[k].to_bytes(4, "little", signed=True) for k in kids)
        assert links[id_of[url]] == want, url
    assert queued == frontier
