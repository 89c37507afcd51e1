"""The ranking job over the metadata store (``xyro rank`` and the daemon's schedule).

Sizes the link graph from the store's counts, then either reads it whole, chunk by chunk
(:func:`xyro.jobs.rank_job.read_csr`), and ranks it in memory, or, when that would not fit
the configured budget, streams its child lists from the store into out-of-core slices
(:func:`xyro.jobs.rank_job.rank_stream`, DESIGN.md §5 "Scale"); runs direct importance
and inverse interest, writes both back with mean 1 (in pieces, so the writer never turns
all n values into Python objects at once), and records the run.
``--edges`` ranks a bare edge list instead (no database involved).

A caller that may have to stop mid-run (the daemon on SIGTERM) passes ``check_stop``: a
callable that raises to abandon the run. It is checked while the graph is read from the
store (inside SQLite's scans too), between the steps of the ranking, and between the pieces
of the write-back. With ``flush`` too (the writer's), the write-back waits for each piece
to be committed before it checks and sends the next: without that, the writer would still
hold a whole ranking's updates when the stop comes (2M pages: about 10 s of work that the
shutdown's final flush has to finish). An abandoned run writes no job record; abandoned in
the write-back, the pages written so far keep their new values (it says how many) and the
next run rewrites all of them.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from functools import partial
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metadata import JobRun, MetadataStore, SetRanks
from ranking.results import ProgressFn
from ranking.slices import StopCheck, stop_point
from ranking.sweep import SolverParams
from xyro.app import App, scope_seeds
from xyro.config import RankingConfig
from xyro.errors import XyroError
from xyro.jobs.global_round import finished_importance
from xyro.jobs.global_stored import config_scope
from xyro.jobs.rank_cluster import ClusterSession, open_cluster
from xyro.jobs.rank_job import (RankParams, RankReport, fits_in_memory, rank_edges_file,
                                rank_graph, rank_stream, read_csr)

log = logging.getLogger(__name__)

WRITE_BACK_IDS = 1 << 16  # pages per SetRanks op
SQLITE_HEAP_SHARE = 8      # `xyro rank`: SQLite's page caches get budget / 8 of the process


@dataclass(frozen=True, slots=True)
class RankSummary:
    """What one ranking run did, for the CLI and the job log."""

    pages: int
    links: int
    report: RankReport
    top_importance: tuple[tuple[str, float], ...]
    top_interest: tuple[tuple[str, float], ...]
    global_estimate_pages: int = 0   # in-scope pages given the global estimate instead

    def as_dict(self) -> dict[str, Any]:
        r = self.report
        return {
            "pages": self.pages, "links": self.links, "seconds": round(r.seconds, 3),
            "out_of_core": r.out_of_core, "slices": r.slices,
            "importance_iterations": r.importance_iterations,
            "importance_residual": r.importance_residuals[-1] if r.importance_residuals else None,
            "interest_iterations": r.interest_iterations,
            "interest_residual": r.interest_residuals[-1] if r.interest_residuals else None,
            # [url, value] pairs, best first: an object's keys were printed sorted by name.
            "top_importance": [list(pair) for pair in self.top_importance],
            "top_interest": [list(pair) for pair in self.top_interest],
            "global_estimate_pages": self.global_estimate_pages,
        }


def rank_params(cfg: RankingConfig, work_dir: Path | None = None) -> RankParams:
    """The ranking section of the config as solver parameters (``shared_dir``: where a
    cluster's slices go, ``ranking.cluster_dir`` or else ``work_dir``, made absolute since
    the workers do not share this process's working directory)."""
    shared = cfg.cluster_dir if cfg.cluster_dir is not None else work_dir
    return RankParams(
        solver=SolverParams(damping=cfg.damping, tol=cfg.tolerance, max_iter=cfg.max_iter),
        dangling=cfg.dangling,
        interest_from_importance=cfg.interest_teleport == "xml_importance",
        memory_budget_bytes=cfg.memory_budget_mb * 2**20, work_dir=work_dir,
        shared_dir=None if shared is None else Path(shared).resolve())


def run_rank(app: App, progress: ProgressFn | None = None, top: int = 10,
             cluster: str | None = None) -> RankSummary:
    """Rank the store's link graph and write importance and interest back (mean 1).

    The process is this command's own, so the memory budget covers all of it, SQLite
    included: its page caches are held to a share of the budget (:func:`sqlite_heap_limit`).
    Without that, the writer's cache (512 MB) fills with every ``urls`` page the write-back
    touches: +358 MB for 2M pages, against +102 MB under a 64 MB limit, in the same time.

    ``cluster`` (``xyro rank --cluster``): rank on that Dask scheduler, which must be
    reachable (an error otherwise, not the daemon's fallback to this host)."""
    budget = app.config.ranking.memory_budget_mb * 2**20
    with sqlite_heap_limit(budget // SQLITE_HEAP_SHARE), app.open_store() as store:
        writer = store.writer(now=app.clock.now)
        try:
            return rank_store(app, store, writer.submit, progress, top, cluster=cluster)
        finally:
            writer.close()


@contextmanager
def sqlite_heap_limit(limit: int) -> Iterator[None]:
    """SQLite's soft heap limit (process-wide: every connection's page cache recycles its
    pages rather than grow past it) for the block; the previous limit is restored after."""
    with closing(sqlite3.connect(":memory:")) as conn:
        previous = conn.execute("PRAGMA soft_heap_limit").fetchone()[0]
        conn.execute(f"PRAGMA soft_heap_limit = {int(limit)}")
    try:
        yield
    finally:
        with closing(sqlite3.connect(":memory:")) as conn:
            conn.execute(f"PRAGMA soft_heap_limit = {int(previous)}")


def rank_store(app: App, store: MetadataStore, submit: Callable[[Any], None],
               progress: ProgressFn | None = None, top: int = 10,
               check_stop: StopCheck | None = None,
               flush: Callable[[], None] | None = None,
               cluster: str | None = None) -> RankSummary:
    """Rank ``store``'s graph; results and the job record go through ``submit`` (the writer).

    ``check_stop`` (optional) is called all along the run and raises to abandon it (the
    exception propagates; see the module doc). ``flush`` (optional, the writer's): wait for
    each piece of the write-back to be committed before the next.

    On a Dask cluster when ``cluster`` (required: unreachable is an error) or
    ``ranking.cluster`` (unreachable: one warning, and the ranking runs on this host) is
    set; always out of core there (:mod:`xyro.jobs.rank_cluster`)."""
    started = app.clock.now()
    n, m = store.graph_counts()
    stop_point(check_stop)
    if n == 0:
        raise XyroError(f"the database {app.database_path} holds no pages yet: crawl "
                        "first (`xyro crawl` or `xyro demo`), or rank a file with "
                        "`xyro rank --edges FILE.npz`")
    params = rank_params(app.config.ranking, app.database_path.parent)
    address = cluster or app.config.ranking.cluster
    with open_cluster(address, app.config.ranking.cluster_timeout_s,
                      required=cluster is not None) as session:
        report, n, m = _rank(store, params, n, m, session, progress, check_stop)
    stop_point(check_stop)
    log.info("ranks computed (%d + %d sweeps); writing them back for %d pages",
             report.importance_iterations, report.interest_iterations, n)
    ids = np.arange(1, n + 1, dtype=np.int64)  # URL ids are dense 1..n, row k = id k + 1
    interest = report.interest if report.interest_iterations else None
    # With ranking.importance: opic the planner's importance comes from the crawl's OPIC
    # checkpoints; PageRank's stays in this run's summary only.
    opic_source = app.config.ranking.importance == "opic"
    _write_back(submit, ids, None if opic_source else report.importance, interest,
                flush, check_stop)
    global_pages = _keep_global_estimate(app, store, submit, flush)
    finished = app.clock.now()  # durations on the injected clock, as JobRun's times
    submit(JobRun("rank", started, finished, "ok",
                  f"{n} pages, {m} links, {finished - started:.1f} s"))
    tops = [_top(store.url_of, ids, values, top) for values in (report.importance, interest)]
    return RankSummary(n, m, report, tops[0], tops[1], global_pages)


def _keep_global_estimate(app: App, store: MetadataStore, submit: Callable[[Any], None],
                          flush: Callable[[], None] | None) -> int:
    """Write the finished global PageRank estimate again as the in-scope pages' importance
    (``ranking.global_estimate.importance: global``, DESIGN.md §5), which the write-back
    just overwrote with PageRank; the number of pages it covers (0: none to keep)."""
    cfg = app.config
    kept = finished_importance(cfg.ranking.global_estimate, cfg.ranking.damping,
                               config_scope(cfg, scope_seeds(app, store)), store)
    if kept is None:
        return 0
    submit(SetRanks(*kept))
    if flush is not None:
        flush()
    log.info("the %d in-scope pages keep the global PageRank estimate as importance",
             len(kept[0]))
    return len(kept[0])


def _rank(store: MetadataStore, params: RankParams, n: int, m: int,
          cluster: ClusterSession | None, progress: ProgressFn | None,
          check_stop: StopCheck | None) -> tuple[RankReport, int, int]:
    """In memory, out of core on this host, or on the cluster; with n and m as ranked."""
    in_memory = cluster is None and fits_in_memory(n, m, params.memory_budget_bytes)
    budget_mb = params.memory_budget_bytes >> 20
    log.info("ranking %d pages, %d links %s", n, m, "in memory" if in_memory else
             f"out of core (memory budget {budget_mb} MB)" if cluster is None else
             f"out of core on the Dask cluster at {cluster.address} ({cluster.threads()} "
             f"worker threads, memory budget {budget_mb} MB each)")
    read_links = partial(store.stream_graph, check_stop=check_stop)
    if in_memory:
        indptr, indices, xml_mask = read_csr(read_links, check_stop)
        n, m = len(indptr) - 1, len(indices)
        report = rank_graph(indptr, indices, xml_mask, params, progress, check_stop)
        del indptr, indices, xml_mask
    else:  # n and m as counted; the snapshot streamed may hold a few more (crawled since)
        report = rank_stream(read_links, params, progress, check_stop, cluster)
        n = len(report.importance)
    return report, n, m


def _write_back(submit: Callable[[Any], None], ids: np.ndarray, importance: np.ndarray | None,
                interest: np.ndarray | None, flush: Callable[[], None] | None = None,
                check_stop: StopCheck | None = None) -> None:
    """Both rankings as SetRanks ops of :data:`WRITE_BACK_IDS` pages each (views, no copy);
    with ``flush``, each committed before ``check_stop`` and the next (module doc)."""
    if importance is None and interest is None:
        return
    written = 0
    try:
        for a in range(0, len(ids), WRITE_BACK_IDS):
            stop_point(check_stop)
            part = slice(a, a + WRITE_BACK_IDS)
            submit(SetRanks(ids[part], None if importance is None else importance[part],
                            None if interest is None else interest[part]))
            if flush is not None:
                flush()
                written = min(a + WRITE_BACK_IDS, len(ids))
    except BaseException:
        if written:
            log.warning("ranking abandoned in its write-back: %d of %d pages have the new "
                        "values, the others keep the previous run's until the next",
                        written, len(ids))
        raise


def rank_edges(path: Path, app: App, progress: ProgressFn | None = None,
               top: int = 10, cluster: str | None = None) -> RankSummary:
    """Rank a bare .npz edge list (n, src, dst[, xml]); node ids stand for URLs. On a
    cluster as :func:`rank_store` says (the slices in ``ranking.cluster_dir``, else in the
    system's temporary folder)."""
    cfg = app.config.ranking
    with open_cluster(cluster or cfg.cluster, cfg.cluster_timeout_s,
                      required=cluster is not None) as session:
        report = rank_edges_file(path, rank_params(cfg), progress, session)
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

