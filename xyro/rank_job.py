"""Glue between the ranking package and its callers (`xyro rank`): load, choose in-memory or
out-of-core from the memory budget, run both rankings, rescale to mean 1 (DESIGN.md §5)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ranking.graph import LinkGraph
from ranking.importance import direct_importance
from ranking.interest import inverse_interest
from ranking.outofcore import rank_out_of_core
from ranking.results import ProgressFn
from ranking.slices import ArrayCsrSource, SliceStore
from ranking.sweep import SolverParams

IN_MEMORY_BYTES_PER_LINK = 24  # out- and in-link CSR, self-link split, transpose temporaries
IN_MEMORY_BYTES_PER_PAGE = 120


@dataclass(frozen=True)
class RankParams:
    solver: SolverParams = field(default_factory=SolverParams)
    dangling: str = "paper"
    interest_from_importance: bool = False   # E″ instead of E′
    memory_budget_bytes: int = 2 << 30
    work_dir: Path | None = None             # slices go here when out of core


@dataclass(frozen=True)
class RankReport:
    """importance: N·PR (mean 1); interest: mean 1 (all ones when there is no XML page)."""

    importance: np.ndarray
    interest: np.ndarray
    importance_iterations: int
    interest_iterations: int
    importance_residuals: tuple[float, ...]
    interest_residuals: tuple[float, ...]
    seconds: float
    out_of_core: bool
    slices: int


def in_memory_bytes(n: int, m: int) -> int:
    return IN_MEMORY_BYTES_PER_LINK * m + IN_MEMORY_BYTES_PER_PAGE * n


def _mean_one(values: np.ndarray) -> np.ndarray:
    total = float(values.sum())
    return values * (len(values) / total) if total > 0 else np.ones_like(values)


def rank_graph(indptr: np.ndarray, indices: np.ndarray, xml_mask: np.ndarray,
               params: RankParams = RankParams(),
               progress: ProgressFn | None = None) -> RankReport:
    """Rank an out-link CSR (``indptr`` int64[n+1], ``indices`` int32[m], url-id order)."""
    graph = LinkGraph.from_csr(indptr, indices)
    mask = np.asarray(xml_mask, dtype=bool)
    if mask.shape != (graph.n,):
        raise ValueError(f"xml_mask has shape {mask.shape}, expected ({graph.n},)")
    has_xml = bool(mask.any())
    if in_memory_bytes(graph.n, graph.m) <= params.memory_budget_bytes or not has_xml:
        imp = direct_importance(graph, params.solver, dangling=params.dangling,
                                progress=progress)
        if has_xml:
            inter = inverse_interest(graph, mask, params.solver, progress=progress,
                                     importance=imp.values if params.interest_from_importance
                                     else None)
            inter_values, inter_it, inter_res = inter.values, inter.iterations, inter.residuals
            seconds = imp.seconds + inter.seconds
        else:
            inter_values, inter_it, inter_res = np.zeros(graph.n), 0, ()
            seconds = imp.seconds
        return RankReport(_mean_one(imp.values), _mean_one(inter_values), imp.iterations,
                          inter_it, imp.residuals, inter_res, seconds, False, 1)
    with tempfile.TemporaryDirectory(dir=params.work_dir) as work:
        store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), Path(work),
                                 params.memory_budget_bytes)
        both = rank_out_of_core(store, mask, params.solver, dangling=params.dangling,
                                interest_from_importance=params.interest_from_importance,
                                progress=progress)
    return RankReport(_mean_one(both.importance.values), _mean_one(both.interest.values),
                      both.importance.iterations, both.interest.iterations,
                      both.importance.residuals, both.interest.residuals,
                      both.importance.seconds, True, both.slices)


def rank_edges_file(path: Path | str, params: RankParams = RankParams(),
                    progress: ProgressFn | None = None) -> RankReport:
    """Rank a bare edge list .npz with ``n``, ``src``, ``dst`` (and optional ``xml`` mask)."""
    with np.load(path) as data:
        missing = {"n", "src", "dst"} - set(data.files)
        if missing:
            raise ValueError(f"{path}: missing arrays {sorted(missing)}; need n, src, dst")
        n = int(data["n"])
        graph = LinkGraph.from_edges(data["src"], data["dst"], n)
        mask = data["xml"].astype(bool) if "xml" in data.files else np.zeros(n, dtype=bool)
    return rank_graph(graph.indptr, graph.indices, mask, params, progress)
