"""The ranking job over the metadata store (``xyro rank`` and the daemon's schedule).

Exports the link graph, runs direct importance and inverse interest (:mod:`xyro.rank_job`,
in memory or out of core by the configured budget), writes both back with mean 1, and
records the run. ``--edges`` ranks a bare edge list instead (no database involved).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metadata import JobRun, MetadataStore, SetRanks
from ranking.results import ProgressFn
from ranking.sweep import SolverParams
from xyro.app import App
from xyro.config import RankingConfig
from xyro.errors import XyroError
from xyro.rank_job import RankParams, RankReport, rank_edges_file, rank_graph


@dataclass(frozen=True, slots=True)
class RankSummary:
    """What one ranking run did, for the CLI and the job log."""

    pages: int
    links: int
    report: RankReport
    top_importance: tuple[tuple[str, float], ...]
    top_interest: tuple[tuple[str, float], ...]

    def as_dict(self) -> dict[str, Any]:
        r = self.report
        return {
            "pages": self.pages, "links": self.links, "seconds": round(r.seconds, 3),
            "out_of_core": r.out_of_core, "slices": r.slices,
            "importance_iterations": r.importance_iterations,
            "importance_residual": r.importance_residuals[-1] if r.importance_residuals else None,
            "interest_iterations": r.interest_iterations,
            "interest_residual": r.interest_residuals[-1] if r.interest_residuals else None,
            "top_importance": dict(self.top_importance),
            "top_interest": dict(self.top_interest),
        }


def rank_params(cfg: RankingConfig, work_dir: Path | None = None) -> RankParams:
    """The ranking section of the config as solver parameters."""
    return RankParams(
        solver=SolverParams(damping=cfg.damping, tol=cfg.tolerance, max_iter=cfg.max_iter),
        dangling=cfg.dangling,
        interest_from_importance=cfg.interest_teleport == "xml_importance",
        memory_budget_bytes=cfg.memory_budget_mb * 2**20, work_dir=work_dir)


def run_rank(app: App, progress: ProgressFn | None = None, top: int = 10) -> RankSummary:
    """Rank the store's link graph and write importance and interest back (mean 1)."""
    with app.open_store() as store:
        writer = store.writer(now=app.clock.now)
        try:
            return rank_store(app, store, writer.submit, progress, top)
        finally:
            writer.close()


def rank_store(app: App, store: MetadataStore, submit: Callable[[Any], None],
               progress: ProgressFn | None = None, top: int = 10) -> RankSummary:
    """Rank ``store``'s graph; results and the job record go through ``submit`` (the writer)."""
    started = app.clock.now()
    t0 = time.monotonic()
    graph = store.export_graph()
    if graph.n == 0:
        raise XyroError(f"the database {app.database_path} holds no pages yet: crawl "
                        "first (`xyro crawl` or `xyro demo`), or rank a file with "
                        "`xyro rank --edges FILE.npz`")
    report = rank_graph(graph.indptr, graph.indices, graph.xml_mask,
                        rank_params(app.config.ranking, app.database_path.parent), progress)
    interest = report.interest if graph.xml_mask.any() else None
    submit(SetRanks(graph.ids, report.importance, interest))
    submit(JobRun("rank", started, app.clock.now(), "ok",
                  f"{graph.n} pages, {graph.m} links, {time.monotonic() - t0:.1f} s"))
    tops = [_top(store.url_of, graph.ids, values, top)
            for values in (report.importance, interest)]
    return RankSummary(graph.n, graph.m, report, tops[0], tops[1])


def rank_edges(path: Path, app: App, progress: ProgressFn | None = None,
               top: int = 10) -> RankSummary:
    """Rank a bare .npz edge list (n, src, dst[, xml]); node ids stand for URLs."""
    report = rank_edges_file(path, rank_params(app.config.ranking), progress)
    with np.load(path) as data:
        links = int(data["src"].shape[0])
    ids = np.arange(report.importance.shape[0])
    interest = report.interest if report.interest_iterations else None
    return RankSummary(int(ids.shape[0]), links, report,
                       _top(_node, ids, report.importance, top),
                       _top(_node, ids, interest, top))


def _node(i: int) -> str:
    return f"node {i}"


def _top(url_of: Any, ids: np.ndarray, values: np.ndarray | None,
         k: int) -> tuple[tuple[str, float], ...]:
    if values is None or values.size == 0 or k <= 0:
        return ()
    order = np.argsort(-values, kind="stable")[:k]
    return tuple((url_of(int(ids[i])) or f"id {int(ids[i])}", round(float(values[i]), 4))
                 for i in order)

