"""The link graph as a compressed sparse row (CSR) pattern of out-links (003 §5.3).

Row j lists Out(j): ``indices[indptr[j]:indptr[j+1]]``. There is no weight array: the
paper's M[i, j] = 1/OutDeg(j) is applied by pre-scaling the vector, so the matrix is a pure
0/1 pattern and a link costs one int32 (4 bytes) to store and stream. Parallel links count
once each (a page linking twice to the same page gives it two shares), as in the paper's
list-of-successors representation; self-links are ordinary links.

Transposition and edge-list conversion use scipy's compiled ``_sparsetools`` kernels
(linear time, no Python loop over links) on a 1-byte dummy value array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import _sparsetools as sparsetools

INT32_MAX = np.iinfo(np.int32).max


def _as_index_array(values: object, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}; pass node ids")
    return array


def _check_ids(ids: np.ndarray, n: int, name: str) -> None:
    if ids.size == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        raise ValueError(f"{name} holds a negative node id ({low}); ids must be in [0, {n})")
    if high >= n:
        raise ValueError(f"{name} holds node id {high} but the graph has n={n} nodes; "
                         f"ids must be in [0, {n})")


@dataclass(frozen=True)
class LinkGraph:
    """Out-link CSR of n pages: ``indptr`` int64[n+1], ``indices`` int32[m] (destinations)."""

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    @property
    def m(self) -> int:
        return len(self.indices)

    @classmethod
    def from_csr(cls, indptr: object, indices: object) -> LinkGraph:
        """Validate a CSR of out-links (row j = Out(j)); raises ValueError on bad input."""
        ptr = _as_index_array(indptr, "indptr")
        idx = _as_index_array(indices, "indices")
        if len(ptr) < 2:
            raise ValueError(f"indptr has length {len(ptr)}: the graph has n=0 pages, "
                             "nothing to rank (indptr must have length n+1 with n >= 1)")
        n = len(ptr) - 1
        if int(ptr[0]) != 0:
            raise ValueError(f"indptr[0] is {int(ptr[0])}, must be 0")
        if int(ptr[-1]) != len(idx):
            raise ValueError(f"indptr[-1]={int(ptr[-1])} but indices has length {len(idx)}: "
                             "lengths mismatch")
        if n > 1 and bool(np.any(ptr[1:] < ptr[:-1])):
            raise ValueError("indptr decreases somewhere: it must be non-decreasing")
        if n > INT32_MAX:
            raise ValueError(f"n={n} pages exceeds int32 node ids")
        _check_ids(idx, n, "indices")
        return cls(np.ascontiguousarray(ptr, dtype=np.int64),
                   np.ascontiguousarray(idx, dtype=np.int32))

    @classmethod
    def from_edges(cls, src: object, dst: object, n: int) -> LinkGraph:
        """Build the out-link CSR from an edge list (link src[k] -> dst[k]) of n pages."""
        s = _as_index_array(src, "src")
        d = _as_index_array(dst, "dst")
        if len(s) != len(d):
            raise ValueError(f"src has {len(s)} entries but dst has {len(d)}: lengths mismatch")
        if int(n) < 1:
            raise ValueError(f"n={n}: the graph has no pages, nothing to rank")
        n = int(n)
        _check_ids(s, n, "src")
        _check_ids(d, n, "dst")
        index_type = np.int32 if max(len(s), n) < INT32_MAX else np.int64
        indptr = np.empty(n + 1, dtype=index_type)
        indices = np.empty(len(s), dtype=index_type)
        dummy = np.empty(len(s), dtype=np.int8)
        sparsetools.coo_tocsr(n, n, len(s), s.astype(index_type, copy=False),
                              d.astype(index_type, copy=False), np.zeros(len(s), np.int8),
                              indptr, indices, dummy)
        return cls.from_csr(indptr.astype(np.int64), indices)

    def out_degree(self) -> np.ndarray:
        """OutDeg(j) for every page, int64[n]."""
        return np.diff(self.indptr)

    def inverse_out_degree(self) -> np.ndarray:
        """1/OutDeg(j), and 0 for pages without out-links (float64[n])."""
        degree = self.out_degree().astype(np.float64)
        return np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)

    def transpose(self) -> LinkGraph:
        """The in-link CSR: row i lists the pages j with j -> i (built once, linear time)."""
        n, m = self.n, self.m
        index_type = np.int32 if m < INT32_MAX else np.int64
        out_ptr = np.empty(n + 1, dtype=index_type)
        out_idx = np.empty(m, dtype=index_type)
        sparsetools.csr_tocsc(n, n, self.indptr.astype(index_type, copy=False),
                              self.indices.astype(index_type, copy=False),
                              np.zeros(m, np.int8), out_ptr, out_idx, np.empty(m, np.int8))
        return LinkGraph(out_ptr.astype(np.int64), out_idx.astype(np.int32, copy=False))
