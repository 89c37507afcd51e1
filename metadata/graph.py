"""Export of the link graph as CSR numpy arrays in URL-id order (input of ``ranking``).

Child lists are stored as int32 blobs (one row per page, see :mod:`metadata.schema`), so the
export is one ordered scan, one ``b"".join`` and one ``np.frombuffer``: no per-link Python.
Page types come from one more scan of ``urls`` (not one per type: each is a full scan),
returned by SQLite as two JSON arrays (ids, type codes) for ``json.loads``.

A graph too big to hold whole is read as a stream instead (:class:`LinkStream`, for the
out-of-core ranking of DESIGN.md §5 "Scale"): its size first, from :func:`graph_counts`
(the largest URL id and Σ ``links.n``: no child list is read), then, in one read
transaction, the XML ids and the child lists in id order, a chunk of about ``max_links``
links at a time, as plain arrays (rows, out-degrees, child rows). Only one chunk is in
memory at once; an out-degree is a blob's length / 4.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from metadata.records import TYPE_CODES, Graph, PageType
from metadata.schema import CHILD_DTYPE

_CODE = "CASE type " + " ".join(f"WHEN '{name}' THEN {code}"
                                for code, name in enumerate(TYPE_CODES) if code) + " ELSE 0 END"
_TYPES = (f"SELECT json_group_array(id), json_group_array({_CODE}) FROM urls "
          f"WHERE type <> '{TYPE_CODES[0]}'")


def export_graph(conn: sqlite3.Connection) -> Graph:
    """Read the whole graph in one read transaction (a consistent snapshot under WAL)."""
    conn.execute("BEGIN")
    try:
        n = conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0]
        rows = conn.execute("SELECT src, children FROM links ORDER BY src").fetchall()
        ids, codes = conn.execute(_TYPES).fetchone()
    finally:
        conn.execute("COMMIT")
    types = np.zeros(n, dtype=np.int8)  # 0 = unread
    types[np.array(json.loads(ids), dtype=np.int64) - 1] = json.loads(codes)
    degree = np.zeros(n, dtype=np.int64)
    if rows:
        srcs, blobs = zip(*rows)
        src = np.fromiter(srcs, dtype=np.int64, count=len(srcs))
        degree[src - 1] = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // 4
        indices = np.frombuffer(b"".join(blobs), dtype=CHILD_DTYPE).astype(np.int32) - 1
    else:
        indices = np.zeros(0, dtype=np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    return Graph(indptr=indptr, indices=indices, n=int(n),
                 ids=np.arange(1, n + 1, dtype=np.int64),
                 xml_mask=types == TYPE_CODES.index("xml"), types=types)


FETCH_ROWS = 4096  # rows per fetchmany while streaming child lists
_XML = f"SELECT id FROM urls WHERE type = '{PageType.XML.value}'"

LinkChunk = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(rows int64[k]: URL id − 1, increasing; out-degrees int64[k]; children int32: URL id − 1
of each child, the k pages' child lists one after the other, each in page order)."""


def graph_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """(pages, links): the largest URL id (ids are dense 1..n) and the total of the stored
    child counts. Reads ``links.n`` only, never a child list."""
    n = conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0]
    m = conn.execute("SELECT coalesce(sum(n), 0) FROM links").fetchone()[0]
    return int(n), int(m)


def xml_mask(conn: sqlite3.Connection, n: int) -> np.ndarray:
    """bool[n]: True for the XML documents (row k = URL id k + 1), read in pieces."""
    mask = np.zeros(n, dtype=bool)
    cursor = conn.execute(_XML)
    while rows := cursor.fetchmany(1 << 16):
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        mask[ids[ids <= n] - 1] = True
    return mask


def link_chunks(conn: sqlite3.Connection, max_links: int) -> Iterator[LinkChunk]:
    """Every page's child list in URL-id order, about ``max_links`` links per chunk (a page
    with more links than that makes a chunk of its own). Pages without a stored list are
    not in any chunk (out-degree 0)."""
    cursor = conn.execute("SELECT src, children FROM links ORDER BY src")
    srcs: list[int] = []
    blobs: list[bytes] = []
    size, fetch = 0, 16
    try:
        while True:
            rows = cursor.fetchmany(fetch)
            if rows:
                src, blob = zip(*rows)
                srcs.extend(src)
                blobs.extend(blob)
                got = sum(map(len, blob))
                size += got
                # half the rows left to fill the chunk, at the bytes per row just seen: the
                # chunk closes within a few fetches and overshoots by at most 16 rows
                fetch = (4 * max_links - size) * len(rows) // max(2 * got, 1)
                fetch = min(FETCH_ROWS, max(16, fetch))
            if srcs and (not rows or size >= 4 * max_links):
                yield _chunk(srcs, blobs)
                srcs, blobs, size = [], [], 0
            if not rows:
                return
    finally:
        cursor.close()


def _chunk(srcs: list[int], blobs: list[bytes]) -> LinkChunk:
    rows = np.fromiter(srcs, dtype=np.int64, count=len(srcs)) - 1
    degrees = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // 4
    children = np.frombuffer(b"".join(blobs), dtype=CHILD_DTYPE).astype(np.int32)
    children -= 1
    return rows, degrees, children


@dataclass(frozen=True)
class LinkStream:
    """The graph of one read snapshot, for a reader that cannot hold it whole.

    ``n``, ``m``: pages and links (:func:`graph_counts`); ``xml_mask``: bool[n];
    ``chunks``: a one-shot iterator of :data:`LinkChunk` (valid inside :func:`stream_graph`
    only: the snapshot ends with it)."""

    n: int
    m: int
    xml_mask: np.ndarray
    chunks: Iterator[LinkChunk]


@contextmanager
def stream_graph(conn: sqlite3.Connection, max_links: int) -> Iterator[LinkStream]:
    """Counts, XML mask and child lists from one read transaction (a consistent snapshot
    under WAL, as :func:`export_graph`); the transaction ends when the block does."""
    conn.execute("BEGIN")
    chunks = None
    try:
        n, m = graph_counts(conn)
        chunks = link_chunks(conn, max_links)
        yield LinkStream(n, m, xml_mask(conn, n), chunks)
    finally:
        if chunks is not None:
            chunks.close()
        conn.execute("COMMIT")
