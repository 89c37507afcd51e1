"""Cluster ranking benchmark: the sliced out-of-core sweep on a Dask ``LocalCluster`` of 2
workers against the one-host out-of-core sweep, same graph, same slices.

Run: ``.venv/bin/python tests/bench/cluster_rank.py [--quick] [--work-dir DIR]`` (heavy:
about 5 GB of files under a temporary folder it deletes; run it under ``nice -n 10``).
Prints ONE JSON line on stdout; progress goes to stderr.

What is measured:
- the graph: the 20M-page / 200M-link power-law graph of ``pagerank.py`` (its generator,
  in a subprocess, chunk by chunk into files; ``--quick``: 50k pages / 500k links);
- one ``LocalCluster`` of 2 worker processes, 1 thread each, on 127.0.0.1; each worker
  thread gets the budget the one-host run gets (1 GB; ``--quick``: 64 MB, which the idle
  worker process alone exceeds: the quick run checks the plumbing, not the memory);
- the slices: cut once, in the benchmark's process, under what the budget leaves on the
  workers (``ClusterSession.slice_budget``: the largest worker's resident set and the
  kernel counted), and used by both runs;
- one host: ``ranking.outofcore.rank_out_of_core`` in a subprocess of its own (sweeps,
  seconds per sweep as the median time between two sweeps' ends, peak RSS);
- the cluster: ``xyro.jobs.rank_cluster.ClusterSession.rank`` (block Jacobi across the two
  workers, Gauss-Seidel inside each block): sweeps, seconds per sweep (median wall time of a
  sweep seen by the driver), the longest task of each sweep (the rest is Dask's
  scheduling and the driver), bytes of files read and written per sweep (the gathered
  vectors, the slices, the block's pages), each worker's peak RSS (VmHWM) against its
  budget, and the L1 distance between the two answers (importance; interest, both scaled
  to sum 1);
- costs for the README's model: seconds per link per sweep (both rankings) on one host and
  inside a cluster task, seconds per byte for a worker to read the gathered vectors, and
  the engine's fixed cost per sweep.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from benchmachine import machine  # noqa: E402  (a sibling script: tests/bench is sys.path[0])
from pagerank import GENERATOR, XYRO_TOL  # noqa: E402  (the 20M / 200M graph's generator)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ranking.blocks import Scratch  # noqa: E402
from ranking.slices import FileCsrSource, SliceStore  # noqa: E402
from ranking.sweep import SolverParams  # noqa: E402
from xyro.jobs.rank_cluster import ClusterSession, load_distributed, open_cluster  # noqa: E402
from xyro.jobs.rank_job import RankParams  # noqa: E402

WORKERS = 2
TARGET_SWEEP_RATIO = 1.5
MAX_ITER = 500

ONE_HOST = r"""
import json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[1])
from ranking.outofcore import rank_out_of_core
from ranking.slices import SliceStore
from ranking.sweep import SolverParams
work, tol, max_iter = Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
meta = json.loads((work / "store.json").read_text())
store = SliceStore(Path(meta["directory"]), meta["n"], meta["m"],
                   np.asarray(meta["bounds"], dtype=np.int64))
xml = np.fromfile(work / "xml.bin", dtype="?")
ends = []
def progress(p):
    if p.ranking == "interest":
        ends.append(time.perf_counter())
        print(f"one host: sweep {p.iteration} residual {p.residual:.2e}", file=sys.stderr,
              flush=True)
res = rank_out_of_core(store, xml, SolverParams(tol=tol, max_iter=max_iter),
                       progress=progress)
res.importance.values.tofile(work / "one-importance.bin")
res.interest.values.tofile(work / "one-interest.bin")
def peak_rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
print(json.dumps({"sweeps": res.importance.iterations,
                  "importance_residual": res.importance.residual,
                  "interest_residual": res.interest.residual,
                  "seconds": res.importance.seconds,
                  "sweep_seconds": [b - a for a, b in zip(ends[:-1], ends[1:])],
                  "peak_rss": peak_rss()}))
"""


def log(message: str) -> None:
    print(f"[cluster-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


def l1_sum_one(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a / a.sum() - b / b.sum()).sum())


def _read_vectors(path_scaled: str, path_interest: str, n: int) -> float:
    """On a worker: seconds to read the two gathered vectors (what a block task reads)."""
    scratch = Scratch()
    t0 = time.perf_counter()
    scratch.read("bench-a", Path(path_scaled), "<f8", 0, n)
    scratch.read("bench-b", Path(path_interest), "<f8", 0, n)
    seconds = time.perf_counter() - t0
    Scratch.release()
    return seconds


def vector_read_seconds(session: ClusterSession, work: Path, n: int) -> float:
    """Median over a few reads, on one worker, of the two vectors (files written here)."""
    paths = []
    for name in ("a", "b"):
        path = work / f"vector-{name}.bin"
        np.random.default_rng(0).random(n).tofile(path)
        paths.append(str(path))
    times = [session.client.submit(_read_vectors, *paths, n, pure=False).result()
             for _ in range(5)]
    for path in paths:
        os.unlink(path)
    return statistics.median(times)


def run(args: argparse.Namespace) -> dict:
    distributed = load_distributed()
    n, m, budget = ((50_000, 500_000, 64 << 20) if args.quick
                    else (20_000_000, 200_000_000, 1 << 30))
    tol = 1e-6 if args.quick else XYRO_TOL
    result: dict = {"benchmark": "cluster_rank", "quick": args.quick,
                    "machine": machine(numpy=np.__version__,
                                       distributed=distributed.__version__)}
    with tempfile.TemporaryDirectory(prefix="xyro-cluster-bench-", dir=args.work_dir) as tmp:
        work = Path(tmp)
        log(f"generating {n} pages / {m} links into {work}")
        t0 = time.perf_counter()
        gen = subprocess.run([sys.executable, "-c", GENERATOR, str(n), str(m), "11", tmp],
                             check=True, capture_output=True, text=True)
        links = int(gen.stdout.strip())
        generate_seconds = time.perf_counter() - t0
        source = FileCsrSource(work / "indptr.bin", work / "indices.bin")
        xml = np.random.default_rng(3).integers(0, 10, n, dtype=np.uint8) == 0
        xml.tofile(work / "xml.bin")
        log(f"generated in {generate_seconds:.0f} s; starting {WORKERS} workers")
        with distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=1,
                                      processes=True, host="127.0.0.1",
                                      dashboard_address=None,
                                      worker_dashboard_address=None,
                                      memory_limit=None, local_directory=tmp,
                                      silence_logs=logging.ERROR) as cluster, \
                open_cluster(cluster.scheduler_address, 30.0, required=True) as session:
            assert session is not None
            slice_budget = session.slice_budget(budget, source.n, source.m)
            t0 = time.perf_counter()
            store = SliceStore.build(source, work, slice_budget)
            build_seconds = time.perf_counter() - t0
            os.unlink(source.indices_path)  # 4 bytes a link: the slices hold them now
            (work / "store.json").write_text(json.dumps({
                "directory": str(store.directory), "n": store.n, "m": store.m,
                "bounds": store.bounds.tolist()}))
            log(f"{store.count} slices in {build_seconds:.0f} s (slice budget "
                f"{slice_budget >> 20} MB); one host")
            one = json.loads(subprocess.run(
                [sys.executable, "-c", ONE_HOST, str(REPO), tmp, str(tol), str(MAX_ITER)],
                check=True, stdout=subprocess.PIPE, text=True).stdout)
            log(f"one host: {one['sweeps']} sweeps, "
                f"{statistics.median(one['sweep_seconds']):.2f} s a sweep; the cluster")
            ends: list[float] = []

            def progress(p: object) -> None:
                if getattr(p, "ranking") == "interest":
                    ends.append(time.perf_counter())
                    log(f"cluster: sweep {getattr(p, 'iteration')} residual "
                        f"{getattr(p, 'residual'):.2e}")
            t0 = time.perf_counter()
            report = session.rank(store, xml, RankParams(
                solver=SolverParams(tol=tol, max_iter=MAX_ITER)), progress)
            cluster_seconds = time.perf_counter() - t0
            last, peaks = session.last, session.peak_rss
            read_seconds = vector_read_seconds(session, work, n)
            assert last is not None
            block_links = [sum(store.link_count(k) for k in range(a, b)) // 2
                           for a, b in last.blocks]
        one_importance = np.fromfile(work / "one-importance.bin")
        one_interest = np.fromfile(work / "one-interest.bin")
        l1_importance = l1_sum_one(report.importance, one_importance)
        l1_interest = l1_sum_one(report.interest, one_interest)
    one_sweep = statistics.median(one["sweep_seconds"])
    cluster_sweep = statistics.median(last.sweep_seconds)
    longest_task = statistics.median(last.task_seconds)
    per_worker = [round(peaks[pid] / budget, 3) for pid in sorted(peaks)]
    result["summary"] = {
        "workers": WORKERS,
        "links": links,
        "sweep_seconds_cluster_over_one_host": round(cluster_sweep / one_sweep, 3),
        "l1_cluster_vs_one_host": l1_importance,
        "peak_rss_over_budget_per_worker": per_worker,
        "target_sweep_ratio": TARGET_SWEEP_RATIO,
        "sweep_ratio_within_target": cluster_sweep / one_sweep <= TARGET_SWEEP_RATIO,
        "peak_rss_within_budget": max(per_worker) <= 1.0,
        "sweeps_one_host": one["sweeps"],
        "sweeps_cluster": report.importance_iterations,
        "l1_interest_cluster_vs_one_host": l1_interest,
    }
    result["graph"] = {"pages": n, "links": links, "generate_seconds": round(generate_seconds),
                       "generator": "tests/bench/pagerank.py GENERATOR, seed 11",
                       "xml_share": 0.1}
    result["slices"] = {"count": store.count, "budget_mb_per_worker": budget >> 20,
                        "slice_budget_mb": slice_budget >> 20,
                        "build_seconds": round(build_seconds, 1),
                        "note": "cut once under what the budget leaves on the workers "
                                "(their resident set and the kernel counted), at least 4 "
                                "per worker; both runs sweep these same slices"}
    result["one_host"] = {
        "sweeps": one["sweeps"], "seconds_per_sweep": round(one_sweep, 3),
        "rank_seconds": round(one["seconds"], 1),
        "importance_residual": one["importance_residual"],
        "interest_residual": one["interest_residual"],
        "peak_rss_mb": round(one["peak_rss"] / 2**20, 1),
        "peak_rss_over_budget": round(one["peak_rss"] / budget, 3)}
    result["cluster"] = {
        "workers": WORKERS, "threads_per_worker": 1, "blocks": [list(b) for b in last.blocks],
        "links_per_block": block_links,
        "sweeps": report.importance_iterations,
        "seconds_per_sweep": round(cluster_sweep, 3),
        "longest_task_seconds_per_sweep": round(longest_task, 3),
        "engine_seconds_per_sweep": round(cluster_sweep - longest_task, 3),
        "rank_seconds": round(cluster_seconds, 1),
        "importance_residual": report.importance_residuals[-1],
        "interest_residual": report.interest_residuals[-1],
        "bytes_read_per_sweep": int(statistics.median(last.bytes_read)),
        "bytes_written_per_sweep": int(statistics.median(last.bytes_written)),
        "vector_bytes_read_per_sweep": WORKERS * 16 * n,
        "peak_rss_mb_per_worker": [round(peaks[pid] / 2**20, 1) for pid in sorted(peaks)],
        "note": "bytes are files in the shared directory (page cache on this machine); "
                "Dask itself moves only the task descriptions and step norms (a few KB a "
                "sweep)"}
    result["costs"] = {
        "one_host_seconds_per_link_per_sweep": one_sweep / links,
        "cluster_task_seconds_per_link_per_sweep": longest_task / max(block_links),
        "worker_seconds_per_vector_byte": read_seconds / (16 * n),
        "vector_read_seconds_per_worker": round(read_seconds, 3),
        "engine_seconds_per_sweep": round(cluster_sweep - longest_task, 3),
        "note": "per link = per link of the graph and per sweep, both rankings (a link is "
                "read once as an in-link and once as an out-link)"}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the files go (full run: about 5 GB; removed after)")
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
