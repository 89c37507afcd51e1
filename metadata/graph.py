"""Export of the link graph as CSR numpy arrays in URL-id order (input of ``ranking``).

Child lists are stored as int32 blobs (one row per page, see :mod:`metadata.schema`), so the
export is one ordered scan, one ``b"".join`` and one ``np.frombuffer``: no per-link Python.
Page types come from one more scan of ``urls`` (not one per type: each is a full scan),
returned by SQLite as two JSON arrays (ids, type codes) for ``json.loads``.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from metadata.records import TYPE_CODES, Graph
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
