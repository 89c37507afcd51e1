"""Benchmark: peak memory of the real ranking job (``xyro rank``) on a big SQLite store.

Builds a real metadata store (``MetadataStore.open`` for the schema and its migrations, then
direct ``executemany`` into ``urls`` and ``links`` in big transactions: much faster than
the crawl writer, same rows), by default 2,000,000 pages and 20,000,000 links with
power-law-ish destinations and 10 % XML pages, then runs ``xyro rank --json`` as a
subprocess, with ``--set ranking.memory_budget_mb=BUDGET``, and measures the child's peak
RSS exactly: ``os.wait4`` returns the kernel's ``ru_maxrss`` of that one child (a sampled
peak from psutil, every 50 ms, is reported beside it as a cross-check).

The store is built by a separate process (this script with ``--build``) so that the parent
stays small: a child's ``ru_maxrss`` also counts the memory it shared with its parent between
fork and exec, so a big parent would inflate the child's figure. The ranking kernel's numba
cache is warmed first by a tiny out-of-core ``xyro rank`` (a deployed daemon ranks with a
warm cache); ``--cold-kernel`` skips that and points numba at an empty cache instead.

Target (DESIGN.md §5, "a memory budget picks S"): ``peak_rss_over_budget`` <= 1.3.

    .venv/bin/python tests/bench/rank_job_memory.py                  # 2M pages, 20M links
    .venv/bin/python tests/bench/rank_job_memory.py --pages 20000 --links 200000 --budget-mb 64

Prints ONE JSON line on stdout (a top-level ``summary`` first); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmachine import machine  # noqa: E402  (a sibling script: tests/bench is sys.path[0])

TARGET = 1.3
HOSTS = 20_000
T0 = 1_767_225_600.0
ROWS_PER_TRANSACTION = 200_000


def log(message: str) -> None:
    print(f"[rank-memory-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


# ---- the store (built in its own process: ``--build``) -----------------------------------------

def out_degrees(rng: np.random.Generator, fetched: np.ndarray, links: int) -> np.ndarray:
    """Power-law-ish out-degrees of the fetched pages summing to exactly ``links`` (each at
    most the store's 65534 children)."""
    w = rng.pareto(1.5, len(fetched)) + 1.0
    deg = np.minimum(np.floor(w * (links / w.sum())), 65_534).astype(np.int64)
    short = links - int(deg.sum())
    while short > 0:  # hand out the remainder one link per page, below the cap
        room = np.flatnonzero(deg < 65_534)
        take = rng.choice(room, min(short, len(room)), replace=False)
        deg[take] += 1
        short -= len(take)
    return deg


def child_ids(rng: np.random.Generator, n: int, count: int, perm: np.ndarray) -> np.ndarray:
    """``count`` 1-based destinations, power-law-ish in-degrees (exponent ~1.4 on the
    density, as tests/bench/pagerank.py), scattered over the ids by ``perm``."""
    return perm[(n * rng.random(count) ** 2.5).astype(np.int64)] + 1


def url_rows(ids: np.ndarray, types: list[str]) -> list[tuple]:
    from metadata.urlkeys import url_hash
    rows = []
    for i, kind in zip(ids.tolist(), types):
        suffix = "xml" if kind == "xml" else "html"
        url = f"http://www.h{i % HOSTS}.example.org/section/{i // HOSTS}/page-{i}.{suffix}"
        fetched = kind != "unread"
        rows.append((i, url_hash(url), kind, i % HOSTS + 1, 1, url,
                     T0 if fetched else None, T0 if fetched else None, int(fetched),
                     200 if fetched else None))
    return rows


def build_store(path: Path, n: int, links: int, xml_share: float, unread_share: float,
                seed: int) -> dict:
    """A store of ``n`` pages and ``links`` links (fetched pages only have children)."""
    from metadata import MetadataStore
    MetadataStore.open(path).close()  # schema, migrations and views
    rng = np.random.default_rng(seed)
    draw = rng.random(n)
    types = np.where(draw < unread_share, "unread",
                     np.where(draw < unread_share + xml_share, "xml", "html"))
    fetched = np.flatnonzero(types != "unread")
    deg = out_degrees(rng, fetched, links)
    perm = rng.permutation(n)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO hosts (id, host) VALUES (?, ?)",
                     ((h + 1, f"www.h{h}.example.org") for h in range(min(HOSTS, n))))
    conn.execute("COMMIT")
    for a in range(0, n, ROWS_PER_TRANSACTION):
        b = min(n, a + ROWS_PER_TRANSACTION)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO urls (id, hash, type, host_id, depth, url, first_access, "
            "last_access, accesses, http_status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            url_rows(np.arange(a + 1, b + 1), types[a:b].tolist()))
        conn.execute("COMMIT")
    for a in range(0, len(fetched), ROWS_PER_TRANSACTION):
        src, d = fetched[a:a + ROWS_PER_TRANSACTION], deg[a:a + ROWS_PER_TRANSACTION]
        kids = child_ids(rng, n, int(d.sum()), perm).astype("<i4")
        cuts = np.concatenate([[0], np.cumsum(d)]).tolist()
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO links (src, n, children) VALUES (?, ?, ?)",
                         ((s + 1, k, kids[cuts[j]:cuts[j + 1]].tobytes())
                          for j, (s, k) in enumerate(zip(src.tolist(), d.tolist())) if k))
        conn.execute("COMMIT")
    conn.close()
    return {"pages": n, "links": int(deg.sum()), "xml_pages": int((types == "xml").sum()),
            "unread_pages": int((types == "unread").sum()),
            "pages_with_links": int((deg > 0).sum()),
            "file_mb": round(path.stat().st_size / 2**20, 1)}


# ---- the measured run ------------------------------------------------------------------------

class RssSampler:
    """Samples a process's RSS every ``period`` seconds (psutil), keeping the maximum."""

    def __init__(self, pid: int, period: float = 0.05) -> None:
        import psutil
        self._proc = psutil.Process(pid)
        self._period = period
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self._proc.memory_info().rss)
            except Exception:  # the child exited (or became a zombie): stop sampling
                return
            self._stop.wait(self._period)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def xyro_command(db: Path, budget_mb: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "xyro", "--set", f"storage.database={db}",
            "--set", f"storage.warehouse_dir={db.parent / 'warehouse'}",
            "--set", f"ranking.memory_budget_mb={budget_mb}", *args]


def run_measured(cmd: list[str], env: dict[str, str]) -> dict:
    """Run ``cmd``; its exit code, output, wall time and exact peak RSS (``os.wait4``)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=REPO)
        sampler = RssSampler(child.pid)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        sampled = sampler.stop()
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return {"returncode": child.returncode, "stdout": out.read(), "stderr": err.read(),
                "seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024,
                "sampled_peak_rss_mb": sampled / 2**20}


def warm_kernel(work: Path, env: dict[str, str]) -> float:
    """Compile (or load) the out-of-core kernels once, as a deployed daemon has them."""
    db = work / "warm" / "xyro.db"
    db.parent.mkdir()
    subprocess.run([sys.executable, __file__, "--build", str(db), "--pages", "3000",
                    "--links", "30000"], check=True, stdout=subprocess.DEVNULL, env=env)
    t0 = time.perf_counter()
    subprocess.run(xyro_command(db, 1, "rank", "--json", "--top", "0"), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    return time.perf_counter() - t0


def sweeps_of(stderr: str) -> int:
    """Sweeps as reported by the CLI's progress lines ("importance sweep K: ...")."""
    return sum(1 for line in stderr.splitlines() if line.startswith("importance sweep"))


def measure(args: argparse.Namespace, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if args.cold_kernel:
        env["NUMBA_CACHE_DIR"] = str(work / "numba-cold")
        warm = None
    else:
        log("warming the ranking kernel's cache with a tiny out-of-core run")
        warm = round(warm_kernel(work, env), 2)
    db = work / "store" / "xyro.db"
    db.parent.mkdir()
    log(f"building a store of {args.pages} pages and {args.links} links in {db}")
    t0 = time.perf_counter()
    built = subprocess.run([sys.executable, __file__, "--build", str(db), "--pages",
                            str(args.pages), "--links", str(args.links), "--xml-share",
                            str(args.xml_share), "--seed", str(args.seed)],
                           check=True, stdout=subprocess.PIPE, text=True, env=env)
    store = json.loads(built.stdout) | {"build_seconds": round(time.perf_counter() - t0, 1)}
    log(f"store built in {store['build_seconds']} s ({store['file_mb']} MB); ranking under "
        f"a {args.budget_mb} MB budget")
    run = run_measured(xyro_command(db, args.budget_mb, "rank", "--json", "--top", "3"), env)
    if run["returncode"] != 0:
        raise SystemExit(f"xyro rank failed ({run['returncode']}):\n{run['stderr'][-3000:]}")
    report = json.loads(run["stdout"])
    peak = run["peak_rss_mb"]
    summary = {
        "links": store["links"], "budget_mb": args.budget_mb, "peak_rss_mb": round(peak, 1),
        "peak_rss_over_budget": round(peak / args.budget_mb, 3), "target": TARGET,
        "within_target": peak / args.budget_mb <= TARGET,
        "pages": store["pages"], "seconds": round(run["seconds"], 1),
        "rank_seconds": report["seconds"], "out_of_core": report["out_of_core"],
        "slices": report["slices"], "sweeps": report["importance_iterations"],
    }
    log(f"summary: {summary}")
    return {"summary": summary, "benchmark": "rank_job_memory",
            "machine": machine(),
            "params": {"pages": args.pages, "links": args.links, "budget_mb": args.budget_mb,
                       "xml_share": args.xml_share, "seed": args.seed,
                       "kernel_cache": "cold" if args.cold_kernel else "warm",
                       "sqlite": sqlite3.sqlite_version, "numpy": np.__version__},
            "store": store,
            "rank": {"wall_seconds": round(run["seconds"], 2),
                     "peak_rss_mb_ru_maxrss": round(peak, 1),
                     "peak_rss_mb_sampled": round(run["sampled_peak_rss_mb"], 1),
                     "sweeps_reported": sweeps_of(run["stderr"]),
                     "kernel_warmup_seconds": warm,
                     "report": {k: v for k, v in report.items() if not k.startswith("top_")}},
            "bench_process_peak_rss_mb": round(_self_peak_mb(), 1)}


def _self_peak_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2_000_000)
    parser.add_argument("--links", type=int, default=20_000_000)
    parser.add_argument("--budget-mb", type=int, default=512)
    parser.add_argument("--xml-share", type=float, default=0.1)
    parser.add_argument("--unread-share", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--cold-kernel", action="store_true",
                        help="rank with an empty numba cache (the kernel compiles in the run)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the store goes (about 45 bytes per link, plus slices)")
    parser.add_argument("--build", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        print(json.dumps(build_store(args.build, args.pages, args.links, args.xml_share,
                                     args.unread_share, args.seed)))
        return
    if not (args.pages > 0 and args.links >= 0 and args.budget_mb > 0):
        parser.error("--pages and --budget-mb must be positive, --links non-negative")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="xyro-rank-mem-", dir=args.work_dir) as work:
        result = measure(args, Path(work))
    result["seconds"] = round(time.perf_counter() - started, 1)
    assert math.isfinite(result["summary"]["peak_rss_over_budget"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
