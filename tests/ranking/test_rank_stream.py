"""The rank job streams child lists from a real SQLite store into out-of-core slices
(DESIGN.md §5 "Scale") and gets the in-memory answer; the pieces on their own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from metadata import MetadataStore
from ranking.graph import LinkGraph
from ranking.importance import direct_importance
from ranking.outofcore import rank_out_of_core
from ranking.slices import ArrayCsrSource, SliceStore, spool_chunks
from ranking.sweep import SolverParams
from xyro.app import App
from xyro.config_load import load_config
from xyro.jobs.rank_job import RankParams, rank_graph, rank_stream
from xyro.jobs.rank_run import run_rank

TIGHT = SolverParams(tol=1e-12, max_iter=1000)


@pytest.fixture(scope="module")
def store_200k(tmp_path_factory: pytest.TempPathFactory, make_store) -> Path:
    path = tmp_path_factory.mktemp("store") / "xyro.db"
    make_store(path, n=20_000, m=200_000, seed=3)
    return path


def test_streamed_chunks_rebuild_the_exported_graph(store_200k: Path) -> None:
    with MetadataStore.open(store_200k) as store:
        graph = store.export_graph()
        assert store.graph_counts() == (graph.n, graph.m)
        with store.stream_graph(max_links=5000) as links:
            chunks = list(links.chunks)
            np.testing.assert_array_equal(links.xml_mask, graph.xml_mask)
            assert (links.n, links.m) == (graph.n, graph.m)
    assert len(chunks) > 10
    assert all(5000 <= len(c) < 5000 + 16 * 40 for _, _, c in chunks[:-1])  # ~max_links
    rows = np.concatenate([r for r, _, _ in chunks])
    degree = np.zeros(graph.n, dtype=np.int64)
    degree[rows] = np.concatenate([d for _, d, _ in chunks])
    np.testing.assert_array_equal(np.diff(graph.indptr), degree)
    np.testing.assert_array_equal(np.concatenate([c for _, _, c in chunks]), graph.indices)


def test_streamed_out_of_core_equals_in_memory(tmp_path: Path, store_200k: Path) -> None:
    with MetadataStore.open(store_200k) as store:
        graph = store.export_graph()
        memory = rank_graph(graph.indptr, graph.indices, graph.xml_mask,
                            RankParams(solver=TIGHT, memory_budget_bytes=1 << 30))
        streamed = rank_stream(store.stream_graph,
                               RankParams(solver=TIGHT, memory_budget_bytes=8 << 20,
                                          work_dir=tmp_path))
    assert not memory.out_of_core and streamed.out_of_core and streamed.slices > 2
    n = graph.n  # both are mean 1: compare the distributions (sum 1)
    assert np.abs(streamed.importance - memory.importance).sum() / n <= 1e-8
    assert np.abs(streamed.interest - memory.interest).sum() / n <= 1e-8
    assert list(tmp_path.iterdir()) == []  # the spool and the slices are gone


def _app(db: Path, budget_mb: int) -> App:
    return App(load_config(None, {}, [f"storage.database={db}",
                                      f"storage.warehouse_dir={db.parent / 'warehouse'}",
                                      f"ranking.memory_budget_mb={budget_mb}",
                                      "ranking.tolerance=1e-12"]))


def _stored_ranks(db: Path) -> tuple[np.ndarray, np.ndarray]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT importance, interest FROM urls ORDER BY id").fetchall()
    finally:
        conn.close()
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def test_xyro_rank_streams_over_budget_and_writes_what_memory_writes(tmp_path: Path,
                                                                    make_store) -> None:
    small, big = tmp_path / "a" / "xyro.db", tmp_path / "b" / "xyro.db"
    for db in (small, big):
        db.parent.mkdir()
        make_store(db, n=3000, m=30_000, seed=8)
    before = _heap_limit()
    streamed = run_rank(_app(small, 1), top=3)
    memory = run_rank(_app(big, 1024), top=3)
    assert _heap_limit() == before  # SQLite's process-wide limit is given back
    assert streamed.report.out_of_core and not memory.report.out_of_core
    with MetadataStore.open(small) as store:
        counts = store.graph_counts()
    assert (streamed.pages, streamed.links) == (memory.pages, memory.links) == counts
    assert counts[0] == 3000 and counts[1] > 25_000
    assert [u for u, _ in streamed.top_importance] == [u for u, _ in memory.top_importance]
    (imp_s, int_s), (imp_m, int_m) = _stored_ranks(small), _stored_ranks(big)
    assert abs(imp_s.mean() - 1) < 1e-9 and abs(int_s.mean() - 1) < 1e-9
    assert np.abs(imp_s - imp_m).sum() / 3000 <= 1e-8
    assert np.abs(int_s - int_m).sum() / 3000 <= 1e-8


def _heap_limit() -> int:
    conn = sqlite3.connect(":memory:")
    try:
        return int(conn.execute("PRAGMA soft_heap_limit").fetchone()[0])
    finally:
        conn.close()


def _chunks(graph: LinkGraph, rows_per_chunk: int) -> list:
    out = []
    for a in range(0, graph.n, rows_per_chunk):
        b = min(graph.n, a + rows_per_chunk)
        degree = np.diff(graph.indptr[a:b + 1])
        rows = np.arange(a, b)[degree > 0]
        out.append((rows, degree[degree > 0],
                    graph.indices[graph.indptr[a]:graph.indptr[b]]))
    return out


def test_spooled_chunks_slice_like_arrays(tmp_path: Path, make_graph) -> None:
    graph = make_graph(4, n=500, m=4000)
    spooled = spool_chunks(iter(_chunks(graph, 37)), graph.n, tmp_path)
    np.testing.assert_array_equal(np.fromfile(spooled.indptr_path, "<i8"), graph.indptr)
    a = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path, 40_000, 700)
    b = SliceStore.build(spooled, tmp_path, 40_000, 700)
    np.testing.assert_array_equal(a.bounds, b.bounds)
    for k in range(a.count):
        for x, y in zip(a.load(k), b.load(k)):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("chunks, message", [
    ([([2, 1], [1, 1], [0, 0])], "increase"),
    ([([1], [1], [0]), ([1], [1], [0])], "increase"),
    ([([0], [2], [0])], "degrees sum"),
    ([([0], [1], [10])], "outside"),
    ([([0], [1], [-1])], "outside"),
    ([([12], [1], [0])], "outside"),
    ([([0], [1], [0.5])], "integer"),
    ([([0, 1], [1], [0])], "1-D"),
])
def test_spool_rejects_bad_chunks(tmp_path: Path, chunks: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spool_chunks(iter(chunks), 10, tmp_path)


def test_out_of_core_without_xml_ranks_importance_only(tmp_path: Path, make_graph) -> None:
    graph = make_graph(5, n=800, m=6000)
    store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path, 60_000)
    both = rank_out_of_core(store, np.zeros(graph.n, dtype=bool), TIGHT)
    imp = direct_importance(graph, TIGHT)
    assert store.count > 1 and both.interest.iterations == 0
    assert not both.interest.values.any() and both.importance.iterations > 1
    assert np.abs(both.importance.values - imp.values).sum() <= 1e-10


def test_rank_graph_without_xml_keeps_to_the_budget(tmp_path: Path, make_graph) -> None:
    """No XML page (`xyro rank --edges` of a file without an xml array) is no reason to
    rank in memory over the budget: out of core, the same answer."""
    graph = make_graph(5, n=3000, m=30_000)
    no_xml = np.zeros(graph.n, dtype=bool)
    small = rank_graph(graph.indptr, graph.indices, no_xml,
                       RankParams(solver=TIGHT, memory_budget_bytes=200_000,
                                  work_dir=tmp_path))
    memory = rank_graph(graph.indptr, graph.indices, no_xml,
                        RankParams(solver=TIGHT, memory_budget_bytes=1 << 30))
    assert small.out_of_core and small.slices > 1 and not memory.out_of_core
    assert small.interest_iterations == memory.interest_iterations == 0
    np.testing.assert_array_equal(small.interest, memory.interest)
    assert np.abs(small.importance - memory.importance).sum() / graph.n <= 1e-10
    assert list(tmp_path.iterdir()) == []


def test_rank_store_sizes_the_write_back_by_the_streamed_snapshot(tmp_path: Path, monkeypatch,
                                                                 make_store) -> None:
    """A crawling daemon adds pages between the count and the snapshot: the ranks written
    are the snapshot's, every page of it."""
    db = tmp_path / "xyro.db"
    make_store(db, n=3000, m=30_000, seed=9)
    monkeypatch.setattr(MetadataStore, "graph_counts", lambda self: (2990, 100))
    summary = run_rank(_app(db, 1), top=0)
    assert summary.report.out_of_core and summary.pages == 3000
    importance, interest = _stored_ranks(db)
    assert not np.isnan(importance).any() and not np.isnan(interest).any()
