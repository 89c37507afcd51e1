"""The OPIC checkpoint's URL ids (metadata.checkpoint_ids): each URL looked up once per
writer session, an extended list resolves only its new and still-unstored URLs, and the
per-URL OPIC columns come out right over successive checkpoints."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from metadata import Enqueue, MetadataStore, SaveOpic
from metadata.checkpoint_ids import CheckpointIds
from metadata.connection import connect
from metadata.idmap import IdMap
from metadata.resolver import UrlResolver
from metadata.urlkeys import url_hash

A, B, C, D = (f"http://c.example/{k}" for k in "abcd")


class RecordingResolver(UrlResolver):
    """The real resolver, recording which URLs each look-up asked for."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.asked: list[list[str]] = []

    def lookup(self, urls: Iterable[str]) -> dict[str, int]:
        urls = list(urls)
        self.asked.append(urls)
        return super().lookup(urls)


def test_an_extended_list_looks_up_only_new_and_unstored_urls(db_path: Path) -> None:
    with MetadataStore.open(db_path) as store:
        id_a, id_b = store.url_ids([A, B])
    conn = connect(db_path)
    try:
        resolver = RecordingResolver(conn, url_hash, IdMap())
        ids = CheckpointIds(resolver)
        assert ids.ids((A, C)).tolist() == [id_a, -1]
        conn.execute("INSERT INTO urls (id, hash, host_id, depth, url) "
                     "SELECT max(id) + 1, ?, 1, 0, ? FROM urls", (url_hash(C), C))
        id_c = id_b + 1
        assert ids.ids((A, C, B)).tolist() == [id_a, id_c, id_b]
        assert resolver.asked == [[A, C], [C, B]]
        assert ids.ids((A, C, B)).tolist() == [id_a, id_c, id_b]
        assert resolver.asked[2:] == []  # nothing new: no look-up at all
        assert ids.ids((B, A)).tolist() == [id_b, id_a]  # not an extension: all again
        ids.forget()
        assert ids.ids((B, A)).tolist() == [id_b, id_a]
        assert resolver.asked[2:] == [[B, A], [B, A]]
    finally:
        conn.close()


def _save(urls: tuple[str, ...], cash: list[float]) -> SaveOpic:
    values = np.array(cash)
    return SaveOpic(1.0, 0.5, b"npz", urls, cash=values, history=values * 2,
                    estimate=values / values.sum())


def test_successive_checkpoints_fill_the_opic_columns(store: MetadataStore) -> None:
    store.url_ids([A, B])
    with store.writer() as w:
        w.submit(_save((A, B, C), [0.1, 0.2, 0.3]))
        w.flush()
        w.submit(Enqueue(C, 3, 0))
        w.submit(_save((A, B, C, D), [0.4, 0.5, 0.6, 0.7]))
        w.flush()
        w.submit(_save((D, A), [0.8, 0.9]))  # a new OPIC state: a list of its own
    conn = store.read_connection()
    try:
        rows = dict(conn.execute("SELECT url, opic_cash FROM urls").fetchall())
    finally:
        conn.close()
    assert rows == {A: 0.9, B: 0.5, C: 0.6}
