"""Cutting the slices holds what the memory budget allows (DESIGN.md §5 "Scale": a memory
budget picks S), in-links included.

``row_cuts`` charges a slice 4 bytes per in-link, and the sweeps hold that; turning the
slice's bucket of (destination, source) pairs into its in-link CSR used to load the whole
bucket and copy it (about 26 bytes per in-link), up to 6x the slice's room on a templated
site, where every page links to the same navigation pages and one slice holds most in-links.
The counting sort reads the bucket in pieces into one int32 array, and must give the same
CSR, sources in the same order within a row: the sweeps' float sums follow that order."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ranking.slices import USABLE_FRACTION, ArrayCsrSource, SliceStore, slice_room

NAV_LINKS = 40     # every page links to the same navigation pages ...
OTHER_LINKS = 10   # ... and to a few others


def _templated_site(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    nav = np.tile(np.arange(NAV_LINKS, dtype=np.int32), (n, 1))
    others = rng.integers(0, n, (n, OTHER_LINKS)).astype(np.int32)
    indices = np.concatenate([nav, others], axis=1).ravel()
    indptr = np.arange(0, (NAV_LINKS + OTHER_LINKS) * n + 1, NAV_LINKS + OTHER_LINKS,
                       dtype=np.int64)
    return indptr, indices


def test_cutting_a_templated_site_stays_within_the_budget(tmp_path: Path) -> None:
    n, budget = 20_000, 5_500_000   # 1M links, slices of about 4 MB
    indptr, indices = _templated_site(n)
    tracemalloc.start()
    try:
        store = SliceStore.build(ArrayCsrSource(indptr, indices), tmp_path, budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    in_links = [len(store.load(k)[1]) for k in range(store.count)]
    # the navigation pages' slice holds most in-links: what the old sort blew up (17 MB)
    assert store.count >= 3 and max(in_links) * 4 > slice_room(budget, n) * 3 // 4
    assert peak <= USABLE_FRACTION * budget, f"{peak / 2**20:.1f} MB traced"


def _expected_in_links(indptr: np.ndarray, indices: np.ndarray, a: int, b: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Pages [a, b)'s in-link CSR: each row's sources in source order (a source linking
    twice appears twice, in its out-link order), as scipy's COO-to-CSR of the links in
    source order gives it."""
    sources = np.repeat(np.arange(len(indptr) - 1, dtype=np.int32), np.diff(indptr))
    inside = (indices >= a) & (indices < b)
    dest, src = indices[inside], sources[inside]
    order = np.argsort(dest, kind="stable")
    ptr = np.zeros(b - a + 1, dtype=np.int64)
    np.cumsum(np.bincount(dest - a, minlength=b - a), out=ptr[1:])
    return ptr, src[order]


@pytest.mark.parametrize("seed", range(6))
def test_in_link_rows_keep_the_source_order(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(50, 3000)), int(rng.integers(0, 40_000))
    degree = rng.multinomial(m, rng.dirichlet(np.ones(n)))
    indptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int64)
    hub = rng.random(m) < 0.6   # most links into a few pages, repeated links, unsorted rows
    indices = np.where(hub, rng.integers(0, 20, m), rng.integers(0, n, m)).astype(np.int32)
    store = SliceStore.build(ArrayCsrSource(indptr, indices), tmp_path,
                             int(rng.integers(60_000, 400_000)),
                             chunk_links=int(rng.integers(50, 3000)))
    assert store.count > 1
    for k in range(store.count):
        ptr, idx, _, _ = store.load(k)
        want_ptr, want_idx = _expected_in_links(indptr, indices, int(store.bounds[k]),
                                                int(store.bounds[k + 1]))
        np.testing.assert_array_equal(ptr, want_ptr)
        np.testing.assert_array_equal(idx, want_idx)
    assert not list(store.directory.glob("bucket-*"))


def test_a_bucket_naming_pages_outside_its_slice_is_an_oserror(tmp_path: Path) -> None:
    """The C sort indexes without bounds checks: a damaged bucket must not reach it."""
    indptr, indices = _templated_site(400)
    store = SliceStore.build(ArrayCsrSource(indptr, indices), tmp_path, 200_000)
    rows = int(store.bounds[1])
    nnz = int(np.fromfile(store._path("in-ptr", 0), dtype="<i8")[-1])
    pairs = np.zeros((nnz, 2), dtype="<i4")
    pairs[-1, 0] = rows   # the first page of the next slice
    pairs.tofile(store._path("bucket", 0))
    with pytest.raises(OSError, match="slice 0 .* damaged.*outside"):
        store._sort_bucket(0, 1000)
    pairs[:-1].tofile(store._path("bucket", 0))   # one pair short
    with pytest.raises(OSError, match="slice 0 .* damaged.*bytes"):
        store._sort_bucket(0, 1000)
