"""PageRank benchmark: Xyro against igraph (PRPACK) and networkx, and the out-of-core path.

Run: ``.venv/bin/python tests/bench/pagerank.py [--quick]`` (heavy: run under ``nice -n 10``).
Prints ONE JSON line on stdout; progress goes to stderr.

What is measured, each peer on the same graph in the same run:
- graphs: LAW cnr-2000 (real web graph) and a synthetic power-law graph (5M pages / 50M
  links; ``--quick``: 50k / 500k, and cnr-2000 is skipped);
- ``teleport`` PageRank, damping 0.85, uniform teleport: the variant all three compute;
- accuracy: every system's L1 error against a high-precision reference (Xyro Jacobi, i.e.
  the plain power iteration, at residual 1e-14), not its own residual. Xyro is stopped at
  residual tol = target/10 (``ranking.sweep`` explains why the residual is not the error);
  igraph's PRPACK runs at its built-in 1e-10; networkx at tol = target/10/N (its rule:
  L1 change < N·tol). The error each reaches is reported next to its time, and each peer's
  L1 distance to Xyro's answer (``l1_vs_xyro``), a check independent of Xyro's reference;
- time: solve time (best of ``repeats``) apart from the graph build time of each system
  (Xyro: CSR + transpose from the edge arrays; igraph: ``Graph`` from the edge array;
  networkx: ``DiGraph`` from a scipy CSR). ``links_per_s_per_iteration`` = links·sweeps/s,
  only where the sweep count is known (PRPACK does not report it; networkx's equals the
  power iteration's, which Xyro Jacobi runs with the same stopping rule);
- Gauss-Seidel against Jacobi sweep counts, for both importance variants and the interest;
- out of core: a 20M-page / 200M-link power-law graph written to files chunk by chunk by a
  generator subprocess, then ranked (importance and interest in one scan per sweep) by a
  second subprocess under a 1 GB budget, which reports its own peak RSS (ru_maxrss).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# Every system single-threaded: Xyro is, and igraph's OpenMP PRPACK on this shared 2-core
# box ran 10-50x slower with 2 threads than with one (busy-waiting under load).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from benchmachine import machine  # noqa: E402  (a sibling script: tests/bench is sys.path[0])

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ranking.graph import LinkGraph  # noqa: E402
from ranking.importance import direct_importance  # noqa: E402
from ranking.interest import inverse_interest  # noqa: E402
from ranking.sweep import SolverParams  # noqa: E402

CNR = REPO / ".." / "shared" / "data" / "cnr-2000-edges.npz"
DAMPING = 0.85
TARGET_L1 = 1e-8
XYRO_TOL = TARGET_L1 / 10
REFERENCE_TOL = 1e-14


def log(message: str) -> None:
    print(f"[pagerank-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def powerlaw_edges(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique links with power-law out- and in-degrees (exponents ~1.7 and ~1.4 on the
    density), scattered ids; about 5 % of pages have no out-links."""
    rng = np.random.default_rng(seed)
    perm_src, perm_dst = rng.permutation(n), rng.permutation(n)
    src = perm_src[(n * rng.random(m) ** 1.5).astype(np.int64)]
    dst = perm_dst[(n * rng.random(m) ** 2.5).astype(np.int64)]
    keys = np.unique(src * n + dst)
    return (keys // n).astype(np.int32), (keys % n).astype(np.int32)


def best_of(repeats: int, run: Callable[[], object]) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t0)
    return best, result


def l1(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float64) - b).sum())


def kernel_warmup_seconds() -> float:
    """Time to get the compiled Gauss-Seidel kernels ready: numba compiles them on the first
    run on a machine and loads them from its on-disk cache afterwards. Not in solve times."""
    t0 = time.perf_counter()
    tiny = LinkGraph.from_edges(np.array([0, 1, 1]), np.array([1, 0, 1]), 3)
    for dangling in ("paper", "teleport"):
        direct_importance(tiny, SolverParams(), dangling=dangling)
    inverse_interest(tiny, np.array([True, False, False]))
    return time.perf_counter() - t0


def bench_xyro(src: np.ndarray, dst: np.ndarray, n: int, repeats: int) -> dict:
    t0 = time.perf_counter()
    graph = LinkGraph.from_edges(src, dst, n)
    in_links = graph.transpose()
    build = time.perf_counter() - t0
    log(f"xyro build {build:.2f}s; reference at tol {REFERENCE_TOL}")
    t0 = time.perf_counter()
    ref = direct_importance(graph, SolverParams(tol=REFERENCE_TOL, gauss_seidel=False,
                                                max_iter=5000),
                            dangling="teleport", in_links=in_links)
    ref_seconds = time.perf_counter() - t0
    out = {"build_seconds": round(build, 3), "tol": XYRO_TOL}
    values = {}
    for name, gs in (("gauss_seidel", True), ("jacobi", False)):
        params = SolverParams(tol=XYRO_TOL, gauss_seidel=gs, max_iter=5000)
        seconds, res = best_of(repeats, lambda p=params: direct_importance(
            graph, p, dangling="teleport", in_links=in_links))
        values[name] = res.values
        out[name] = {"solve_seconds": round(seconds, 4), "sweeps": res.iterations,
                     "l1_error": l1(res.values, ref.values),
                     "links_per_s_per_iteration": round(graph.m * res.iterations / seconds)}
        log(f"xyro {name}: {seconds:.3f}s, {res.iterations} sweeps, "
            f"err {out[name]['l1_error']:.2e}")
    fastest = min(("gauss_seidel", "jacobi"), key=lambda k: out[k]["solve_seconds"])
    out["solve_seconds"] = out[fastest]["solve_seconds"]
    out["l1_error"] = out[fastest]["l1_error"]
    out["method"] = fastest
    out["reference"] = {"method": "xyro jacobi (power iteration)", "tol": REFERENCE_TOL,
                        "sweeps": ref.iterations, "seconds": round(ref_seconds, 2)}
    out["_ref"] = ref.values
    out["_values"] = values[fastest]  # what the peers are compared with (l1_vs_xyro)
    out["_graph"] = (graph, in_links)
    return out


def bench_igraph(src: np.ndarray, dst: np.ndarray, n: int, ref: np.ndarray,
                 ours: np.ndarray, repeats: int) -> dict:
    try:
        import igraph
    except ImportError:
        return {"skipped": "python-igraph is not installed (CI installs only .[test]); "
                           "install the bench extra to compare with PRPACK"}
    t0 = time.perf_counter()
    g = igraph.Graph(n=n, edges=np.column_stack([src, dst]), directed=True)
    build = time.perf_counter() - t0
    seconds, values = best_of(repeats, lambda: g.pagerank(damping=DAMPING,
                                                          implementation="prpack"))
    values = np.asarray(values)
    log(f"igraph build {build:.2f}s, pagerank {seconds:.3f}s, err {l1(values, ref):.2e}")
    return {"version": igraph.__version__, "implementation": "prpack (tol 1e-10 built in)",
            "build_seconds": round(build, 3), "solve_seconds": round(seconds, 4),
            "l1_error": l1(values, ref), "l1_vs_xyro": l1(values, ours), "sweeps": None,
            "links_per_s_per_iteration": None}


def bench_networkx(graph: LinkGraph, ref: np.ndarray, ours: np.ndarray,
                   power_sweeps: int) -> dict:
    import networkx as nx
    from scipy.sparse import csr_array

    t0 = time.perf_counter()
    adjacency = csr_array((np.ones(graph.m), graph.indices, graph.indptr),
                          shape=(graph.n, graph.n))
    g = nx.from_scipy_sparse_array(adjacency, create_using=nx.DiGraph)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    pr = nx.pagerank(g, alpha=DAMPING, tol=XYRO_TOL / graph.n, max_iter=10_000)
    seconds = time.perf_counter() - t0
    values = np.fromiter((pr[i] for i in range(graph.n)), dtype=np.float64, count=graph.n)
    log(f"networkx build {build:.2f}s, pagerank {seconds:.3f}s, err {l1(values, ref):.2e}")
    return {"version": nx.__version__, "build_seconds": round(build, 3),
            "solve_seconds": round(seconds, 4), "l1_error": l1(values, ref),
            "l1_vs_xyro": l1(values, ours), "sweeps": power_sweeps,
            "sweeps_note": "inferred: power iteration, same rule as xyro jacobi",
            "links_per_s_per_iteration": round(graph.m * power_sweeps / seconds)}


def sweep_counts(graph: LinkGraph, in_links: LinkGraph) -> dict:
    """Sweeps to residual XYRO_TOL, Gauss-Seidel against Jacobi, for each equation."""
    xml = np.random.default_rng(7).random(graph.n) < 0.1
    counts: dict = {"tol": XYRO_TOL}
    for label, run in (
            ("importance_paper", lambda p: direct_importance(graph, p, in_links=in_links)),
            ("importance_teleport", lambda p: direct_importance(
                graph, p, dangling="teleport", in_links=in_links)),
            ("interest", lambda p: inverse_interest(graph, xml, p))):
        counts[label] = {name: run(SolverParams(tol=XYRO_TOL, gauss_seidel=gs,
                                                max_iter=5000)).iterations
                         for name, gs in (("gauss_seidel", True), ("jacobi", False))}
    log(f"sweep counts: {counts}")
    return counts


def bench_graph(name: str, src: np.ndarray, dst: np.ndarray, n: int, repeats: int,
                with_networkx: bool | str) -> dict:
    log(f"{name}: {n} pages, {len(src)} links")
    xyro = bench_xyro(src, dst, n, repeats)
    ref = xyro.pop("_ref")
    ours = xyro.pop("_values")
    graph, in_links = xyro.pop("_graph")
    out = {"pages": n, "links": graph.m, "xyro": xyro}
    out["igraph"] = bench_igraph(src, dst, n, ref, ours, repeats)
    if with_networkx is True:
        out["networkx"] = bench_networkx(graph, ref, ours, xyro["jacobi"]["sweeps"])
    else:
        out["networkx"] = {"skipped": with_networkx}
    ratios = {}
    for peer in ("igraph", "networkx"):
        if "solve_seconds" in out[peer]:
            ratios[f"xyro_speedup_vs_{peer}_solve"] = round(
                out[peer]["solve_seconds"] / xyro["solve_seconds"], 2)
            ratios[f"xyro_speedup_vs_{peer}_build_plus_solve"] = round(
                (out[peer]["solve_seconds"] + out[peer]["build_seconds"])
                / (xyro["solve_seconds"] + xyro["build_seconds"]), 2)
    out["ratios"] = ratios
    out["sweeps_gauss_seidel_vs_jacobi"] = sweep_counts(graph, in_links)
    out["in_memory_seconds_per_link_per_sweep"] = (
        xyro["gauss_seidel"]["solve_seconds"] / xyro["gauss_seidel"]["sweeps"] / graph.m)
    return out


# ---- out of core (subprocesses) -------------------------------------------------------------

GENERATOR = r"""
import sys, numpy as np
n, m, seed, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(seed)
# power-law out-degrees (Pareto), scaled to m links in total; ids scattered by a permutation
w = rng.pareto(1.2, n) + 1.0
deg = np.minimum(np.floor(w * (m / w.sum())), 100_000).astype(np.int64)
deg[rng.permutation(n)[:m - int(deg.sum())]] += 1
del w
indptr = np.zeros(n + 1, np.int64)
np.cumsum(deg, out=indptr[1:])
indptr.astype("<i8").tofile(out + "/indptr.bin")
perm = rng.permutation(n).astype(np.int32)
chunk = 1 << 22
with open(out + "/indices.bin", "wb") as f:
    for a in range(0, m, chunk):
        k = min(chunk, m - a)
        perm[(n * rng.random(k) ** 2.5).astype(np.int64)].astype("<i4").tofile(f)
print(int(indptr[-1]))
"""

RANKER = r"""
import json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[1])
from ranking.outofcore import rank_out_of_core
from ranking.slices import FileCsrSource, SliceStore
from ranking.sweep import SolverParams
work, budget, tol = Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
source = FileCsrSource(work / "indptr.bin", work / "indices.bin")
t0 = time.perf_counter()
store = SliceStore.build(source, work, budget)
build = time.perf_counter() - t0
def peak_rss_mb():  # VmHWM: ru_maxrss would carry the parent's peak over fork+exec
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
rss_build = peak_rss_mb()
xml = np.random.default_rng(3).integers(0, 10, source.n, dtype=np.uint8) == 0
def progress(p):
    if p.ranking == "interest":
        print(f"sweep {p.iteration} {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
res = rank_out_of_core(store, xml, SolverParams(tol=tol, max_iter=500), progress=progress)
print(json.dumps({"slice_build_seconds": build, "slices": res.slices,
                  "sweeps": res.importance.iterations,
                  "importance_residual": res.importance.residual,
                  "interest_residual": res.interest.residual,
                  "seconds_per_sweep": res.seconds_per_sweep,
                  "rank_seconds": res.importance.seconds,
                  "peak_rss_mb_after_build": rss_build,
                  "peak_rss_mb": peak_rss_mb()}))
"""


def bench_out_of_core(n: int, m: int, budget: int, in_memory_per_link: float,
                      work_root: Path | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="xyro-ooc-bench-", dir=work_root) as work:
        log(f"out of core: generating {n} pages / {m} links into {work}")
        t0 = time.perf_counter()
        gen = subprocess.run([sys.executable, "-c", GENERATOR, str(n), str(m), "11", work],
                             check=True, capture_output=True, text=True)
        gen_seconds = time.perf_counter() - t0
        links = int(gen.stdout.strip())
        log(f"generated in {gen_seconds:.1f}s; ranking under a {budget >> 20} MB budget")
        t0 = time.perf_counter()
        run = subprocess.run([sys.executable, "-c", RANKER, str(REPO), work, str(budget),
                              str(XYRO_TOL)], check=True, stdout=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
    got = json.loads(run.stdout)
    per_link = got["seconds_per_sweep"] / (2 * links)  # each sweep: both rankings
    return {
        "pages": n, "links": links, "budget_mb": budget >> 20,
        "generate_seconds": round(gen_seconds, 1), "wall_seconds": round(wall, 1),
        "slice_build_seconds": round(got["slice_build_seconds"], 1), "slices": got["slices"],
        "sweeps": got["sweeps"], "seconds_per_sweep": round(got["seconds_per_sweep"], 2),
        "rank_seconds": round(got["rank_seconds"], 1),
        "importance_residual": got["importance_residual"],
        "interest_residual": got["interest_residual"],
        "peak_rss_mb": round(got["peak_rss_mb"], 1),
        "peak_rss_mb_after_build": round(got["peak_rss_mb_after_build"], 1),
        "peak_rss_over_budget": round(got["peak_rss_mb"] / (budget >> 20), 3),
        "seconds_per_link_per_ranking": per_link,
        "time_per_link_vs_in_memory": round(per_link / in_memory_per_link, 2),
        "note": "one sweep = importance (paper variant) and interest in one scan; time per "
                "link is per ranking, against the in-memory Gauss-Seidel teleport sweep on "
                "the synthetic graph of this run",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--skip-out-of-core", action="store_true")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the out-of-core files go (1.6 GB + 1.6 GB of slices)")
    args = parser.parse_args()
    started = time.perf_counter()
    result: dict = {"benchmark": "pagerank", "quick": args.quick,
                    "machine": machine(numpy=np.__version__),
                    "params": {"damping": DAMPING, "dangling": "teleport",
                               "target_l1_error": TARGET_L1, "xyro_tol": XYRO_TOL,
                               "reference_tol": REFERENCE_TOL,
                               "omp_num_threads": os.environ["OMP_NUM_THREADS"]}}
    result["xyro_kernel_warmup_seconds"] = round(kernel_warmup_seconds(), 3)
    log(f"compiled kernels ready in {result['xyro_kernel_warmup_seconds']}s")
    graphs = {}
    if args.quick:
        n, m, repeats = 20_000, 200_000, 1
        ooc = (100_000, 1_000_000, 8 << 20)
    else:
        n, m, repeats = 5_000_000, 50_000_000, 3
        ooc = (20_000_000, 200_000_000, 1 << 30)
        if CNR.exists():
            with np.load(CNR) as z:
                graphs["cnr-2000"] = bench_graph("cnr-2000", z["src"], z["dst"], int(z["n"]),
                                                 repeats, True)
        else:
            graphs["cnr-2000"] = {"skipped": f"LAW cnr-2000 edge list not found at {CNR}"}
    src, dst = powerlaw_edges(n, int(m * 1.03), seed=1)  # ~3 % duplicates removed
    label = f"powerlaw-{n // 1000}k" if n < 10**6 else f"powerlaw-{n // 10**6}M"
    graphs[label] = bench_graph(label, src, dst, n, repeats, True if args.quick else
                                "networkx needs ~1 KB per link in Python objects (~50 GB "
                                "for 50M links): does not fit in 24 GB")
    del src, dst
    result["graphs"] = graphs
    if args.skip_out_of_core:
        result["out_of_core"] = {"skipped": "--skip-out-of-core"}
    else:
        per_link = graphs[label]["in_memory_seconds_per_link_per_sweep"]
        result["out_of_core"] = bench_out_of_core(*ooc, per_link, args.work_dir)
    result["peak_rss_mb_main_process"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
