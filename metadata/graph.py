"""Export of the link graph as CSR numpy arrays in URL-id order (input of ``ranking``).

Child lists are stored as int32 blobs (one row per page, see :mod:`metadata.schema`), so the
export is one ordered scan, one ``b"".join`` and one ``np.frombuffer``: no per-link Python.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from metadata.records import TYPE_CODES, Graph


def export_graph(conn: sqlite3.Connection) -> Graph:
    """Read the whole graph in one read transaction (a consistent snapshot under WAL)."""
    conn.execute("BEGIN")
    try:
        n = conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0]
        rows = conn.execute("SELECT src, children FROM links ORDER BY src").fetchall()
        types = np.zeros(n, dtype=np.int8)  # 0 = unread
        for code, name in enumerate(TYPE_CODES):
            if code == 0:
                continue
            ids = conn.execute("SELECT id FROM urls WHERE type = ?", (name,)).fetchall()
            if ids:
                types[np.array(ids, dtype=np.int64).ravel() - 1] = code
    finally:
        conn.execute("COMMIT")
    degree = np.zeros(n, dtype=np.int64)
    if rows:
        srcs, blobs = zip(*rows)
        src = np.fromiter(srcs, dtype=np.int64, count=len(srcs))
        degree[src - 1] = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // 4
        indices = np.frombuffer(b"".join(blobs), dtype="<i4").astype(np.int32) - 1
    else:
        indices = np.zeros(0, dtype=np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    return Graph(indptr=indptr, indices=indices, n=int(n),
                 ids=np.arange(1, n + 1, dtype=np.int64),
                 xml_mask=types == TYPE_CODES.index("xml"), types=types)
