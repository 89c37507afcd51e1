"""Block Jacobi across blocks of slices, Gauss-Seidel inside each (``ranking.blocks``), run
in this process: the numerics a cluster runs, without the cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ranking.blocks import (BlockRange, BlockSweep, block_parts, prepare_job, rank_blocks,
                            start_block, sweep_block)
from ranking.importance import direct_importance, personalization_vector
from ranking.outofcore import rank_out_of_core
from ranking.results import ConvergenceError
from ranking.slices import ArrayCsrSource, SliceStore
from ranking.sweep import SolverParams

TIGHT = SolverParams(tol=1e-12, max_iter=1000)


def l1_normalized(a: np.ndarray, b: np.ndarray) -> float:
    """L1 distance of the two vectors scaled to sum 1 (the interest is not normalized)."""
    return float(np.abs(a / a.sum() - b / b.sum()).sum())


@pytest.fixture
def store(tmp_path: Path, make_graph) -> SliceStore:
    graph = make_graph(2, n=3000, m=30000)
    return SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path, 200_000,
                            chunk_links=5000)


def test_one_block_is_the_one_host_sweep(store: SliceStore) -> None:
    xml = np.random.default_rng(2).random(store.n) < 0.1
    one = rank_out_of_core(store, xml, TIGHT)
    block = rank_blocks(store, xml, TIGHT, blocks=1).result
    assert block.importance.iterations == one.importance.iterations
    np.testing.assert_allclose(block.importance.residuals, one.importance.residuals,
                               rtol=1e-9, atol=1e-14)
    assert np.abs(block.importance.values - one.importance.values).sum() <= 1e-12
    assert np.abs(block.interest.values - one.interest.values).sum() <= 1e-12


@pytest.mark.parametrize("dangling, from_importance, personalized, with_xml", [
    ("paper", False, False, True), ("teleport", True, False, True),
    ("paper", False, True, True), ("teleport", False, False, False)])
def test_blocks_reach_the_one_host_fixpoint(store: SliceStore, dangling: str,
                                            from_importance: bool, personalized: bool,
                                            with_xml: bool) -> None:
    xml = np.random.default_rng(2).random(store.n) < (0.1 if with_xml else 0.0)
    e = np.random.default_rng(4).random(store.n) + 0.2 if personalized else None
    kwargs = dict(dangling=dangling, interest_from_importance=from_importance,
                  personalization=e)
    one = rank_out_of_core(store, xml, TIGHT, **kwargs)
    seen: list = []
    got = rank_blocks(store, xml, TIGHT, blocks=3, progress=seen.append, **kwargs)
    assert len(got.blocks) == 3 and got.result.slices == store.count
    both = got.result
    assert np.abs(both.importance.values - one.importance.values).sum() <= 1e-9
    assert abs(both.importance.values.sum() - 1.0) < 1e-12
    if with_xml:
        assert l1_normalized(both.interest.values, one.interest.values) <= 1e-9
        assert both.interest.residual < TIGHT.tol
    else:
        assert both.interest.iterations == 0 and not both.interest.values.any()
    # the one-host stopping rule: both residuals under tol, reported per sweep
    last = [r.residuals[-1] for r in (both.importance, both.interest) if r.residuals]
    before = [r.residuals[-2] for r in (both.importance, both.interest) if r.residuals]
    assert max(last) < TIGHT.tol <= max(before)
    assert len(seen) == both.importance.iterations * (2 if with_xml else 1)
    assert len(got.sweep_seconds) == both.importance.iterations
    assert min(got.bytes_read) >= 8 * store.n and min(got.bytes_written) >= 16 * store.n


def test_block_parts_cover_the_slices_in_balanced_runs(store: SliceStore) -> None:
    for blocks in (1, 2, 3, store.count, store.count + 5):
        parts = block_parts(store, blocks)
        assert len(parts) == min(blocks, store.count)
        assert parts[0][0] == 0 and parts[-1][1] == store.count
        assert all(a < b for a, b in parts)
        assert all(b == c for (_, b), (c, _) in zip(parts[:-1], parts[1:]))
    links = [sum(store.link_count(k) for k in range(a, b)) for a, b in block_parts(store, 2)]
    assert max(links) < 0.75 * sum(links)


def test_a_block_task_run_twice_writes_the_same_values(store: SliceStore) -> None:
    """A task whose worker died is run again: it reads only parity s − 1 and rewrites its
    pages of parity s, whatever the first run had left there."""
    xml = np.random.default_rng(2).random(store.n) < 0.1
    job = prepare_job(store, xml, personalization_vector(store.n, None), 0.85, "paper", False)
    parts = block_parts(store, 2)
    starts = [start_block(BlockRange(job, a, b)) for a, b in parts]
    first, stop = parts[1]
    task = BlockSweep(job, 1, first, stop, 1.0, sum(s.dangling_mass for s in starts), 1.0,
                      sum(s.xml_mass for s in starts))
    pages = slice(8 * int(store.bounds[first]), 8 * int(store.bounds[stop]))
    files = [job.path(name, 1) for name in ("importance", "scaled", "interest")]
    a = sweep_block(task)
    written = [path.read_bytes()[pages] for path in files]
    for path in files:  # what a run killed half-way may leave: anything
        path.write_bytes(np.full(store.n, 7.0).tobytes())
    b = sweep_block(task)
    assert a.importance_diff > 0 and (a.importance_diff, a.interest_total, a.dangling_mass) \
        == (b.importance_diff, b.interest_total, b.dangling_mass)
    assert [path.read_bytes()[pages] for path in files] == written


def test_blocks_raise_like_one_host(store: SliceStore) -> None:
    xml = np.zeros(store.n, dtype=bool)
    with pytest.raises(ConvergenceError, match="importance"):
        rank_blocks(store, xml, SolverParams(tol=1e-12, max_iter=3), blocks=2)
    with pytest.raises(ValueError, match="dangling"):
        rank_blocks(store, xml, TIGHT, dangling="ignore")
    with pytest.raises(ValueError, match="xml_mask"):
        rank_blocks(store, xml[:-1], TIGHT)


@pytest.mark.parametrize("seed, dangling", [(0, 0.5), (1, 0.8)])
@pytest.mark.parametrize("blocks", [1, 2])
def test_paper_variant_with_self_link_sinks_converges(tmp_path: Path, make_sink_graph,
                                                      seed: int, dangling: float,
                                                      blocks: int) -> None:
    # Pages linking only to themselves beside much mass without out-links: Gauss-Seidel's
    # sweeps oscillated or crawled (ConvergenceError); the blocks now hand over to Jacobi,
    # from E again, as the one-host and in-memory solvers do (ranking.sweep.Stall).
    graph = make_sink_graph(seed, n=2000, dangling=dangling, self_only=0.01)
    ref = direct_importance(graph, SolverParams(tol=1e-13, max_iter=5000, gauss_seidel=False))
    store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path, 100_000,
                             chunk_links=2000)
    assert store.count > 3
    xml = np.random.default_rng(seed).random(graph.n) < 0.1
    got = rank_blocks(store, xml, SolverParams(tol=1e-10, max_iter=500), blocks=blocks)
    both = got.result
    assert len(got.blocks) == blocks
    assert both.importance.method == both.interest.method == "out-of-core, then jacobi"
    assert both.importance.iterations == len(got.sweep_seconds) < 500
    assert np.abs(both.importance.values - ref.values).sum() < 1e-7
    assert both.interest.residual < 1e-10


def test_jacobi_block_tasks_do_not_see_this_sweep(store: SliceStore) -> None:
    """In Jacobi mode a task reads only the sweep-start vector and δ: however the slices
    are grouped into blocks, the importance and the pre-scaled vector written are the
    same, bit for bit (under Gauss-Seidel they are not)."""
    xml = np.random.default_rng(2).random(store.n) < 0.1
    job = prepare_job(store, xml, personalization_vector(store.n, None), 0.85, "paper", False)
    written = []
    for jacobi in (True, False):
        for blocks in (1, 3):
            parts = block_parts(store, blocks)
            starts = [start_block(BlockRange(job, a, b)) for a, b in parts]
            delta = sum(s.dangling_mass for s in starts)
            xml_mass = sum(s.xml_mass for s in starts)
            for a, b in parts:
                sweep_block(BlockSweep(job, 1, a, b, 1.0, delta, 1.0, xml_mass, jacobi))
            written.append([job.path(name, 1).read_bytes() for name in ("importance",
                                                                          "scaled")])
    assert written[0] == written[1] and written[2] != written[3]
