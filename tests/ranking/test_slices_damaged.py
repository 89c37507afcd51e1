"""A slice file damaged between the cut and the sweeps (003 §5.3, DESIGN.md §5 "Scale"): the
compiled sweeps index without bounds checks, so ``SliceStore.load`` checks each slice is a
CSR of its rows over the n pages, and says which file is wrong, instead of the process
reading out of bounds (a segfault) or ranking with the wrong links."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from ranking.blocks import Scratch
from ranking.graph import LinkGraph
from ranking.outofcore import rank_out_of_core
from ranking.slices import ArrayCsrSource, SliceStore, budget_for_slices
from ranking.sweep import SolverParams

PARTS = ("in-ptr", "in-idx", "out-ptr", "out-idx")


def _store(tmp_path: Path, n: int = 4000, m: int = 40_000) -> SliceStore:
    rng = np.random.default_rng(3)
    graph = LinkGraph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n)
    store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path,
                             budget_for_slices(n, m, 4))
    assert store.count >= 3
    return store


def _rewrite(path: Path, change) -> None:  # noqa: ANN001
    dtype = "<i8" if path.name.split("-")[1] == "ptr" else "<i4"
    values = np.fromfile(path, dtype=dtype)
    change(values).astype(dtype).tofile(path)


@pytest.mark.parametrize("part", PARTS)
def test_a_truncated_slice_file_is_an_oserror_naming_it(tmp_path: Path, part: str) -> None:
    store = _store(tmp_path)
    path = store._path(part, 1)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    for into in (None, Scratch().slice_part):
        with pytest.raises(OSError, match="slice 1 .* damaged") as caught:
            store.load(1, into)
        assert path.name in str(caught.value) and "rank again" in str(caught.value)
    store.load(0)   # the other slices are intact
    store.load(2)


@pytest.mark.parametrize("side", ["in", "out"])
def test_pages_outside_the_graph_are_refused(tmp_path: Path, side: str) -> None:
    store = _store(tmp_path)
    idx = store._path(f"{side}-idx", 0)

    def outside(v: np.ndarray) -> np.ndarray:
        v[len(v) // 2] = store.n
        return v
    _rewrite(idx, outside)
    with pytest.raises(OSError, match=f"{idx.name} names pages outside"):
        store.load(0)

    def negative(v: np.ndarray) -> np.ndarray:
        v[0] = -5
        return v
    store2 = _store(tmp_path)
    _rewrite(store2._path(f"{side}-idx", 2), negative)
    with pytest.raises(OSError, match="names pages outside"):
        store2.load(2)


def test_row_pointers_that_fall_or_start_off_zero_are_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ptr = store._path("out-ptr", 1)

    def swap(v: np.ndarray) -> np.ndarray:
        k = int(np.argmax(np.diff(v) > 0))
        v[k + 1], v[k] = v[k], v[k + 1]
        return v
    _rewrite(ptr, swap)
    with pytest.raises(OSError, match="do not rise from 0"):
        store.load(1)
    _rewrite(store._path("in-ptr", 2), lambda v: v + 1)
    with pytest.raises(OSError, match="do not rise from 0"):
        store.load(2)


def test_the_ranking_stops_on_a_damaged_slice_and_not_on_intact_ones(tmp_path: Path) -> None:
    store = _store(tmp_path)
    mask = np.zeros(store.n, bool)
    mask[::7] = True
    params = SolverParams(tol=1e-10)
    intact = rank_out_of_core(store, mask, params)
    assert abs(intact.importance.values.sum() - 1.0) < 1e-9
    path = store._path("in-idx", 1)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(OSError, match=path.name):
        rank_out_of_core(store, mask, params)


def test_the_check_costs_a_small_part_of_reading_a_slice(tmp_path: Path) -> None:
    """O(links), vectorised: well under the cost of the file reads it follows."""
    store = _store(tmp_path, n=200_000, m=2_000_000)
    parts = store.load(0)
    rows = int(store.bounds[1] - store.bounds[0])
    start = time.process_time()
    for _ in range(20):
        store._check_csr(0, "in", parts[0], parts[1], rows)
        store._check_csr(0, "out", parts[2], parts[3], rows)
    per_load = (time.process_time() - start) / 20
    links = len(parts[1]) + len(parts[3])
    assert per_load < 5e-9 * links + 2e-3, (per_load, links)
