"""``xyro rank --compare``: OPIC's importance estimates against the offline ranking of the
same graph (DESIGN.md §5 "OPIC"; the papers' convergence experiment, 000 §4, 004 §4).

With OPIC's split of a visit's cash (c to the children, 1 − c to the virtual page V), its
fixpoint is exactly the ``teleport`` PageRank with the same damping c (DESIGN.md §5), so the
reference is ``ranking.importance.direct_importance(dangling="teleport")`` with the config's
``ranking.damping``, ``tolerance`` and ``max_iter``. The metrics are
``ranking.compare.compare_rankings`` (its module doc defines them); this module is the I/O:

- database mode (:func:`compare_database`): the crawl's last OPIC checkpoint (written by
  ``xyro crawl`` / ``xyro run`` when ``ranking.opic.enabled``) against the stored link graph.
  OPIC's URLs are mapped to URL ids; the pages compared are those in both, each vector
  renormalized over them. The report says how many reads per page OPIC made and how many
  of its pages it never read: those keep the cash they receive instead of passing it on,
  so a crawl with a large unread frontier stays away from the fixpoint (OPIC assumes every
  page is read again and again, 000 §3). The crawl's pages get no cash of their own (it
  comes from V), so its inflow and papers' estimates coincide unless focus grants were
  made. The graph is ranked in memory, or out of core when it does not fit
  ``ranking.memory_budget_mb`` (as ``xyro rank`` does). Nothing is written;
- edge-list mode (:func:`compare_edges`): a bare ``.npz`` edge list (n, src, dst, as for
  ``xyro rank --edges``); OPIC runs on it in the pure core from the uniform start (cash
  1/n), Greedy selection (the page with the most cash, 000 §3), for ``reads`` × n visits,
  and both estimates, inflow and the papers' (H + C)/(G + 1), are compared. Everything is
  in memory: OPIC needs the whole graph anyway.

``say`` receives progress lines (the CLI prints them on stderr): PageRank sweeps and, in
edge-list mode, one line per read with the running L1 distance.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from metadata import MetadataStore
from ranking.compare import compare_rankings, l1_distance
from ranking.graph import LinkGraph
from ranking.importance import direct_importance
from ranking.opic import OpicParams, OpicState
from ranking.opic_select import visit_greedy
from ranking.results import SweepProgress
from xyro.app import App
from xyro.crawl.opic_online import OnlineOpic
from xyro.errors import XyroError
from xyro.jobs.rank_job import fits_in_memory, load_edge_list, rank_stream
from xyro.jobs.rank_run import SQLITE_HEAP_SHARE, rank_params, sqlite_heap_limit

Say = Callable[[str], None]
ESTIMATE_KINDS = ("inflow", "papers")
DEFAULT_READS = 10


def _quiet(_line: str) -> None:
    pass


def _sweeps(say: Say) -> Callable[[SweepProgress], None]:
    def progress(p: SweepProgress) -> None:
        say(f"{p.ranking} (teleport) sweep {p.iteration}: residual {p.residual:.3e}")
    return progress


def compare_opic(app: App, edges: Path | None = None, reads: int | None = None,
                 say: Say = _quiet) -> dict[str, Any]:
    """``xyro rank --compare [--edges FILE] [--reads N]``: the edge-list mode when ``edges``
    is given (``reads`` default :data:`DEFAULT_READS`), else the database mode."""
    if edges is not None:
        return compare_edges(edges, app, DEFAULT_READS if reads is None else reads, say)
    return compare_database(app, say)


# ---- edge-list mode ------------------------------------------------------------------------

def load_edges(path: Path | str) -> LinkGraph:
    """The out-link graph of a bare ``.npz`` edge list (``xyro rank --edges``'s format)."""
    return load_edge_list(path)[0]


def compare_edges(path: Path | str, app: App, reads: int = DEFAULT_READS,
                  say: Say = _quiet) -> dict[str, Any]:
    """Run OPIC (Greedy, ``reads`` reads per page) on the edge list at ``path`` and compare
    its inflow and papers' estimates with the teleport PageRank of the same graph."""
    if isinstance(reads, bool) or not isinstance(reads, int) or reads < 1:
        raise ValueError(f"reads={reads!r} must be an integer >= 1 (reads per page)")
    started = time.perf_counter()
    graph = load_edges(path)
    solver = rank_params(app.config.ranking).solver
    c = solver.damping
    say(f"{path}: {graph.n:,} pages, {graph.m:,} links; PageRank (teleport, c={c})")
    reference = direct_importance(graph, solver, dangling="teleport", progress=_sweeps(say))
    state = OpicState.create(graph.n, OpicParams(damping=c))
    opic_seconds = 0.0
    for read in range(1, reads + 1):
        t0 = time.perf_counter()
        visit_greedy(state, graph, graph.n)
        opic_seconds += time.perf_counter() - t0
        l1 = {kind: l1_distance(state.estimate(kind), reference.values)
              for kind in ESTIMATE_KINDS}
        say(f"OPIC read {read}/{reads}: {read * graph.n:,} visits, L1 inflow "
            f"{l1['inflow']:.2%}, papers {l1['papers']:.2%} ({opic_seconds:.1f} s)")
    visits = reads * graph.n
    report: dict[str, Any] = {
        "mode": "edges", "edges": str(path), "pages": graph.n, "links": graph.m,
        "damping": c, "selection": "greedy", "reads": reads, "visits": visits,
        "opic_seconds": round(opic_seconds, 3),
        "visits_per_s": round(visits / opic_seconds) if opic_seconds > 0 else None,
        "pagerank_iterations": reference.iterations,
        "pagerank_seconds": round(reference.seconds, 3)}
    for kind in ESTIMATE_KINDS:
        report[kind] = compare_rankings(state.estimate(kind), reference.values)
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


# ---- database mode -------------------------------------------------------------------------

def compare_database(app: App, say: Say = _quiet) -> dict[str, Any]:
    """Compare the crawl's stored OPIC checkpoint with the teleport PageRank of the stored
    graph. XyroError when there is no checkpoint or nothing in common to compare."""
    budget = app.config.ranking.memory_budget_mb * 2**20
    with sqlite_heap_limit(budget // SQLITE_HEAP_SHARE), \
            app.open_store(read_only=True) as store:
        return _compare_store(app, store, say)


def _compare_store(app: App, store: MetadataStore, say: Say) -> dict[str, Any]:
    started = time.perf_counter()
    cfg = app.config.ranking
    stored = store.opic_checkpoint()
    if stored is None:
        raise XyroError(f"the database {app.database_path} holds no OPIC checkpoint, so there "
                        "is nothing to compare: crawl with ranking.opic.enabled true first "
                        "(`xyro crawl` or `xyro run` write one every "
                        "ranking.opic.checkpoint_interval_s and when they stop), or compare "
                        "on an edge list with `xyro rank --compare --edges FILE.npz`")
    written_at, opic_pages, clock_g, data = stored
    kinds = list(dict.fromkeys([cfg.opic.estimate, *ESTIMATE_KINDS]))
    estimates, notes = _decode(data, kinds)
    urls = estimates.pop("urls")
    ids = np.array([-1 if i is None else i for i in store.url_ids(urls, create=False)],
                   dtype=np.int64) if urls else np.zeros(0, np.int64)
    say(f"OPIC checkpoint: {len(urls):,} pages, G = {clock_g:.6g}; ranking the stored graph")
    reference, graph_n, graph_m, iterations = _store_pagerank(app, store, say)
    rows = ids - 1  # URL ids are dense 1..n, graph row k is URL id k + 1
    both = np.flatnonzero((ids >= 1) & (rows < graph_n))
    if both.size == 0:
        raise XyroError(f"none of the {len(urls):,} pages of the OPIC checkpoint in "
                        f"{app.database_path} is in its stored link graph "
                        f"({graph_n:,} pages): nothing to compare; let the crawl store "
                        "the pages it reads (`xyro crawl`) and checkpoint again")
    facts = _checkpoint_facts(data)
    opic_damping = facts["opic_damping"]
    report: dict[str, Any] = {
        "mode": "database", "database": str(app.database_path),
        "checkpoint_written_at": datetime.fromtimestamp(written_at, tz=timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "opic_pages": int(opic_pages), "opic_clock_g": float(clock_g),
        "opic_reads_per_page": facts["opic_reads_per_page"],
        "opic_unread_pages": facts["opic_unread_pages"],
        "graph_pages": graph_n, "graph_links": graph_m, "compared_pages": int(both.size),
        "opic_pages_not_in_graph": len(urls) - int(both.size),
        "graph_pages_not_in_opic": graph_n - int(both.size),
        "damping": cfg.damping, "opic_damping": opic_damping,
        "pagerank_iterations": iterations, "estimate": cfg.opic.estimate}
    if opic_damping is not None and abs(opic_damping - cfg.damping) > 1e-12:
        notes.append(f"OPIC ran with damping {opic_damping} but ranking.damping is "
                     f"{cfg.damping}: its fixpoint is the PageRank with its own damping; "
                     f"compare with --set ranking.damping={opic_damping}")
    ref = reference[rows[both]]
    for kind, values in estimates.items():
        report[kind] = compare_rankings(values[both], ref)
    if notes:
        report["notes"] = notes
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def _decode(data: bytes, kinds: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Each estimate kind of the stored checkpoint (decoded once per kind: ``OnlineOpic``
    gives one estimate per instance) and its URLs (``urls``); notes on kinds it lacks."""
    out: dict[str, Any] = {}
    notes: list[str] = []
    for kind in kinds:
        try:
            opic = OnlineOpic.from_checkpoint(data, estimate=kind)
        except ValueError as exc:
            raise XyroError(f"cannot compare: {exc}") from None
        try:
            urls, values = opic.estimates()
        except ValueError as exc:  # a window estimate from a checkpoint without histories
            notes.append(f"estimate {kind} not compared: {exc}")
            continue
        out.setdefault("urls", urls)
        out[kind] = values
    if "urls" not in out:
        raise XyroError(f"cannot compare: the OPIC checkpoint gives none of the estimates "
                        f"{kinds} ({'; '.join(notes)})")
    return out, notes


def _checkpoint_facts(data: bytes) -> dict[str, Any]:
    """The damping c OPIC ran with, its mean reads per page and its pages never read."""
    try:
        return OnlineOpic.from_checkpoint(data).facts()
    except ValueError:
        return {"opic_damping": None, "opic_reads_per_page": None, "opic_unread_pages": None}


def _store_pagerank(app: App, store: MetadataStore,
                    say: Say) -> tuple[np.ndarray, int, int, int]:
    """(teleport PageRank per graph row, pages, links, sweeps) of the stored graph: in
    memory when it fits ``ranking.memory_budget_mb``, else out of core (``rank_stream``)."""
    params = replace(rank_params(app.config.ranking, app.database_path.parent),
                     dangling="teleport")
    n, m = store.graph_counts()
    if n == 0:
        raise XyroError(f"the database {app.database_path} holds no pages yet: crawl "
                        "first (`xyro crawl`), with ranking.opic.enabled true")
    if fits_in_memory(n, m, params.memory_budget_bytes):
        exported = store.export_graph()
        graph = LinkGraph.from_csr(exported.indptr, exported.indices)
        del exported
        result = direct_importance(graph, params.solver, dangling="teleport",
                                   progress=_sweeps(say))
        return result.values, graph.n, graph.m, result.iterations
    report = rank_stream(store.stream_graph, params, _sweeps(say))
    values = report.importance / float(report.importance.sum())
    return values, len(values), m, report.importance_iterations
