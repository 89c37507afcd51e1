"""OPIC convergence benchmark: the papers' experiment (000 §4, 004 §4) on the pure core.

Run: ``.venv/bin/python tests/bench/opic_convergence.py [--quick]``. Prints ONE JSON line on
stdout (a ``summary`` object first, then the machine block and the details); progress goes to
stderr. ``--quick`` (a few seconds) uses small graphs: 10,000 power-law pages and the first
20,000 ids of LAW cnr-2000 (its sites, as an induced subgraph).

What is measured:
- graphs: LAW cnr-2000 (real web graph: deep site chains, 24 % pages without out-links)
  and a 100,000-page power-law graph (seeded; ``broder_powerlaw``: in- and out-degree power
  laws with the exponents Broder et al. measured on the web, 2.1 and 2.72, mean out-degree
  8, 5 % pages without out-links; the papers' model is "the power distribution on incoming
  edges"). The full run also reports the power-law generator of ``tests/bench/pagerank.py``
  (10 links per page), a denser and more skewed in-degree, as a second synthetic graph;
- reference: the ``teleport`` PageRank fixpoint with damping c = 0.85 from
  ``ranking.importance.direct_importance`` at residual 1e-12 (L1 error ~5e-12);
- OPIC from the uniform start (cash 1/n), c = 0.85, selection Greedy (exact: the page with
  the most cash before every single visit, found by the kernel's tournament tree; no top-k
  batches), Random (seeded) and Cycle (ids in order); a "read per page" is n visits; after
  each read 1..30, the L1 error and the mean relative error (mean |x − x*|/x*) of the
  papers' estimate (H + C)/(G + 1) and of the inflow estimate (H + C − C₀, normalized);
  ``reads_below_target``: the first read count with L1 < 1 %;
- changing graph (power-law graph): Greedy with Adaptive OPIC histories, 20 reads on the
  graph, then 10 % of the links get a new destination (drawn from the same in-degree law;
  parallel links count, as in ``LinkGraph``), and the L1 error against the new fixpoint
  over the next 10 reads for the fixed window (T in units of G), the variable window
  (n = 4) and BAO (T), next to the static inflow estimate;
- ``visits_per_s``: the pure core in batch mode with Greedy selection, on a graph of
  exactly 10 uniformly drawn children per page (1M pages; quick: 100k), best of 3 runs of
  n visits after a warm-up (numba compiles once per machine, then loads its disk cache).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmachine import machine  # a sibling script: tests/bench is sys.path[0]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ranking.graph import LinkGraph  # noqa: E402
from ranking.importance import direct_importance  # noqa: E402
from ranking.opic import OpicParams, OpicState  # noqa: E402
from ranking.opic_adaptive import AdaptiveParams  # noqa: E402
from ranking.opic_select import SELECTIONS, visit_by, visit_greedy  # noqa: E402
from ranking.sweep import SolverParams  # noqa: E402

CNR = REPO / ".." / "shared" / "data" / "cnr-2000-edges.npz"
DAMPING = 0.85
REFERENCE_TOL = 1e-12
READS = 30
TARGET_L1 = 0.01
ESTIMATE_KINDS = ("inflow", "papers")
ADAPTIVE = AdaptiveParams(window=8.0, visits=4, measures=8)
WINDOW_KINDS = ("fixed_window", "variable_window", "bao", "inflow")
SETTLE_READS, CHANGE_READS, REWIRED = 20, 10, 0.10


def log(message: str) -> None:
    print(f"[opic-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- graphs ---------------------------------------------------------------------------------

def broder_powerlaw(n: int, seed: int, mean_out: float = 8.0,
                    dangling: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique links: out-degrees from a Pareto law of density exponent 2.72 scaled to mean
    ``mean_out`` (``dangling`` of the pages get none), destinations drawn in proportion to
    a popularity of density exponent 2.1 (so in-degrees follow it). Returns src, dst and
    the popularity (for rewiring)."""
    rng = np.random.default_rng(seed)
    out_law = 1.0 + rng.pareto(1.72, n)  # mean 1/(1 − 1/1.72) ≈ 2.39
    degree = np.minimum(np.rint(out_law * (mean_out / 2.39)), 5000).astype(np.int64)
    degree[rng.random(n) < dangling] = 0
    popularity = 1.0 + rng.pareto(1.1, n)
    popularity /= popularity.sum()
    src = np.repeat(np.arange(n, dtype=np.int64), degree)
    dst = rng.choice(n, size=len(src), p=popularity)
    keys = np.unique(src * n + dst)
    return keys // n, keys % n, popularity


def rewire(dst: np.ndarray, popularity: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A copy of ``dst`` where ``fraction`` of the links point to new pages drawn from
    ``popularity``."""
    rng = np.random.default_rng(seed)
    moved = rng.choice(len(dst), size=int(len(dst) * fraction), replace=False)
    out = dst.copy()
    out[moved] = rng.choice(len(popularity), size=len(moved), p=popularity)
    return out


def load_cnr(first_pages: int | None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """LAW cnr-2000's links, or those among its first ``first_pages`` ids (whole sites: ids
    are in URL order)."""
    if not CNR.exists():
        return None
    with np.load(CNR) as z:
        n, src, dst = int(z["n"]), z["src"], z["dst"]
    if first_pages is not None:
        keep = (src < first_pages) & (dst < first_pages)
        n, src, dst = first_pages, src[keep], dst[keep]
    return src, dst, n


def reference(graph: LinkGraph) -> tuple[np.ndarray, dict]:
    t0 = time.perf_counter()
    res = direct_importance(graph, SolverParams(damping=DAMPING, tol=REFERENCE_TOL,
                                                max_iter=5000), dangling="teleport")
    return res.values, {"method": "ranking.importance.direct_importance, dangling=teleport",
                        "tol": REFERENCE_TOL, "sweeps": res.iterations,
                        "seconds": round(time.perf_counter() - t0, 2)}


# ---- measurements -----------------------------------------------------------------------------

def errors(estimate: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(L1 error, mean relative error)."""
    diff = np.abs(estimate - ref)
    return float(diff.sum()), float(np.mean(diff / ref))


def reads_below(curve: list[float], target: float) -> int | None:
    """The first read count (1-based) whose error is below ``target``."""
    return next((r + 1 for r, v in enumerate(curve) if v < target), None)


def convergence(graph: LinkGraph, ref: np.ndarray, selection: str, reads: int,
                seed: int) -> dict:
    state = OpicState.create(graph.n, OpicParams(damping=DAMPING))
    rng = np.random.default_rng(seed)
    curves = {k: {"l1": [], "mean_rel": []} for k in ESTIMATE_KINDS}
    cursor, visiting = 0, 0.0
    for _ in range(reads):
        t0 = time.perf_counter()
        cursor = visit_by(state, graph, selection, graph.n, rng=rng, cursor=cursor)
        visiting += time.perf_counter() - t0
        for kind in ESTIMATE_KINDS:
            l1, rel = errors(state.estimate(kind), ref)
            curves[kind]["l1"].append(round(l1, 6))
            curves[kind]["mean_rel"].append(round(rel, 6))
    out: dict = {"visit_seconds": round(visiting, 2),
                 "visits_per_s": round(reads * graph.n / visiting),
                 "clock_G_per_read": round(state.clock / reads, 3)}
    for kind in ESTIMATE_KINDS:
        out[kind] = {**curves[kind],
                     "reads_below_target": reads_below(curves[kind]["l1"], TARGET_L1)}
    return out


def bench_graph(name: str, src: np.ndarray, dst: np.ndarray, n: int, reads: int) -> dict:
    graph = LinkGraph.from_edges(src, dst, n)
    ref, ref_info = reference(graph)
    log(f"{name}: {n} pages, {graph.m} links, reference in {ref_info['seconds']}s")
    out: dict = {"pages": n, "links": graph.m,
                 "pages_without_out_links": int((graph.out_degree() == 0).sum()),
                 "reference": ref_info, "runs": {}}
    for k, selection in enumerate(SELECTIONS):
        run = convergence(graph, ref, selection, reads, seed=100 + k)
        out["runs"][selection] = run
        log(f"  {selection}: inflow L1 " + " ".join(
            f"{r}:{run['inflow']['l1'][r - 1]:.4f}" for r in (1, 5, 6, 10, reads)
            if r <= reads) + f"; {run['visits_per_s']} visits/s")
    return out


def changing_graph(src: np.ndarray, dst: np.ndarray, popularity: np.ndarray, n: int) -> dict:
    """Greedy with Adaptive OPIC: settle on the graph, rewire, follow the new fixpoint."""
    before = LinkGraph.from_edges(src, dst, n)
    after = LinkGraph.from_edges(src, rewire(dst, popularity, REWIRED, seed=7), n)
    ref_before, _ = reference(before)
    ref_after, _ = reference(after)
    state = OpicState.create(n, OpicParams(damping=DAMPING, adaptive=ADAPTIVE))
    visit_greedy(state, before, SETTLE_READS * n)
    settled = {k: round(errors(state.estimate(k), ref_before)[0], 6) for k in WINDOW_KINDS}
    curves: dict[str, list[float]] = {k: [] for k in WINDOW_KINDS}
    for _ in range(CHANGE_READS):
        visit_greedy(state, after, n)
        for kind in WINDOW_KINDS:
            curves[kind].append(round(errors(state.estimate(kind), ref_after)[0], 6))
    log("changing graph: L1 after 10 reads " + ", ".join(
        f"{k} {curves[k][-1]:.4f}" for k in WINDOW_KINDS))
    return {"graph": "power-law (the benchmark's)", "pages": n,
            "settle_reads": SETTLE_READS, "links_rewired": REWIRED,
            "fixpoint_l1_change": round(float(np.abs(ref_after - ref_before).sum()), 6),
            "window_T_in_G": ADAPTIVE.window, "variable_window_n": ADAPTIVE.visits,
            "fixed_window_measures": ADAPTIVE.measures,
            "clock_G_per_read": round(state.clock / (SETTLE_READS + CHANGE_READS), 3),
            "l1_before_change_vs_old_fixpoint": settled,
            "l1_after_change_per_read": curves,
            "note": "inflow = the static estimate (whole history), for comparison"}


def throughput(n: int, children: int = 10, repeats: int = 3) -> dict:
    """Visits per second of the batch kernel under Greedy selection."""
    rng = np.random.default_rng(5)
    graph = LinkGraph(np.arange(0, children * n + 1, children, dtype=np.int64),
                      rng.integers(0, n, children * n).astype(np.int32))
    out: dict = {"pages": n, "children_per_page": children, "visits_per_run": n}
    for label, params in (("static", OpicParams(damping=DAMPING)),
                          ("adaptive", OpicParams(damping=DAMPING, adaptive=ADAPTIVE))):
        state = OpicState.create(n, params)
        t0 = time.perf_counter()
        visit_greedy(state, graph, 1000)  # compiles, or loads the kernel from the cache
        warmup = time.perf_counter() - t0
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            visit_greedy(state, graph, n)
            best = min(best, time.perf_counter() - t0)
        out[label] = {"visits_per_s": round(n / best), "warmup_seconds": round(warmup, 3)}
        log(f"throughput {label}: {out[label]['visits_per_s']} visits/s")
    return out


# ---- main ---------------------------------------------------------------------------------------

def summary(graphs: dict, speed: dict, power: str, cnr: str | None) -> dict:
    def l1(graph: str | None, selection: str, reads: int) -> float | None:
        if graph is None or "runs" not in graphs.get(graph, {}):
            return None
        curve = graphs[graph]["runs"][selection]["inflow"]["l1"]
        return curve[reads - 1] if reads <= len(curve) else None

    def below(graph: str | None, selection: str) -> int | None:
        if graph is None or "runs" not in graphs.get(graph, {}):
            return None
        return graphs[graph]["runs"][selection]["inflow"]["reads_below_target"]

    out = {"powerlaw_greedy_inflow_l1_at_6_reads": l1(power, "greedy", 6),
           "cnr_greedy_inflow_l1_at_10_reads": l1(cnr, "greedy", 10),
           "cnr_random_inflow_l1_at_10_reads": l1(cnr, "random", 10),
           "visits_per_s": speed["static"]["visits_per_s"],
           "powerlaw_graph": power, "cnr_graph": cnr,
           "reads_below_1pct_l1_inflow": {
               g: {s: below(g, s) for s in SELECTIONS} for g in (power, cnr) if g}}
    pl6, cnr10 = out["powerlaw_greedy_inflow_l1_at_6_reads"], \
        out["cnr_greedy_inflow_l1_at_10_reads"]
    out["targets_met"] = {
        "powerlaw_greedy_below_1pct_within_6_reads": pl6 is not None and pl6 < 0.01,
        "cnr_greedy_below_5pct_within_10_reads": cnr10 is not None and cnr10 < 0.05,
        "random_needs_more_reads_than_greedy": all(
            l1(g, "random", r) > l1(g, "greedy", r) for g in (power, cnr) if g
            for r in (5, 10, 30)),
        "visits_per_s_at_least_500k": speed["static"]["visits_per_s"] >= 500_000}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small graphs, a few seconds")
    args = parser.parse_args()
    started = time.perf_counter()
    n_power = 10_000 if args.quick else 100_000
    graphs: dict = {}
    src, dst, popularity = broder_powerlaw(n_power, seed=1)
    power = f"powerlaw-{n_power // 1000}k"
    graphs[power] = bench_graph(power, src, dst, n_power, READS)
    cnr_edges = load_cnr(20_000 if args.quick else None)
    cnr = None
    if cnr_edges is None:
        graphs["cnr-2000"] = {"skipped": f"LAW cnr-2000 edge list not found at {CNR}"}
    else:
        cnr = "cnr-2000-first-20k" if args.quick else "cnr-2000"
        graphs[cnr] = bench_graph(cnr, *cnr_edges, READS)
    if not args.quick:
        from pagerank import powerlaw_edges  # the PageRank benchmark's generator

        s2, d2 = powerlaw_edges(n_power, 10 * n_power, seed=1)
        graphs["powerlaw-100k-pagerank-generator"] = bench_graph(
            "powerlaw-100k-pagerank-generator", s2, d2, n_power, READS)
    change = changing_graph(src, dst, popularity, n_power)
    speed = throughput(100_000 if args.quick else 1_000_000)
    result = {"benchmark": "opic_convergence", "quick": args.quick,
              "summary": summary(graphs, speed, power, cnr),
              "machine": machine(numpy=np.__version__),
              "params": {"damping": DAMPING, "reads_per_page": READS, "target_l1": TARGET_L1,
                         "reference_tol": REFERENCE_TOL, "start": "uniform cash 1/n",
                         "virtual_flush": OpicParams().virtual_flush,
                         "greedy": "exact: highest cash before every visit (tournament "
                                   "tree), no top-k batches",
                         "random_seeds": "100 + selection index", "cycle": "ids in order",
                         "values": "errors are fractions (0.01 = 1 %)"},
              "graphs": graphs, "changing_graph": change, "throughput": speed}
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
