"""End to end: does ``xyro run`` keep its warehouse fresh? (003 §2, §6; DESIGN.md §6)

    .venv/bin/python tests/bench/e2e_freshness.py [--quick] [--pages 20000] [--hosts 50]
        [--units 60] [--speed 600] [--policies planner,uniform,change_proportional]
        [--weights importance|rank] [--keep DIR [--rescore]]

One synthetic web (``python -m xyro.synthweb``, no hostile pages: power-law in-links,
change rates Gamma-distributed over more than three decades, a fifth of the pages static,
half the hosts with reliable Last-Modified dates) is served on 127.0.0.x with an
accelerated clock; the daemon (``xyro run`` as a subprocess, on the same time line:
``--speed --epoch --sim-start``) crawls it from its home pages for ``--units`` time units of
one simulated hour at G = 10 % of the pages per unit (``refresh.bandwidth_pages_per_unit``,
the unit budget of ``xyro.crawl.unit_budget``; ``--discovery-share`` ρ, default 0.5 so that
the web is found within the first third of the run), politeness 5 s per host, OPIC on. The same
web (same seed, same change times) and the same daemon are run once per refresh policy
(``refresh.policy``): the planner (t_i = K/√(r_i·λ_i)), uniform round robin, and
change-proportional refresh (t_i ∝ 1/λ̂_i, the same online estimates).

The web's ground truth scores each run over the last half of the units (the window), from
the web's own request log (which page was read when, the version it was served) and its
change processes: the importance-weighted time-average obsolescence Σ r_i·λ_i·∫(t − t_last,i)
dt / window (DESIGN.md §6, the true λ_i, in changes per unit), and the freshness of the
stored pages (the share not changed since their last read), plain and importance-weighted.
r_i is computed by the ranking package on the web's true link graph (the links that vote:
rel=nofollow ones cast none). ``--weights importance`` (default): every page's direct
importance (PageRank × N), the true PageRank the targets' baseline steady states were
computed with, and the daemon plans with its own estimate of it
(``refresh.importance_source: importance``). ``--weights rank``: DESIGN.md §6's weights,
importance for XML pages and interest (inverse ranking) for HTML pages, for the score and
the daemon alike (its default source). Pages scored: those every run had read before the
window began.

References from the truth: Ω(G) = (Σ√(r·λ))²/2G and the clamped optimum (water-filled
intervals in [1, t_max] for every page, the static ones read every t_max as the daemon must)
at the refresh bandwidth the planner's run really had (its mean refresh fetches per unit
over the window). Where the planner's remaining gap goes, as
steady-state plans scored with the truth: the optimum planned with the daemon's own
importance (from the graph it crawled) instead of the true one, with its own rate estimates
instead of the true ones (and, split by estimator, with its λ̂ only on the pages rated from
Last-Modified dates, only on those rated from signatures, or only on those never seen to
change), and with both; and the
bandwidth its refresh share lost to discovery and politeness (G against refresh fetches per
unit).

Prints ONE JSON line; ``summary`` holds ``planner_over_clamped_optimum``,
``uniform_over_planner``, ``change_proportional_over_planner``, ``politeness_violations``,
``pages``, ``hosts``, ``units``, and ``daemon_kept_up``: false when a run fetched less than
95 % of G per unit in the window, i.e. the daemon was CPU-bound at this ``--speed`` (measured:
about 150 pages/s on the 2-core machine of 2026-11-27, so 20,000 pages at 600x, 333 fetches
a real second, overload it; 10,000 pages at 300x and 20,000 at 150x do not) and the figures
are not the policy's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])
from refresh import RateSource, refresh_intervals, time_average_obsolescence
from xyro.jobs.rank_job import rank_graph
from xyro.service.demo import start_gap_violations
from xyro.synthweb.changes import ChangeProcess
from xyro.synthweb.log import RequestLog, RequestRecord
from xyro.synthweb.model import WebModel, build_model
from xyro.synthweb.spec import WebSpec

REPO = Path(__file__).resolve().parents[2]
UNIT_S = 3600.0
SIM_START = 1_800_000_000.0 - 1_800_000_000.0 % UNIT_S  # a unit boundary, 2027-01-15
DELAY_S = 5.0
T_MAX = 60
RATE_MEAN_PER_UNIT = 0.2
RATE_SHAPE = 0.5
POLICIES = ("planner", "uniform", "change_proportional")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the web and its truth ---------------------------------------------------------------

def budget_g(args: argparse.Namespace) -> int:
    """G, the fetches per unit: 10 % of the pages (``refresh.bandwidth_pages_per_unit``)."""
    return args.pages // 10


def web_spec(args: argparse.Namespace) -> WebSpec:
    """What ``python -m xyro.synthweb`` builds from the options :func:`web_cmd` passes."""
    return WebSpec(seed=args.seed, n_hosts=args.hosts, n_pages=args.pages, hostile=frozenset(),
                   change_rate_mean=RATE_MEAN_PER_UNIT / UNIT_S, change_rate_shape=RATE_SHAPE)


def web_cmd(args: argparse.Namespace, epoch: float, log_path: Path) -> list[str]:
    return [sys.executable, "-m", "xyro.synthweb", "--hosts", str(args.hosts), "--pages",
            str(args.pages), "--seed", str(args.seed), "--no-hostile", "--speed",
            str(args.speed), "--epoch", repr(epoch), "--sim-start", repr(SIM_START),
            "--change-rate-mean", repr(RATE_MEAN_PER_UNIT / UNIT_S),
            "--change-rate-shape", repr(RATE_SHAPE), "--log", str(log_path)]


@dataclass(frozen=True)
class Truth:
    """The web as it is: pages, their addresses, true rates (per unit) and weights r_i."""

    model: WebModel
    rates: np.ndarray        # changes per unit
    r: np.ndarray            # weight, mean 1: importance (XML), interest or importance (HTML)
    weights: str             # which: rank (§6, interest for HTML) or importance (every page)
    changes: ChangeProcess
    page_of: dict[tuple[str, str], int]   # (address, path) -> page id
    crawlable: np.ndarray    # bool: a normal host's page robots.txt allows

    @classmethod
    def of(cls, spec: WebSpec, weights: str = "importance") -> Truth:
        """``weights``: ``rank`` scores XML pages by importance and HTML pages by interest
        (DESIGN.md §6); ``importance`` scores every page by its importance (N·PR)."""
        model = build_model(spec)
        rates_s = np.array([p.rate for p in model.pages])
        # The links that vote: a rel=nofollow link casts none (and the daemon, which honours
        # it, never stores it), so counting it would score the daemon against weights no
        # ranking of the crawled web could give.
        src, dst = model.edges(nofollow=False)
        n = len(model.pages)
        order = np.lexsort((dst, src))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        xml = np.array([p.kind in ("xml", "rss", "atom") for p in model.pages])  # feeds too
        report = rank_graph(np.cumsum(indptr), dst[order].astype(np.int32), xml)
        r = report.importance if weights == "importance" else \
            np.where(xml, report.importance, report.interest)
        normal = {h.index for h in model.normal_hosts}
        crawlable = np.array([p.host in normal and not p.disallowed for p in model.pages])
        page_of = {(model.hosts[p.host].address, p.path): p.id for p in model.pages}
        return cls(model, rates_s * UNIT_S, r, weights,
                   ChangeProcess(spec.seed, rates_s, SIM_START), page_of, crawlable)


# -- one run -------------------------------------------------------------------------------

@dataclass
class Run:
    policy: str
    agent: str
    records: list[RequestRecord]
    units: list[tuple]          # fetch_units rows, oldest first
    db: Path


def daemon_config(folder: Path, seeds: list[str], policy: str, agent: str, g: int,
                  discovery_share: float, weights: str) -> Path:
    config = folder / "xyro.yaml"
    # OPIC checkpoints once a unit: the default, every 300 clock seconds, is two writes of
    # every URL's OPIC columns per real second at 600x, a load no real-time daemon carries.
    config.write_text(
        f"seeds: {json.dumps(seeds)}\n"
        "scope: {allow_private_addresses: true}\n"
        f"crawler: {{workers: 32, user_agent: '{agent}', politeness: {{delay_s: {DELAY_S}}}}}\n"
        f"ranking: {{schedule_s: {6 * UNIT_S}, opic: {{checkpoint_interval_s: {UNIT_S}}}}}\n"
        f"refresh: {{time_unit_s: {UNIT_S}, bandwidth_pages_per_unit: {g}, "
        f"max_interval_units: {T_MAX}, discovery_share: {discovery_share}, "
        f"policy: {policy}, importance_source: {weights}}}\n"
        f"storage: {{database: '{folder / 'xyro.db'}', warehouse_dir: '{folder / 'w'}'}}\n"
        "log: {level: warning}\n")
    return config


def run_policy(args: argparse.Namespace, policy: str, tmp: Path) -> Run:
    folder = tmp / policy
    folder.mkdir()
    agent = f"XyroE2E-{policy}/0.1"
    epoch = time.time() + 6.0  # both processes are up by then (the web builds its model)
    web_log = folder / "requests.jsonl"
    web = subprocess.Popen(web_cmd(args, epoch, web_log), stdout=subprocess.PIPE, text=True,
                           cwd=REPO)
    try:
        assert web.stdout is not None
        seeds = [web.stdout.readline().strip() for _ in range(args.hosts)]
        config = daemon_config(folder, seeds, policy, agent, budget_g(args),
                               args.discovery_share, args.weights)
        xyro = [sys.executable, "-m", "xyro", "-c", str(config)]
        subprocess.run([*xyro, "init"], check=True, capture_output=True, cwd=REPO)
        end_real = epoch + args.units * UNIT_S / args.speed
        daemon = subprocess.Popen([*xyro, "run", "--speed", str(args.speed), "--epoch",
                                   repr(epoch), "--sim-start", repr(SIM_START)],
                                  stderr=subprocess.PIPE, text=True, cwd=REPO)
        log(f"{policy}: crawling {args.units} units of {UNIT_S:.0f} simulated s "
            f"({args.units * UNIT_S / args.speed:.0f} real s)")
        while time.time() < end_real:
            if daemon.poll() is not None:
                raise RuntimeError(f"{policy}: xyro run exited early:\n"
                                   f"{daemon.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            time.sleep(min(1.0, max(0.0, end_real - time.time())))
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=120)
        if daemon.returncode != 0:
            raise RuntimeError(f"{policy}: xyro run exited {daemon.returncode}:\n{err[-3000:]}")
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=120)
    return load_run(tmp, policy)


def load_run(work: Path, policy: str) -> Run:
    """A finished run's web log and store (``--keep`` folders can be scored again)."""
    folder = work / policy
    conn = sqlite3.connect(folder / "xyro.db")
    units = conn.execute("SELECT unit, fetched, refresh, discovery, urgent, carried_over "
                         "FROM fetch_units ORDER BY unit").fetchall()
    conn.close()
    return Run(policy, f"XyroE2E-{policy}/0.1", RequestLog.load_jsonl(folder / "requests.jsonl"),
               units, folder / "xyro.db")


# -- scoring -------------------------------------------------------------------------------

def reads_by_page(run: Run, truth: Truth) -> dict[int, np.ndarray]:
    """Clock times of the page reads the web served this run (200 or 304), per page."""
    out: dict[int, list[float]] = {}
    for rec in run.records:
        if not (rec.user_agent or "").startswith(run.agent) or rec.status not in (200, 304):
            continue
        page = truth.page_of.get((rec.host, rec.target.split("?", 1)[0]))
        if page is not None:
            out.setdefault(page, []).append(rec.clock)
    return {p: np.sort(np.array(t)) for p, t in out.items()}


def score(reads: dict[int, np.ndarray], pages: np.ndarray, truth: Truth, a: float,
          b: float) -> dict[str, float]:
    """Obsolescence and freshness over the window [a, b] (clock seconds) of ``pages``."""
    r, lam = truth.r[pages], truth.rates[pages]
    age = np.zeros(pages.size)     # ∫ (t − t_last) dt, in units²
    fresh = np.zeros(pages.size)   # time fresh, in units
    for k, page in enumerate(pages.tolist()):
        t = reads[page]
        last = t[t < a]
        bounds = np.concatenate(([a], t[(t >= a) & (t < b)], [b]))
        lasts = np.concatenate(([last[-1]], t[(t >= a) & (t < b)]))
        for s, e, l in zip(bounds[:-1], bounds[1:], lasts):
            age[k] += ((e - l) ** 2 - (s - l) ** 2) / 2 / UNIT_S ** 2
            change = truth.changes.events(page, l, e)
            stale_from = change[0] if change else math.inf
            fresh[k] += max(0.0, min(e, stale_from) - s) / UNIT_S
    span = (b - a) / UNIT_S
    return {"obsolescence": float(np.sum(r * lam * age) / span),
            "freshness": float(fresh.sum() / (pages.size * span)),
            "freshness_importance_weighted": float(np.sum(r * fresh) / (r.sum() * span))}


def optimum(r: np.ndarray, lam: np.ndarray, g: float, plan_r: np.ndarray | None = None,
            plan_lam: np.ndarray | None = None, static_read: bool = True) -> float:
    """Steady-state obsolescence (true r, λ) of the clamped optimal plan made with
    ``plan_r``/``plan_lam`` (default: the truth) at bandwidth g.

    Every page is planned, the static ones too: the clamp t_i ≤ t_max binds every page (the
    daemon runs with it and cannot know that a page never changes), so a static page takes
    at least 1/t_max of g and scores 0 whatever its interval; a plan made with estimates
    spends on it what its λ̂ asks. ``static_read=False``: the static pages are left out (never
    read, as only an oracle could), the reference this benchmark used until 2026-11-27."""
    pr = r if plan_r is None else plan_r
    pl = lam if plan_lam is None else plan_lam
    changing = lam > 0  # a static page scores 0
    planned = np.ones_like(changing) if static_read else changing
    plan = refresh_intervals(np.maximum(pr[planned], 1e-12), np.maximum(pl[planned], 1e-12),
                             g, 1.0, float(T_MAX))
    t = np.full(lam.shape, np.inf)
    t[planned] = plan.intervals
    return time_average_obsolescence(r[changing], lam[changing], t[changing])


def daemon_estimates(db: Path, truth: Truth, pages: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The planner run's own r̂ (as its truth weights pages), λ̂ (per unit) and
    the source of each λ̂ (``urls.rate_source``: last-modified, signature-mle, ...) of
    ``pages``, from its store; a page without an estimate takes the mean (source "")."""
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT url, type, importance, interest, rate, rate_source "
                        "FROM urls").fetchall()
    conn.close()
    r_hat = np.full(len(truth.model.pages), np.nan)
    lam_hat = np.full(len(truth.model.pages), np.nan)
    source = np.full(len(truth.model.pages), "", dtype=object)
    for url, kind, imp, inter, rate, rate_source in rows:
        parts = urlsplit(url)
        page = truth.page_of.get((parts.hostname or "", parts.path or "/"))
        if page is None:
            continue
        # The planner's r (DESIGN.md §6, or importance everywhere: Truth.weights).
        r_hat[page] = imp if kind == "xml" or truth.weights == "importance" else inter
        if rate is not None:
            lam_hat[page] = rate * UNIT_S
            source[page] = rate_source or ""
    r_hat, lam_hat = r_hat[pages], lam_hat[pages]
    # A page without an estimate takes the mean of those with one (1 when none has one: a
    # run too short for a ranking, as the planner's own default).
    r_hat = np.where(np.isfinite(r_hat), r_hat, _mean_or_one(r_hat))
    lam_hat = np.where(np.isfinite(lam_hat), lam_hat, _mean_or_one(lam_hat))
    return r_hat / r_hat.mean(), lam_hat, source[pages]


def rate_gap_by_source(r: np.ndarray, lam: np.ndarray, g: float, lam_hat: np.ndarray,
                       source: np.ndarray, opt: float) -> dict[str, float]:
    """The optimum planned with the daemon's λ̂ on one estimator's pages only (the truth on
    the others), over the optimum: which estimator's errors cost what."""
    out = {}
    for name, key in (("last_modified", RateSource.LAST_MODIFIED),
                      ("signature", RateSource.SIGNATURE_MLE),
                      ("never_changed", RateSource.NEVER_CHANGED)):
        mine = source == key.value
        out[f"optimum_with_daemon_rates_on_{name}_pages_over_optimum"] = \
            optimum(r, lam, g, plan_lam=np.where(mine, lam_hat, lam)) / opt
        out[f"pages_rated_by_{name}"] = int(mine.sum())
    return out


def _mean_or_one(values: np.ndarray) -> float:
    known = values[np.isfinite(values)]
    return float(known.mean()) if known.size else 1.0


def window_units(run: Run, first_unit: int, end_unit: int) -> dict[str, float]:
    """Mean fetches per unit over the whole units of the window, [first_unit, end_unit): the
    run stops as ``end_unit`` begins. A unit the daemon never opened (a starved daemon
    writes no row for it) counts as nothing fetched."""
    rows = {u[0]: u for u in run.units}
    names = ("fetched", "refresh", "discovery", "urgent", "carried_over")  # the row's columns
    window = np.array([[value or 0 for value in rows.get(unit, (unit, 0, 0, 0, 0, 0))[1:]]
                       for unit in range(first_unit, end_unit)], dtype=float).reshape(-1, 5)
    return {f"{name}_per_unit": float(mean) for name, mean in zip(names, window.mean(axis=0))}


def keeps_up(name: str, figures: dict[str, Any], args: argparse.Namespace) -> bool:
    """Whether the daemon spent its budget G in the window (work exists every unit once the
    web is found); if not, it was CPU-bound at this ``--speed`` and the scores measure an
    overloaded daemon (its jobs starved, its plan late), not the refresh policy."""
    g = budget_g(args)
    spent = figures["fetched_per_unit"]
    if spent >= 0.95 * g:
        return True
    log(f"{name}: the daemon fetched {spent:.0f} of G = {g} pages per unit in the window: "
        f"it could not keep up at --speed {args.speed:g} on this machine; these scores are "
        "not the policy's. Run again with a lower --speed.")
    return False


def politeness(run: Run, truth: Truth) -> int:
    mine = [r for r in run.records if (r.user_agent or "").startswith(run.agent)]
    delays = {h.address: h.crawl_delay or 0.0 for h in truth.model.hosts}
    return len(start_gap_violations(mine, DELAY_S, delays))


# -- main ----------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 3,000 pages on 10 hosts for 16 units")
    p.add_argument("--pages", type=int, default=None, help="web pages (default 20000)")
    p.add_argument("--hosts", type=int, default=None, help="web hosts (default 50)")
    p.add_argument("--units", type=int, default=None, help="time units (default 60)")
    p.add_argument("--speed", type=float, default=600.0,
                   help="simulated seconds per real second (default 600: 6 s a unit)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--discovery-share", type=float, default=0.5,
                   help="refresh.discovery_share (default 0.5: the web is found within the "
                        "first third of the run, so the window scores the refresh steady "
                        "state; once nothing is unread, discovery's share goes to refresh)")
    p.add_argument("--weights", choices=("importance", "rank"), default="importance",
                   help="r_i of the daemon (refresh.importance_source) and of the score: "
                        "importance (every page by its PageRank; default) or rank "
                        "(DESIGN.md §6: importance for XML, interest for HTML)")
    p.add_argument("--keep", type=Path, help="keep each run's web log and store here")
    p.add_argument("--rescore", action="store_true",
                   help="score the runs kept in --keep again, without crawling")
    args = p.parse_args(argv)
    if args.rescore and args.keep is None:
        p.error("--rescore needs --keep DIR (the folder of a previous run)")
    args.pages = args.pages or (3000 if args.quick else 20_000)
    args.hosts = args.hosts or (10 if args.quick else 50)
    args.units = args.units or (16 if args.quick else 60)
    args.policies = [x for x in args.policies.split(",") if x]
    if "planner" not in args.policies or set(args.policies) - set(POLICIES):
        p.error(f"--policies: the planner and any of {POLICIES[1:]}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = web_spec(args)
    truth = Truth.of(spec, args.weights)
    log(f"web: {args.pages} pages on {args.hosts} hosts; rates per unit from "
        f"{np.percentile(truth.rates[truth.rates > 0], 1):.2g} to "
        f"{np.percentile(truth.rates[truth.rates > 0], 99):.2g} (1st-99th percentile)")
    with tempfile.TemporaryDirectory(prefix="xyro-e2e-") as tmp:
        work = args.keep or Path(tmp)
        runs = {policy: (load_run(work, policy) if args.rescore
                         else run_policy(args, policy, work)) for policy in args.policies}
        report = evaluate(args, truth, runs)
    print(json.dumps(report))
    return 0


def evaluate(args: argparse.Namespace, truth: Truth, runs: dict[str, Run]) -> dict[str, Any]:
    a = SIM_START + (args.units - args.units // 2) * UNIT_S
    b = SIM_START + args.units * UNIT_S
    reads = {name: reads_by_page(run, truth) for name, run in runs.items()}
    stored = truth.crawlable.copy()
    for rd in reads.values():
        before = np.zeros(stored.size, dtype=bool)
        for page, t in rd.items():
            before[page] = t[0] < a
        stored &= before
    pages = np.flatnonzero(stored)
    first_unit = int(a // UNIT_S)
    out: dict[str, Any] = {}
    for name, run in runs.items():
        out[name] = {**score(reads[name], pages, truth, a, b),
                     **window_units(run, first_unit, int(b // UNIT_S)),
                     "pages_read_before_window": int(sum(t[0] < a for t in reads[name].values())),
                     "politeness_violations": politeness(run, truth)}
    kept_up = all([keeps_up(name, out[name], args) for name in runs])  # each one says why
    r, lam = truth.r[pages], truth.rates[pages]
    g = out["planner"].get("refresh_per_unit") or budget_g(args) * 0.8
    s = float(np.sum(np.sqrt(r * lam)))
    opt = optimum(r, lam, g)
    r_hat, lam_hat, source = daemon_estimates(runs["planner"].db, truth, pages)
    planner = out["planner"]["obsolescence"]
    changing = lam > 0
    out["references"] = {
        "refresh_bandwidth_pages_per_unit": round(g, 1), "omega_g": s * s / (2 * g),
        "clamped_optimum": opt,
        "optimum_static_pages_never_read": optimum(r, lam, g, static_read=False),
        "uniform_steady_state": time_average_obsolescence(
            r[changing], lam[changing],
            np.full(int(changing.sum()), min(max(pages.size / g, 1.0), T_MAX))),
    }
    out["gap"] = {
        "optimum_with_daemon_importance_over_optimum": optimum(r, lam, g, plan_r=r_hat) / opt,
        "optimum_with_daemon_rates_over_optimum": optimum(r, lam, g, plan_lam=lam_hat) / opt,
        "optimum_with_both_over_optimum": optimum(r, lam, g, r_hat, lam_hat) / opt,
        **rate_gap_by_source(r, lam, g, lam_hat, source, opt),
        "bandwidth_share_refreshing": round(g / budget_g(args), 3),
        "planner_over_optimum": planner / opt,
    }
    summary = {
        "planner_over_clamped_optimum": round(planner / opt, 3),
        "uniform_over_planner": round(out["uniform"]["obsolescence"] / planner, 3)
        if "uniform" in out else None,
        "change_proportional_over_planner": round(
            out["change_proportional"]["obsolescence"] / planner, 3)
        if "change_proportional" in out else None,
        "politeness_violations": sum(out[n]["politeness_violations"] for n in runs),
        "pages": args.pages, "hosts": args.hosts, "units": args.units,
        "daemon_kept_up": kept_up,
    }
    return {"summary": summary, **out, "setup": {
        "pages_scored": int(pages.size), "window_units": [int(a // UNIT_S) - int(SIM_START // UNIT_S),
                                                          args.units],
        "unit_s": UNIT_S, "speed": args.speed, "bandwidth_pages_per_unit": budget_g(args),
        "politeness_delay_s": DELAY_S, "t_max_units": T_MAX, "web_seed": args.seed,
        "weights": args.weights,
        "discovery_share": args.discovery_share,
        "rate_mean_per_unit": RATE_MEAN_PER_UNIT, "rate_gamma_shape": RATE_SHAPE,
        "static_share": web_spec(args).static_share,
        "reliable_last_modified_share": web_spec(args).reliable_lm_share},
        "machine": machine()}


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
