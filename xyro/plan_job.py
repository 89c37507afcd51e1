"""The refresh planner over the metadata store (``xyro plan`` and the daemon's unit job).

Each time unit (DESIGN.md §6, 003 §6):

1. estimate λ_i for the pages observed since the last run (and those never estimated)
   from the ``observations`` table: the Last-Modified estimator where the page's dates
   pass the reliability test and its host's do too (shrunk toward the population mean:
   a Gamma posterior mean, see ``LM_PRIOR_SHAPE``), else the signature MLE (eq. 9,
   bias-reduced) with its documented boundary answers; a page read once takes the prior,
   the mean rate of the estimated pages (obsolescence is linear in λ, so the mean is the
   plug-in);
2. r_i: direct importance for XML pages, interest for HTML pages (mean 1), 1 when
   missing or with ``importance_source: uniform``;
3. t_i = K/√(r_i·λ_i) water-filled under [min_interval_units, max_interval_units] and
   the importance floor, over the refresh bandwidth (1 − ρ)·G, so Σ 1/t_i = (1 − ρ)·G;
4. re-file the pages fetched since the last run (and any page not filed) into folder
   ⌊t_last/unit + t_i⌋ with ``SetRefresh`` ops: O(pages fetched) writes per unit;
5. ``due_now``: the due folder (priority REFRESH, highest √(r·λ) first) plus ρ·G unread
   pages by OPIC cash, else importance (priority DISCOVERY), via ``refresh.compose_unit``.
   Popped pages move to a retry folder one interval later (a fetch re-files them from
   the fetch time; a lost fetch comes due again); deferred ones to the next unit.

The water level K needs every planned page's weight, so step 3 reads one column scan of
the planned pages per run (O(N) numpy work); folder work and writes stay O(G).
Rates are stored as changes per second (``urls.rate``), planned in changes per unit.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metadata import JobRun, Op, SetRefresh, SetState
from metadata import refresh_queries as q
from refresh import (AccessHistory, RateEstimate, RateSource, UnitFetchList, compose_unit,
                     estimate_rate, host_reliability, page_reliability, refresh_intervals,
                     refresh_weights)
from xyro.clock import Clock
from xyro.config import RefreshConfig
from xyro.errors import XyroError
from xyro.frontier import DISCOVERY, REFRESH

WATERMARK_KEY = "refresh.observations_done"
HTTP_DATE_TOLERANCE_S = 2.0  # Last-Modified has 1 s resolution, plus a little skew
#: Gamma prior shape for Last-Modified rates (refresh.last_modified.shrunk_rate): with few
#: accesses C/exposure is heavy-tailed; in tests/bench/refresh_sim.py the raw estimator
#: made Last-Modified hurt (1.65x the optimum vs 1.52x without it), the shrunk one help.
LM_PRIOR_SHAPE = 1.0


@dataclass(frozen=True)
class PlannerSettings:
    """The refresh section of the configuration, in the planner's units."""

    time_unit_s: float
    bandwidth: int
    discovery_share: float
    min_interval_units: float
    max_interval_units: float
    importance_floor: float
    importance_source: str = "rank"

    @classmethod
    def from_config(cls, cfg: RefreshConfig) -> PlannerSettings:
        return cls(cfg.time_unit_s, cfg.bandwidth_pages_per_unit, cfg.discovery_share,
                   float(cfg.min_interval_units), float(cfg.max_interval_units),
                   cfg.importance_floor, cfg.importance_source)

    @property
    def refresh_bandwidth(self) -> float:
        """(1 − ρ)·G: pages per unit planned for refreshing known pages."""
        return self.bandwidth * (1.0 - self.discovery_share)


@dataclass(frozen=True)
class Evidence:
    """What a page's rate rests on (for ``--explain``)."""

    estimate: RateEstimate
    accesses: int
    changes: int
    lm_reliable: bool
    lm_reason: str


@dataclass(eq=False)
class Plan:
    """One planning pass: per planned page (ascending id) r, λ (per unit), t, folder.

    ``refile`` marks the pages whose refresh data must be written this run; ``due`` is
    the folder each page waits in after this run (``NO_UNIT``: never refreshed).
    """

    unit: int
    ids: np.ndarray
    importance: np.ndarray
    rates: np.ndarray
    sources: list[str]
    intervals: np.ndarray
    due: np.ndarray
    refile: np.ndarray
    k: float
    omega_unclamped: float
    omega: float
    bandwidth: float
    t_max_used: float
    prior: float
    n_estimated: int
    watermark: int
    evidence: dict[int, Evidence] = field(default_factory=dict)

    def index(self, url_ids: np.ndarray) -> np.ndarray:
        """Positions of ``url_ids`` in ``ids`` (-1 where not planned)."""
        url_ids = np.asarray(url_ids, dtype=np.int64)
        if self.ids.size == 0:
            return np.full(url_ids.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, url_ids), self.ids.size - 1)
        return np.where(self.ids[pos] == url_ids, pos, -1)

    def due_counts(self, first: int, last: int) -> dict[int, int]:
        """Pages waiting per folder in [first, last]; overdue ones count in ``first``."""
        filed = self.due[self.due != q.NO_UNIT]
        folders = np.maximum(filed, first)
        folders = folders[folders <= last]
        counts = np.bincount(folders - first, minlength=last - first + 1)
        return {first + i: int(c) for i, c in enumerate(counts)}


@dataclass(frozen=True, slots=True)
class UnitFigures:
    """What one :meth:`RefreshPlanner.run_unit` did, for the metrics endpoint (§6 terms).

    ``omega_g`` is the predicted Ω(G) = S²/2G of the unclamped optimum; ``omega_plan`` the
    time-average obsolescence of the clamped plan actually filed (≥ Ω(G)).
    """

    unit: int
    planned: int
    due: int
    discovery: int
    deferred: int
    omega_g: float
    omega_plan: float
    seconds: float


class RefreshPlanner:
    """Estimate, plan, file and hand out the due pages of a unit (module doc).

    ``conn`` is a read connection of its own; ``submit`` queues writer ops (the writer
    applies them later, so the planner never re-reads what it just wrote in a run).
    """

    def __init__(self, conn: sqlite3.Connection, submit: Callable[[Op], None], clock: Clock,
                 settings: PlannerSettings) -> None:
        if settings.time_unit_s <= 0 or settings.bandwidth < 1:
            raise XyroError(f"refresh settings: time unit {settings.time_unit_s} s and "
                            f"bandwidth {settings.bandwidth} pages/unit must be positive")
        self._conn = conn
        self._submit = submit
        self._clock = clock
        self._s = settings
        self._watermark: int | None = None  # last observation id accounted for
        self.last_unit: UnitFigures | None = None  # set by run_unit

    # -- time ------------------------------------------------------------------------------
    def current_unit(self) -> int:
        return int(self._clock.now() // self._s.time_unit_s)

    # -- estimation ------------------------------------------------------------------------
    def _history(self, rows: list[tuple[float, int, float | None]]) -> AccessHistory:
        """Observation rows → a history in units; repeated access times are merged and an
        unchanged access without Last-Modified keeps the previous date (a 304 often omits
        it)."""
        unit = self._s.time_unit_s
        times: list[float] = []
        changed: list[bool] = []
        dates: list[float] = []
        last_s = -math.inf
        for access, ch, lm in rows:
            if access <= last_s:
                if ch and changed:
                    changed[-1] = True
                continue
            last_s = access
            if lm is None and not ch and dates:
                date = dates[-1]
            else:
                date = math.nan if lm is None else lm / unit
            if times:
                changed.append(bool(ch))
            times.append(access / unit)
            dates.append(date)
        return AccessHistory(times, changed, dates)

    def _estimate(self, histories: dict[int, AccessHistory], host_of: dict[int, int],
                  prior: float) -> dict[int, Evidence]:
        tol = HTTP_DATE_TOLERANCE_S / self._s.time_unit_s
        verdicts = {i: page_reliability(h, tol) for i, h in histories.items()}
        hosts = host_reliability([host_of[i] for i in verdicts],
                                 [v.reliable for v in verdicts.values()])
        out: dict[int, Evidence] = {}
        t_min = self._s.min_interval_units
        for url_id, history in histories.items():
            verdict = verdicts[url_id]
            host_ok = hosts[host_of[url_id]]
            estimate = estimate_rate(history, prior, host_reliable=host_ok, tolerance=tol,
                                     resolution=t_min, lm_prior_shape=LM_PRIOR_SHAPE)
            reason = verdict.reason if host_ok or not verdict.reliable else \
                "host's Last-Modified dates failed the test on other pages"
            out[url_id] = Evidence(estimate, int(history.access_times.size),
                                   int(history.changed.sum()), verdict.reliable and host_ok,
                                   reason)
        return out

    # -- planning --------------------------------------------------------------------------
    def plan(self, unit: int | None = None) -> Plan:
        """Estimate and plan without writing anything (``xyro plan`` shows this)."""
        unit = self.current_unit() if unit is None else int(unit)
        s, conn = self._s, self._conn
        pages = q.planned_pages(conn)
        top = q.max_observation_id(conn)
        if self._watermark is None:
            self._watermark = int(q.state_value(conn, WATERMARK_KEY, 0) or 0)
        touched = set(q.observed_since(conn, self._watermark, top))
        rates = pages.rate * s.time_unit_s  # changes per unit; NaN: never estimated
        sources = [src or "" for src in pages.rate_source]
        need = [int(i) for i, r in zip(pages.ids, rates) if math.isnan(r) or int(i) in touched]
        # Also re-estimate pages that only had the prior, so they follow its changes.
        estimated = [not (math.isnan(r) or src == RateSource.PRIOR.value)
                     for r, src in zip(rates, sources)]
        prior = _mean_or(rates[np.asarray(estimated, dtype=bool)], 1.0) if rates.size else 1.0
        rows = q.observations_of(conn, need, top)
        pos_of = {int(i): k for k, i in enumerate(pages.ids)}
        host_of = {i: int(pages.host_id[pos_of[i]]) for i in need}
        histories = {i: self._history(rows[i]) for i in need if i in rows}
        evidence = self._estimate(histories, host_of, prior)
        for url_id, ev in evidence.items():
            rates[pos_of[url_id]] = ev.estimate.rate
            sources[pos_of[url_id]] = ev.estimate.source.value
        # Fresh estimates move the prior; pages still on the prior follow it.
        fitted = np.array([src not in ("", RateSource.PRIOR.value) for src in sources],
                          dtype=bool)
        prior = _mean_or(rates[fitted], prior) if rates.size else prior
        on_prior = ~fitted
        rates[on_prior] = prior
        for k in np.flatnonzero(on_prior):
            sources[k] = RateSource.PRIOR.value
        r = self._importance(pages)
        intervals, k, bw, omega0, omega, t_max = self._intervals(r, rates)
        due, refile = self._folders(pages, intervals, touched | set(need), unit)
        return Plan(unit, pages.ids, r, rates, sources, intervals, due, refile, k, omega0,
                    omega, bw, t_max, prior, len(evidence), top, evidence)

    def _importance(self, pages: q.PlannedPages) -> np.ndarray:
        if self._s.importance_source == "uniform":
            return np.ones(pages.ids.size)
        r = np.where(pages.is_xml, pages.importance, pages.interest)
        return np.where(np.isnan(r) | (r < 0), 1.0, r)

    def _intervals(self, r: np.ndarray, rates: np.ndarray
                   ) -> tuple[np.ndarray, float, float, float, float, float]:
        s = self._s
        g = s.refresh_bandwidth
        kept = int(((r > 0) & (r >= s.importance_floor)).sum())
        if g <= 0 or kept == 0:
            return np.full(r.size, np.inf), math.inf, 0.0, 0.0, 0.0, s.max_interval_units
        # Too many pages to visit each at least every t_max: stretch t_max rather than fail.
        t_max = max(s.max_interval_units, kept / g * (1 + 1e-9))
        p = refresh_intervals(r, rates, g, s.min_interval_units, t_max, s.importance_floor)
        return p.intervals, p.k, p.bandwidth, p.omega_unclamped, p.omega, t_max

    def _folders(self, pages: q.PlannedPages, intervals: np.ndarray, touched: set[int],
                 unit: int) -> tuple[np.ndarray, np.ndarray]:
        """Folders after this run: re-filed from the last access for touched, unfiled and
        no-longer-refreshed pages; the stored folder for the others."""
        due = pages.due_unit.copy()
        finite = np.isfinite(intervals)
        is_touched = np.fromiter((int(i) in touched for i in pages.ids), dtype=bool,
                                 count=pages.ids.size)
        refile = is_touched | ((due == q.NO_UNIT) & finite) | ((due != q.NO_UNIT) & ~finite)
        last = np.where(np.isnan(pages.last_access), unit * self._s.time_unit_s,
                        pages.last_access)
        go = refile & finite
        due[go] = np.maximum(np.floor(last[go] / self._s.time_unit_s + intervals[go]),
                             unit).astype(np.int64)
        due[refile & ~finite] = q.NO_UNIT
        return due, refile

    # -- the unit's fetch list ------------------------------------------------------------
    def due_now(self, unit: int, plan: Plan | None = None) -> list[tuple[str, int]]:
        """The unit's (url, priority) list, due pages (REFRESH) then discovery (DISCOVERY),
        without writing anything (:meth:`run_unit` also files what it hands out)."""
        return self._compose(unit, self.plan(unit) if plan is None else plan)[0]

    def _compose(self, unit: int, plan: Plan) -> tuple[list[tuple[str, int]], UnitFetchList,
                                                       Plan]:
        stored = np.asarray(q.due_ids(self._conn, unit), dtype=np.int64)
        pos = plan.index(stored)
        stored = stored[pos >= 0]
        from_plan = plan.ids[(plan.due != q.NO_UNIT) & (plan.due <= unit)]
        candidates = np.union1d(stored, from_plan)
        cpos = plan.index(candidates)
        due_mask = (plan.due[cpos] != q.NO_UNIT) & (plan.due[cpos] <= unit)
        due = candidates[due_mask]
        dpos = cpos[due_mask]
        weights = refresh_weights(plan.importance[dpos], plan.rates[dpos])
        n_disc = int(round(self._s.discovery_share * self._s.bandwidth))
        spare = max(0, self._s.bandwidth - n_disc - due.size)
        unread = np.asarray(q.unread_ranked(self._conn, n_disc + spare), dtype=np.int64)
        fetch = compose_unit(due, weights, unread, self._s.bandwidth, self._s.discovery_share)
        urls = q.urls_of(self._conn, np.concatenate((fetch.maintenance, fetch.discovery)).tolist())
        out = [(urls[int(i)], REFRESH) for i in fetch.maintenance]
        out += [(urls[int(i)], DISCOVERY) for i in fetch.discovery]
        return out, fetch, plan

    def run_unit(self, unit: int | None = None) -> list[tuple[str, int]]:
        """Plan, write the refresh data, and return the unit's (url, priority) list."""
        started = self._clock.now()
        t0 = time.monotonic()
        unit = self.current_unit() if unit is None else int(unit)
        plan = self.plan(unit)
        fetch_list, fetch, plan = self._compose(unit, plan)
        due = plan.due.copy()
        mpos = plan.index(fetch.maintenance)
        # Popped: one interval later unless a fetch re-files them first.
        due[mpos] = unit + np.maximum(1, np.ceil(plan.intervals[mpos])).astype(np.int64)
        due[plan.index(fetch.deferred)] = unit + 1
        write = plan.refile.copy()
        write[mpos] = True
        write[plan.index(fetch.deferred)] = True
        unit_s = self._s.time_unit_s
        for k in np.flatnonzero(write):
            t = float(plan.intervals[k])
            self._submit(SetRefresh(int(plan.ids[k]), float(plan.rates[k]) / unit_s,
                                    plan.sources[k], None if due[k] == q.NO_UNIT else int(due[k]),
                                    t if math.isfinite(t) else None))
        self._watermark = plan.watermark
        self._submit(SetState(WATERMARK_KEY, plan.watermark))
        self._submit(SetState("refresh.k", _finite(plan.k)))
        self._submit(SetState("refresh.omega", plan.omega))
        self._submit(SetState("refresh.prior_rate_per_unit", plan.prior))
        self._submit(JobRun("plan", started, self._clock.now(), "ok",
                            f"unit {unit}: {len(plan.ids)} planned, {plan.n_estimated} "
                            f"estimated, {fetch.maintenance.size} due, "
                            f"{fetch.discovery.size} discovery, {fetch.deferred.size} "
                            f"deferred, {time.monotonic() - t0:.2f} s"))
        self.last_unit = UnitFigures(unit, int(plan.ids.size), int(fetch.maintenance.size),
                                     int(fetch.discovery.size), int(fetch.deferred.size),
                                     float(plan.omega_unclamped), float(plan.omega),
                                     time.monotonic() - t0)
        return fetch_list

    # -- explanation -----------------------------------------------------------------------
    def explain(self, url: str, plan: Plan | None = None) -> dict[str, Any]:
        """r, λ and its evidence, t and the folder of one page (``xyro plan --explain``)."""
        row = q.url_row(self._conn, url)
        if row is None:
            raise XyroError(f"{url} is not in the database; give the canonical URL as "
                            "`xyro status`/the v_change_rates view show it")
        plan = self.plan() if plan is None else plan
        out: dict[str, Any] = {"url": url, "type": row["type"], "host": row["host"],
                               "accesses": row["accesses"], "changes": row["changes"]}
        pos = int(plan.index(np.array([row["id"]]))[0])
        if pos < 0:
            out["planned"] = False
            out["why_not"] = (f"type {row['type']!r} with {row['accesses']} accesses: only "
                              "fetched HTML and XML pages are refreshed")
            return out
        top = plan.watermark
        history = self._history(q.observations_of(self._conn, [row["id"]], top)
                                .get(row["id"], []))
        ev = plan.evidence.get(row["id"]) or self._estimate(
            {row["id"]: history}, {row["id"]: row["host_id"]}, plan.prior)[row["id"]]
        unit_s = self._s.time_unit_s
        t = float(plan.intervals[pos])
        source = ("uniform" if self._s.importance_source == "uniform" else
                  ("importance (direct rank)" if row["type"] == "xml" else "interest (inverse rank)"))
        missing = row["importance" if row["type"] == "xml" else "interest"] is None
        out.update({
            "planned": True,
            "r": float(plan.importance[pos]),
            "r_source": source + (" missing: 1" if missing and source != "uniform" else ""),
            "rate_per_unit": float(plan.rates[pos]),
            "rate_per_day": float(plan.rates[pos]) / unit_s * 86400.0,
            "rate_source": plan.sources[pos],
            "rate_stderr_per_unit": ev.estimate.stderr,
            "observations": ev.accesses, "observed_changes": ev.changes,
            "last_modified_reliable": ev.lm_reliable, "last_modified_reason": ev.lm_reason,
            "interval_units": t if math.isfinite(t) else None,
            "interval_s": t * unit_s if math.isfinite(t) else None,
            "due_unit": None if plan.due[pos] == q.NO_UNIT else int(plan.due[pos]),
            "current_unit": plan.unit, "k": _finite(plan.k),
        })
        if not math.isfinite(t):
            out["why_not"] = (f"r = {plan.importance[pos]:.4g} is below the importance floor "
                              f"{self._s.importance_floor} (or 0): never refreshed")
        return out


def summary(plan: Plan, units_ahead: int = 10) -> dict[str, Any]:
    """What ``xyro plan`` prints: due per unit, Ω, quantiles of t and λ, sources."""
    finite = np.isfinite(plan.intervals)
    qs = (0.0, 0.1, 0.5, 0.9, 1.0)

    def quant(values: np.ndarray) -> dict[str, float] | None:
        if values.size == 0:
            return None
        return {f"p{int(p * 100)}": round(float(np.quantile(values, p)), 6) for p in qs}

    sources: dict[str, int] = {}
    for src in plan.sources:
        sources[src] = sources.get(src, 0) + 1
    return {
        "current_unit": plan.unit, "planned_pages": int(plan.ids.size),
        "never_refreshed": int((~finite).sum()),
        "refresh_bandwidth_pages_per_unit": round(plan.bandwidth, 3),
        "k": _finite(plan.k), "omega_G_unclamped": round(plan.omega_unclamped, 6),
        "omega_plan": round(plan.omega, 6), "t_max_used_units": plan.t_max_used,
        "prior_rate_per_unit": round(plan.prior, 6),
        "estimated_this_pass": plan.n_estimated,
        "due_per_unit": {str(k): v for k, v in
                         plan.due_counts(plan.unit, plan.unit + units_ahead - 1).items()},
        "interval_units_quantiles": quant(plan.intervals[finite]),
        "rate_per_unit_quantiles": quant(plan.rates),
        "rate_sources": sources,
    }


def _mean_or(values: np.ndarray, default: float) -> float:
    values = values[np.isfinite(values) & (values > 0)]
    return float(values.mean()) if values.size else default


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
