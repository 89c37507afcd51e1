"""Crawl throughput: Xyro against Scrapy over the same synthetic web (DESIGN.md §7 politeness on).

    .venv/bin/python tests/bench/crawl_throughput.py [--quick] [--hosts 50] [--pages 20000]
        [--budget N] [--workers 64] [--profile FILE]

One synthetic web (``python -m xyro.synthweb``, no hostile pages, no Crawl-delay lines) is
served by a child process; then, one after the other and each in its own child process with
fresh state, the two crawlers crawl it from the web's seeds (the home page of every host)
until the same page budget:

* ``xyro``: ``run_crawl`` on a fresh SQLite store (metadata writes on), politeness delay 0,
  robots.txt obeyed, one request in flight per host, ``--workers`` fetch threads;
* ``xyro_opic_off`` and ``xyro_focus_off``: the same Xyro run with OPIC off
  (``ranking.opic.enabled=false``: discovery first-in first-out per host) and with OPIC on but
  no focus (``ranking.opic.focus.boost=0``), for OPIC's cost in throughput and focus's gain in
  XML documents per 1,000 fetches, measured in the same run;
* ``xyro_fsync_off``: the default with ``storage.fsync=false`` (new warehouse blobs not
  flushed to disk before their rows commit), for the cost of durable writes
  (``fsync_throughput_cost_pct``);
* ``scrapy``: tests/bench/scrapy_peer.py, a CrawlSpider whose LinkExtractors look at the
  same tags as Xyro (a, area, frame, iframe, link rel=alternate), ``ROBOTSTXT_OBEY``,
  ``CONCURRENT_REQUESTS_PER_DOMAIN=1``, no delay, no AutoThrottle, no cache.

Both crawler processes are pinned to one CPU (``--crawler-cpu``, default 0; the web server
is not), as ``crawler.cpus`` does for the daemon: Xyro's GIL-bound threads hand over the
interpreter far more cheaply on one core (measured: 820 against 480 pages/s unpinned), and
Scrapy, single-threaded, gets the same core.

``steady_pages_per_s``: the same crawl's rate as the web's log saw page requests arrive,
after its first 10 % of pages: what a long-running daemon keeps, without the one-time costs
of a process start and stop (imports, every host's robots.txt, OPIC's compiled kernels
loading, the last metadata batch and OPIC's final checkpoint). OPIC's cost is given on both
(``opic_throughput_cost_pct``, ``opic_steady_throughput_cost_pct``) and in CPU per page.
Each Xyro variant runs ``--rounds`` times, interleaved, and its fastest run is reported
(with every run's figures): run-to-run spread on this shared machine is ±5–10 %; OPIC's
cost is also given from the variants' median runs (``opic_median_throughput_cost_pct``).

Each crawler measures itself (``getrusage(RUSAGE_SELF)``: user+sys CPU of the crawl,
``ru_maxrss``) so the web server's CPU is never counted. Xyro's wall time and CPU run from
the crawl's start, once its components are built (``startup_s`` before it: the store
opened, OPIC's compiled kernels loaded), to the page budget, the writer's last batch and
OPIC's final checkpoint. Pages = page fetches answered by the web (robots.txt excluded);
``ok_pages`` = those that became HTML/XML records.

``server_log``: what the web's own request log says each crawler (told apart by its
User-Agent) did, against the rules of DESIGN.md §7 that apply with no delay: robots.txt
before anything else on a host, no URL it disallows, one request in flight per host (no
request handled before the previous one to its host was answered). Prints ONE JSON line on
stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])
from xyro.synthweb.log import RequestLog, RequestRecord
from xyro.synthweb.model import WebModel, build_model, is_disallowed
from xyro.synthweb.spec import WebSpec

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRAPY_PEER = HERE / "scrapy_peer.py"
XML_SHARE = 0.3
#: How each crawler's requests are told apart in the web's log (their User-Agent prefixes).
AGENTS = {"xyro": "Xyro/", "scrapy": "ScrapyPeer/", "xyro_opic_off": "XyroOpicOff/",
          "xyro_focus_off": "XyroFocusOff/", "xyro_fsync_off": "XyroFsyncOff/",
          "warmup": "XyroWarmup/"}
#: Xyro variants run beside the default (OPIC on, focus on), with these overrides (their
#: own User-Agent, so the web's log tells the runs apart; robots.txt rules are for *).
VARIANTS = {"xyro_opic_off": ("ranking.opic.enabled=false",),
            "xyro_focus_off": ("ranking.opic.focus.boost=0",),
            "xyro_fsync_off": ("storage.fsync=false",)}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the web -------------------------------------------------------------------------------

class WebProcess:
    """``python -m xyro.synthweb`` in a child process; its seeds are read from its stdout.
    It writes its request log to ``log_path`` when it stops."""

    def __init__(self, hosts: int, pages: int, seed: int, log_path: Path) -> None:
        cmd = [sys.executable, "-m", "xyro.synthweb", "--hosts", str(hosts), "--pages",
               str(pages), "--seed", str(seed), "--xml-share", str(XML_SHARE),
               "--no-hostile", "--no-crawl-delay", "--log", str(log_path)]
        # The same web as the child's (the model is deterministic from the spec): the ground
        # truth the request log is checked against.
        self.model = build_model(WebSpec(seed=seed, n_hosts=hosts, n_pages=pages,
                                         xml_share=XML_SHARE, hostile=frozenset(),
                                         crawl_delay_share=0.0))
        self.log_path = log_path
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        self.seeds = [self.proc.stdout.readline().strip() for _ in range(hosts)]
        if not all(s.startswith("http://") for s in self.seeds):
            self.close()
            raise RuntimeError(f"synthetic web did not print {hosts} seed URLs: {self.seeds[:3]}")

    def cpu_s(self) -> float:
        """User+sys CPU seconds the web process used so far (from /proc, Linux)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def records(self) -> list[RequestRecord]:
        """The request log the web wrote on stopping (after :meth:`close`)."""
        return RequestLog.load_jsonl(self.log_path) if self.log_path.exists() else []


# -- the web's own account -------------------------------------------------------------------

def audit_log(records: list[RequestRecord], model: WebModel, agent: str) -> dict[str, int]:
    """What the request log says the crawler with User-Agent prefix ``agent`` did."""
    mine = [r for r in records if (r.user_agent or "").startswith(agent)]
    by_host: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in mine:
        by_host[r.host].append(r)
    disallow = {h.address: h.disallow for h in model.hosts}
    pages = [r for r in mine if r.target != "/robots.txt"]
    return {
        "requests": len(mine), "page_requests": len(pages), "hosts": len(by_host),
        "robots_requests": len(mine) - len(pages),
        "hosts_robots_not_first": sum(min(rs, key=lambda r: r.arrived).target != "/robots.txt"
                                      for rs in by_host.values()),
        "disallowed_fetched": sum(is_disallowed(r.target.split("?", 1)[0], disallow[r.host])
                                  for r in pages),
        "overlapping_requests": sum(_overlaps(rs) for rs in by_host.values()),
    }


def steady_pages_per_s(records: list[RequestRecord], agent: str, skip: float = 0.1) -> float:
    """Page requests per real second as the web saw them arrive, after the crawl's first
    ``skip`` share of pages: the rate a long-running crawl keeps, without the one-time costs
    of a start (imports, robots.txt of every host, OPIC's compiled kernels loading) and of a
    stop (the writer's last batch, OPIC's final checkpoint)."""
    starts = sorted(r.start for r in records if (r.user_agent or "").startswith(agent)
                    and r.target != "/robots.txt")
    steady = starts[int(len(starts) * skip):]
    span = steady[-1] - steady[0] if len(steady) > 1 else 0.0
    return round((len(steady) - 1) / span, 1) if span > 0 else 0.0


def _overlaps(records: list[RequestRecord]) -> int:
    """Requests handled before the previous one to the same host was answered. A reply's
    end is stamped before its one write, so a crawler that waits for it cannot score."""
    spans = sorted((r.start, math.inf if r.end is None else r.end) for r in records)
    return sum(b[0] < a[1] for a, b in zip(spans, spans[1:]))


# -- the Xyro child ------------------------------------------------------------------------

def xyro_child(seeds_file: Path, state_dir: Path, budget: int, workers: int,
               extra: list[str]) -> dict[str, Any]:
    """Crawl the web with Xyro in this process; returns the measured figures."""
    from xyro.app import App
    from xyro.clock import WallClock
    from xyro.config_load import load_config
    from xyro.service.crawl_run import run_crawl

    seeds = seeds_file.read_text().split()
    overrides = [
        f"seeds={json.dumps(seeds)}",
        "scope.allow_private_addresses=true",
        "crawler.politeness.delay_s=0",
        f"crawler.workers={workers}",
        f"storage.database={state_dir / 'xyro.db'}",
        f"storage.warehouse_dir={state_dir / 'warehouse'}",
        *extra,
    ]
    app = App(load_config(None, {}, overrides), WallClock())
    with app.open_store(create=True):
        pass
    built: list[tuple[float, resource.struct_rusage]] = []

    def parts_built(_parts: object) -> None:  # the crawl starts: every component is built
        built.append((time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)))

    t_start = time.perf_counter()
    summary = run_crawl(app, max_pages=budget, customize=parts_built)
    seconds_end = time.perf_counter()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    t0, ru0 = built[0]
    seconds = seconds_end - t0
    stats = summary.stats
    by_type = stats.get("by_type", {})
    errors = stats.get("errors_by_kind", {})
    refused_robots = errors.get("robots", 0)
    # Records of URLs robots.txt forbade were no fetch; an XML document still waiting for
    # its DTD when the budget ran out was fetched but is not a record yet (it stays pending).
    pages = stats["pages"] - refused_robots + stats.get("loader_pending", 0)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    out = {
        "pages": pages, "ok_pages": by_type.get("html", 0) + by_type.get("xml", 0)
        + by_type.get("dtd", 0),
        "html_pages": by_type.get("html", 0), "xml_pages": by_type.get("xml", 0),
        "robots_fetches": stats.get("robots_fetches", 0),
        "errors_by_kind": {k: v for k, v in errors.items() if k != "robots"},
        "disallowed_not_fetched": refused_robots,
        "startup_s": round(t0 - t_start, 3),
        "seconds": round(seconds, 3), "pages_per_s": round(pages / seconds, 1),
        "cpu_s": round(cpu, 3), "cpu_ms_per_page": round(1000 * cpu / max(pages, 1), 3),
        "peak_rss_mb": round(ru1.ru_maxrss / 1024, 1),
        "workers": workers, "stop_reason": summary.stop_reason,
    }
    return out


# -- the parent ----------------------------------------------------------------------------

def run_plan(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(crawler, run label) in order. The web's server warms up over its first crawl (its
    CPU per page falls from 0.26 to 0.11 ms over three runs), so a first run is slower
    whoever makes it: a warm-up Xyro run goes first (discarded, except with --quick), then
    ``--rounds`` rounds of the Xyro variants, then Scrapy."""
    names = [n for n in ("xyro", *VARIANTS)
             if (not args.only or args.only == n) and not (args.no_variants and n != "xyro")]
    plan: list[tuple[str, str]] = []
    if names and not args.quick:
        plan.append(("warmup", "warmup"))
    for r in range(args.rounds if names else 0):
        plan += [(n, n if r == 0 else f"{n}_r{r + 1}") for n in names]
    if not args.only or args.only == "scrapy":
        plan.append(("scrapy", "scrapy"))
    return plan


def best_run(results: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The fastest of a variant's runs, with every run's pages/s beside it."""
    best = dict(max((r for _, r in results), key=lambda r: r["pages_per_s"]))
    if len(results) > 1:
        best["runs_pages_per_s"] = [r["pages_per_s"] for _, r in results]
        best["runs_steady_pages_per_s"] = [r.get("steady_pages_per_s") for _, r in results]
        best["steady_pages_per_s"] = max(r.get("steady_pages_per_s", 0.0) for _, r in results)
    return best


def _opic_ratios(report: dict[str, Any]) -> None:
    """OPIC's cost (throughput against OPIC off) and focus's gain (XML documents per 1,000
    fetches against focus off), from the runs of this invocation."""
    x = report.get("xyro")
    if x is None:
        return
    for run in (r for name, r in report.items() if name.startswith("xyro")):
        run["xml_docs_per_1000_fetches"] = round(1000 * run["xml_pages"] / max(run["pages"], 1), 1)
    off = report.get("xyro_opic_off")
    if off is not None:
        x["ratio_pages_per_s_vs_opic_off"] = round(x["pages_per_s"] / off["pages_per_s"], 3)
        x["opic_cpu_cost_pct"] = round(100 * (x["cpu_ms_per_page"] / off["cpu_ms_per_page"]
                                              - 1), 1)
        x["opic_throughput_cost_pct"] = round(100 * (1 - x["pages_per_s"] / off["pages_per_s"]), 1)
        x["opic_steady_throughput_cost_pct"] = round(
            100 * (1 - x["steady_pages_per_s"] / max(off["steady_pages_per_s"], 0.1)), 1)
        if "runs_pages_per_s" in x and "runs_pages_per_s" in off:
            # Beside the fastest runs' ratio: the medians', which one lucky run cannot move.
            x["opic_median_throughput_cost_pct"] = round(100 * (
                1 - statistics.median(x["runs_pages_per_s"])
                / statistics.median(off["runs_pages_per_s"])), 1)
    no_fsync = report.get("xyro_fsync_off")
    if no_fsync is not None:   # the warehouse's durable writes (storage.fsync, the default)
        x["fsync_throughput_cost_pct"] = round(
            100 * (1 - x["pages_per_s"] / no_fsync["pages_per_s"]), 1)
        x["fsync_steady_throughput_cost_pct"] = round(
            100 * (1 - x["steady_pages_per_s"] / max(no_fsync["steady_pages_per_s"], 0.1)), 1)
    no_focus = report.get("xyro_focus_off")
    if no_focus is not None:
        x["ratio_xml_docs_vs_focus_off"] = round(
            x["xml_docs_per_1000_fetches"] / max(no_focus["xml_docs_per_1000_fetches"], 0.1), 3)


def run_child(cmd: list[str], name: str, cpu: int) -> dict[str, Any]:
    log(f"{name}: {' '.join(cmd[1:])}")
    pin = None if cpu < 0 else (lambda: os.sched_setaffinity(0, {cpu}))
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800,
                         preexec_fn=pin)
    if run.returncode != 0:
        raise RuntimeError(f"{name} child failed (exit {run.returncode}):\n{run.stderr[-4000:]}")
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{name} child printed no JSON line:\n{run.stdout[-2000:]}\n"
                           f"{run.stderr[-2000:]}")
    result = json.loads(lines[-1])
    log(f"{name}: {result['pages']} pages in {result['seconds']} s = {result['pages_per_s']} "
        f"pages/s, {result['cpu_ms_per_page']} ms CPU/page, {result['peak_rss_mb']} MB peak")
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small smoke run (8 hosts, 600 pages)")
    p.add_argument("--hosts", type=int, default=None, help="web hosts (default 50)")
    p.add_argument("--pages", type=int, default=None, help="web pages (default 20000)")
    p.add_argument("--budget", type=int, default=None,
                   help="pages each crawler fetches (default: 15000, quick 300)")
    p.add_argument("--workers", type=int, default=64, help="Xyro fetch threads (default 64)")
    p.add_argument("--crawler-cpu", type=int, default=0,
                   help="CPU both crawlers are pinned to (default 0; -1: not pinned)")
    p.add_argument("--scrapy-concurrency", type=int, default=64)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--only", choices=("xyro", *VARIANTS, "scrapy"),
                   help="run one crawler only")
    p.add_argument("--no-variants", action="store_true",
                   help="skip the OPIC-off and focus-off Xyro runs")
    p.add_argument("--rounds", type=int, default=None,
                   help="runs of each Xyro variant, the fastest reported (default 3; 1 --quick)")
    p.add_argument("--profile", type=Path,
                   help="run the Xyro child under py-spy (installed by hand, not a project "
                        "dependency) and write its raw (collapsed) stacks here")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Xyro config override (repeatable), e.g. crawler.workers=16")
    p.add_argument("--child", choices=("xyro",), help=argparse.SUPPRESS)
    p.add_argument("--seeds-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--state-dir", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hosts = args.hosts or (8 if args.quick else 50)
    pages = args.pages or (600 if args.quick else 20_000)
    budget = args.budget or (300 if args.quick else 15_000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.child == "xyro":
        print(json.dumps(xyro_child(args.seeds_file, args.state_dir, budget, args.workers,
                                    args.set)))
        return 0
    log(f"serving a synthetic web of {hosts} hosts, {pages} pages (seed {args.seed})")
    report: dict[str, Any] = {}
    runs: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="xyro-crawlbench-") as tmp:
        web = WebProcess(hosts, pages, args.seed, Path(tmp) / "requests.jsonl")
        try:
            seeds_file = Path(tmp) / "seeds.txt"
            seeds_file.write_text("\n".join(web.seeds) + "\n")
            agents: dict[str, str] = {}  # run label -> its User-Agent prefix
            for name, label in run_plan(args):
                state = Path(tmp) / label
                state.mkdir()
                if name != "scrapy":
                    # Each run its own User-Agent (round 2 of Xyro: XyroR2/), for the audit.
                    agent = AGENTS[name] if label == name else \
                        AGENTS[name].rstrip("/") + label.rsplit("_", 1)[1].upper() + "/"
                    agents[label] = agent
                    cmd = [sys.executable, __file__, "--child", "xyro", "--seeds-file",
                           str(seeds_file), "--state-dir", str(state), "--budget", str(budget),
                           "--workers", str(args.workers)]
                    sets = [*args.set, *VARIANTS.get(name, ())]
                    sets = [kv for kv in sets if not kv.startswith("crawler.user_agent=")]
                    sets.append(f"crawler.user_agent={agent}0.1")
                    cmd += [f"--set={kv}" for kv in sets]
                    if args.profile:
                        cmd = [str(Path(sys.executable).parent / "py-spy"), "record",
                               "--format", "raw", "--rate", "250", "--gil",
                               "--threads", "-o", str(args.profile), "--", *cmd]
                else:
                    agents[label] = AGENTS[name]
                    cmd = [sys.executable, str(SCRAPY_PEER), "--seeds-file", str(seeds_file),
                           "--budget", str(budget), "--concurrency",
                           str(args.scrapy_concurrency), "--state-dir", str(state)]
                web_cpu0 = web.cpu_s()
                result = run_child(cmd, label, args.crawler_cpu)
                web_cpu = web.cpu_s() - web_cpu0
                result["web_server_cpu_ms_per_page"] = round(
                    1000 * web_cpu / max(result["pages"], 1), 3)
                runs.setdefault(name, []).append((label, result))
        finally:
            web.close()
        records = web.records()
        for name, results in runs.items():
            for label, result in results:
                result["server_log"] = audit_log(records, web.model, agents[label])
                result["steady_pages_per_s"] = steady_pages_per_s(records, agents[label])
            report[name] = best_run(results)
    report.pop("warmup", None)
    _opic_ratios(report)
    if "xyro" in report and "scrapy" in report:
        x, s = report["xyro"], report["scrapy"]
        x["ratio_pages_per_s_vs_scrapy"] = round(x["pages_per_s"] / s["pages_per_s"], 3)
        x["ratio_cpu_per_page_vs_scrapy"] = round(x["cpu_ms_per_page"] / s["cpu_ms_per_page"], 3)
    report["setup"] = {
        "web_hosts": hosts, "web_pages": pages, "web_seed": args.seed, "page_budget": budget,
        "hostile_pages": False, "crawl_delay_lines": False, "politeness_delay_s": 0.0,
        "one_request_per_host": True, "robots_obeyed": True, "metadata_writes": True,
        "crawler_cpu": "any" if args.crawler_cpu < 0 else args.crawler_cpu,
        "xyro_workers": args.workers, "xyro_overrides": args.set, "xyro_rounds": args.rounds,
        "warmup_run": not args.quick, "scrapy_concurrent_requests": args.scrapy_concurrency,
        "web_server": "python -m xyro.synthweb, separate process (threaded http.server)",
        "target": {"xyro_pages_per_s": 400, "ratio_vs_scrapy": 2.0},
    }
    report["machine"] = machine()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
