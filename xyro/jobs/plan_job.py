"""The refresh planner over the metadata store (``xyro plan`` and the daemon's unit job).

Each time unit (DESIGN.md §6, 003 §6) :meth:`RefreshPlanner.run_unit` works on the persisted
folders in O(G + pages changed since the last unit); it reads nothing else:

1. the pages observed since the last unit (``observations`` rows after the watermark, by
   row id) and the due folder (``urls.due_unit ≤ unit``, by the partial index ``urls_due``);
2. λ_i is re-estimated for the observed pages: the Last-Modified estimator where the page's
   dates pass the reliability test and its host's do too (shrunk toward the population
   mean: a Gamma posterior mean, see ``LM_PRIOR_SHAPE``), else the signature MLE (eq. 9,
   bias-reduced) with its documented boundary answers; a page read once takes the prior,
   the mean rate of the estimated pages (obsolescence is linear in λ, so the mean is the
   plug-in), and follows it as it moves;
3. r_i: direct importance for XML pages, interest for HTML pages (mean 1), 1 when missing
   or with ``importance_source: uniform``; below the importance floor: never refreshed;
4. S = Σ√(r_i·λ_i) is updated by the deltas of the pages re-estimated (003 §6.6), split in
   the clamp bands of :mod:`refresh.waterlevel`, and K solved with the water-filling clamp
   correction: t_i = K/√(r_i·λ_i) within [min_interval_units, max_interval_units] and
   Σ 1/t_i = (1 − ρ)·G, the water level a full solve over every page gives;
5. the observed pages are re-filed into folder ⌊(t_last + t_i·unit)/unit⌋
   (:func:`refresh.folders.folders_after`; the metadata writer already re-filed them with
   their previous t_i when it applied their fetch, ``refresh_queries.refiled_after_fetch``);
6. the unit's fetch list: the due folder (priority REFRESH, highest √(r·λ) first) plus ρ·G
   unread pages by OPIC cash, else importance (priority DISCOVERY: the first entries of the
   index ``urls_unread``), via ``refresh.compose_unit``. Popped pages move to a retry folder
   one interval later (a fetch re-files them from the fetch time; a lost fetch comes due
   again); deferred ones to the next unit.

What carries over between units is the *ledger*, one JSON value of the ``state`` table
(:class:`Ledger`: the observation watermark, Σλ of the estimated pages whose mean is the
prior, the water-level bands, K, and the settings they were built with) and each page's
weight key ``urls.weight`` (schema v4). A unit runs the full scan instead (:meth:`plan`,
O(N): it is also ``xyro plan``, ``--explain`` and the check the tests compare with) and
rebuilds the ledger when there is none, when the previous unit's writes were not all
applied (a crash: its token, written first, differs from the ledger's, written last), when
the time unit, the importance source or the floor changed, or after a ranking run: every r_i
changed then, and 003 §6.6 updates S "after the Page Rank process" too.

Rates are stored as changes per second (``urls.rate``), planned in changes per unit.
"""

from __future__ import annotations

import json
import math
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metadata import JobRun, Op, SetRefresh, SetState
from metadata import refresh_queries as q
from metadata.records import SetWeights
from refresh import (AccessHistory, RateEstimate, RateSource, RateSum, UnitFetchList,
                     compose_unit, estimate_rate, host_reliability, page_reliability,
                     refresh_intervals, refresh_weights)
from refresh.folders import folders_after
from refresh.waterlevel import Family, WaterLedger, WaterLevel
from xyro.clock import Clock, unit_index
from xyro.config import RefreshConfig
from xyro.crawl.frontier import DISCOVERY, REFRESH
from xyro.errors import XyroError

WATERMARK_KEY = "refresh.observations_done"
LEDGER_KEY = "refresh.ledger"
RUN_KEY = "refresh.run"  # the token of the last unit whose writes began
HTTP_DATE_TOLERANCE_S = 2.0  # Last-Modified has 1 s resolution, plus a little skew
#: Gamma prior shape for Last-Modified rates (refresh.last_modified.shrunk_rate): with few
#: accesses C/exposure is heavy-tailed; in tests/bench/refresh_sim.py the raw estimator
#: made Last-Modified hurt (1.65x the optimum vs 1.52x without it), the shrunk one help.
LM_PRIOR_SHAPE = 1.0
#: Weight-key families (refresh.waterlevel): estimated rates (key √(r·λ), stored as is) and
#: pages on the prior (key √r, stored negated; their weight is √(r·prior)).
ESTIMATED, PRIOR = "estimated", "prior"
_PRIOR = RateSource.PRIOR.value
_LEDGER_FORMAT = 1


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

    def t_max_for(self, kept: int) -> float:
        """t_max, stretched when the pages kept cannot all be visited every t_max within the
        refresh bandwidth (rather than failing)."""
        g = self.refresh_bandwidth
        return max(self.max_interval_units, kept / g * (1 + 1e-9)) if g > 0 else \
            self.max_interval_units


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
    """One full-scan planning pass: per planned page (ascending id) r, λ (per unit), t, folder.

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
    pages: q.PlannedPages | None = None
    estimated: np.ndarray | None = None  # bool: re-estimated in this pass

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
    time-average obsolescence of the clamped plan actually filed (≥ Ω(G)). ``full_scan``:
    the unit rebuilt the ledger from every page instead of the folders (module doc).
    """

    unit: int
    planned: int
    due: int
    discovery: int
    deferred: int
    omega_g: float
    omega_plan: float
    seconds: float
    k: float = math.nan
    estimated: int = 0
    full_scan: bool = False


@dataclass(eq=False)
class Ledger:
    """What the planner keeps between units (module doc), stored as one JSON value.

    ``rate_sum``/``rate_count``: Σλ (changes per unit, as stored) and the number of planned
    pages with an estimated rate, whose mean is the prior; ``planned``: pages in the plan
    (with a rate), below the floor included; ``water``: the bands of the weight keys.
    """

    token: str
    unit: int
    watermark: int
    jobs_seen: int
    unit_s: float
    importance_source: str
    importance_floor: float
    k: float
    planned: int
    rate_sum: RateSum
    rate_count: int
    water: WaterLedger

    def prior(self, default: float = 1.0) -> float:
        """The mean estimated rate (changes per unit), ``default`` without any."""
        return self.rate_sum.value / self.rate_count if self.rate_count > 0 else default

    def to_json(self) -> str:
        return json.dumps({
            "format": _LEDGER_FORMAT, "token": self.token, "unit": self.unit,
            "watermark": self.watermark, "jobs_seen": self.jobs_seen, "unit_s": self.unit_s,
            "importance_source": self.importance_source,
            "importance_floor": self.importance_floor, "k": self.k, "planned": self.planned,
            "rate_sum": list(self.rate_sum.state()), "rate_count": self.rate_count,
            "water": self.water.to_json()})

    @classmethod
    def from_json(cls, text: str) -> Ledger | None:
        """The ledger, or None for a value this version cannot read (then: rebuild)."""
        try:
            d = json.loads(text)
            if d.get("format") != _LEDGER_FORMAT:
                return None
            return cls(str(d["token"]), int(d["unit"]), int(d["watermark"]),
                       int(d["jobs_seen"]), float(d["unit_s"]), str(d["importance_source"]),
                       float(d["importance_floor"]), float(d["k"]), int(d["planned"]),
                       RateSum.restore(d["rate_sum"]), int(d["rate_count"]),
                       WaterLedger.from_json(d["water"]))
        except (TypeError, ValueError, KeyError, AttributeError):
            return None


@dataclass(eq=False)
class _Candidates:
    """The unit's due pages (ascending id) and what their refresh data becomes."""

    ids: np.ndarray
    priority: np.ndarray   # √(r·λ)
    intervals: np.ndarray  # t_i in units
    rate_s: np.ndarray     # what urls.rate holds after this unit (changes per second)
    sources: list[str]


@dataclass(eq=False)
class _Work:
    """One unit before its writes: refresh data per page, weight keys, due candidates."""

    unit: int
    refresh: dict[int, tuple[float | None, str | None, int | None, float | None]]
    weights: dict[int, float]  # stored key per page (NaN: NULL)
    due: _Candidates
    ledger: Ledger
    omega_unclamped: float
    omega: float
    prior: float
    n_estimated: int
    watermark: int
    full_scan: bool


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every read of a run sees the same state of the store."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


class _StoredKeys:
    """The weight keys of every page for :mod:`refresh.waterlevel`: the index ``urls_weight``
    of the store, with this unit's new keys (not written yet) laid over it."""

    def __init__(self, conn: sqlite3.Connection, weights: dict[int, float]) -> None:
        self._conn = conn
        self._changed = np.fromiter(weights, dtype=np.int64, count=len(weights))
        w = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
        w = w[~np.isnan(w)]
        self._new = {ESTIMATED: np.sort(w[w > 0]), PRIOR: np.sort(-w[w < 0])}

    def keys_between(self, family: str, low: float, high: float) -> np.ndarray:
        if family == ESTIMATED:
            ids, keys = q.weights_between(self._conn, low, high)
        else:
            ids, keys = q.weights_between(self._conn, -high, -low)
            keys = -keys
        keys = keys[~np.isin(ids, self._changed)]
        new = self._new[family]
        return np.concatenate((keys, new[(new >= low) & (new <= high)]))

    def max_key(self, family: str) -> float:
        changed = set(self._changed.tolist())
        rows = q.weights_top(self._conn, family == ESTIMATED, len(changed) + 1)
        stored = [abs(w) for i, w in rows if i not in changed]
        return max(stored[:1] + self._new[family][-1:].tolist() or [0.0])


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
        self.last_unit: UnitFigures | None = None  # set by run_unit
        #: Stored link depth of each URL of the last fetch list (run_unit, due_now): what
        #: the frontier's admission needs, read with the URLs by primary key.
        self.last_depths: dict[str, int] = {}

    # -- time ------------------------------------------------------------------------------
    def current_unit(self) -> int:
        return unit_index(self._clock.now(), self._s.time_unit_s)

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

    def _evidence(self, pages: q.PlannedPages, need: list[int], top: int,
                  prior: float) -> dict[int, Evidence]:
        """Rate estimates of the ``need`` pages from their observations up to ``top``."""
        rows = q.observations_of(self._conn, need, top)
        pos_of = {int(i): k for k, i in enumerate(pages.ids)}
        host_of = {i: int(pages.host_id[pos_of[i]]) for i in need}
        histories = {i: self._history(rows[i]) for i in need if i in rows}
        return self._estimate(histories, host_of, prior)

    def _importance(self, pages: q.PlannedPages) -> np.ndarray:
        if self._s.importance_source == "uniform":
            return np.ones(pages.ids.size)
        r = np.where(pages.is_xml, pages.importance, pages.interest)
        return np.where(np.isnan(r) | (r < 0), 1.0, r)

    def _kept(self, r: np.ndarray) -> np.ndarray:
        """Pages refreshed at all: r > 0 and not below the importance floor."""
        return (r > 0) & (r >= self._s.importance_floor)

    def _watermark(self) -> int:
        """The last observation id accounted for: the ledger's, else the older key's."""
        text = q.state_value(self._conn, LEDGER_KEY)
        ledger = Ledger.from_json(text) if isinstance(text, str) else None
        if ledger is not None:
            return ledger.watermark
        return int(q.state_value(self._conn, WATERMARK_KEY, 0) or 0)

    # -- the full scan (xyro plan, --explain, the check, and ledger rebuilds) ---------------
    def plan(self, unit: int | None = None) -> Plan:
        """Estimate and plan every page without writing anything (``xyro plan`` shows this;
        O(N): the check of the folder-based :meth:`run_unit`)."""
        unit = self.current_unit() if unit is None else int(unit)
        with _snapshot(self._conn):
            return self._full_plan(unit)

    def _full_plan(self, unit: int) -> Plan:
        s, conn = self._s, self._conn
        pages = q.planned_pages(conn)
        top = q.max_observation_id(conn)
        touched = set(q.observed_since(conn, self._watermark(), top))
        rates = pages.rate * s.time_unit_s  # changes per unit; NaN: never estimated
        sources = [src or "" for src in pages.rate_source]
        need = [int(i) for i, r in zip(pages.ids, rates) if math.isnan(r) or int(i) in touched]
        # The prior for this pass: the mean of the stored estimated rates.
        estimated = [not (math.isnan(r) or src == _PRIOR) for r, src in zip(rates, sources)]
        prior = _mean_or(rates[np.asarray(estimated, dtype=bool)], 1.0) if rates.size else 1.0
        evidence = self._evidence(pages, need, top, prior)
        pos_of = {int(i): k for k, i in enumerate(pages.ids)}
        for url_id, ev in evidence.items():
            rates[pos_of[url_id]] = ev.estimate.rate
            sources[pos_of[url_id]] = ev.estimate.source.value
        # Fresh estimates move the prior; pages still on the prior follow it.
        fitted = np.array([src not in ("", _PRIOR) for src in sources], dtype=bool)
        prior = _mean_or(rates[fitted], prior) if rates.size else prior
        rates[~fitted] = prior
        for k in np.flatnonzero(~fitted):
            sources[k] = _PRIOR
        r = self._importance(pages)
        intervals, k, bw, omega0, omega, t_max = self._intervals(r, rates)
        due, refile = self._folders(pages, intervals, touched | set(need), unit)
        fresh = np.zeros(pages.ids.size, dtype=bool)
        fresh[[pos_of[i] for i in need]] = True
        return Plan(unit, pages.ids, r, rates, sources, intervals, due, refile, k, omega0,
                    omega, bw, t_max, prior, len(evidence), top, evidence, pages, fresh)

    def _intervals(self, r: np.ndarray, rates: np.ndarray
                   ) -> tuple[np.ndarray, float, float, float, float, float]:
        s = self._s
        g = s.refresh_bandwidth
        kept = int(self._kept(r).sum())
        if g <= 0 or kept == 0:
            return np.full(r.size, np.inf), math.inf, 0.0, 0.0, 0.0, s.max_interval_units
        t_max = s.t_max_for(kept)
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
        go = refile & finite
        due[go] = self._refiled(pages.last_access[go], intervals[go], unit)
        due[refile & ~finite] = q.NO_UNIT
        return due, refile

    def _refiled(self, last_access: np.ndarray, intervals: np.ndarray, unit: int) -> np.ndarray:
        """Folder ⌊(t_last + t_i·unit)/unit⌋, not before the current unit."""
        unit_s = self._s.time_unit_s
        last = np.where(np.isnan(last_access), unit * unit_s, last_access)
        return np.maximum(folders_after(last, intervals, unit_s), unit)

    # -- the unit's fetch list ------------------------------------------------------------
    def due_now(self, unit: int, plan: Plan | None = None) -> list[tuple[str, int]]:
        """The unit's (url, priority) list from the full scan, due pages (REFRESH) then
        discovery (DISCOVERY), without writing anything (the check of :meth:`run_unit`)."""
        with _snapshot(self._conn):
            plan = self._full_plan(unit) if plan is None else plan
            return self._compose(unit, self._candidates(plan, unit))[0]

    def _candidates(self, plan: Plan, unit: int) -> _Candidates:
        """The full scan's due pages: planned, finite t_i, folder ≤ unit."""
        mask = (plan.due != q.NO_UNIT) & (plan.due <= unit)
        rate_s = self._rates_out(plan)
        return _Candidates(plan.ids[mask], refresh_weights(plan.importance[mask],
                                                           plan.rates[mask]),
                           plan.intervals[mask], rate_s[mask],
                           [plan.sources[k] for k in np.flatnonzero(mask)])

    def _rates_out(self, plan: Plan) -> np.ndarray:
        """urls.rate after this unit: the stored one for pages not re-estimated (so the
        ledger's Σλ matches the store exactly), λ/unit for the others and the prior."""
        unit_s = self._s.time_unit_s
        out = plan.rates / unit_s
        if plan.pages is not None and plan.estimated is not None:
            keep = ~plan.estimated & ~np.isnan(plan.pages.rate) & np.array(
                [src != _PRIOR for src in plan.sources], dtype=bool)
            out[keep] = plan.pages.rate[keep]
        return out

    def _compose(self, unit: int, due: _Candidates) -> tuple[list[tuple[str, int]],
                                                              UnitFetchList]:
        n_disc = int(round(self._s.discovery_share * self._s.bandwidth))
        spare = max(0, self._s.bandwidth - n_disc - due.ids.size)
        unread = np.asarray(q.unread_ranked(self._conn, n_disc + spare), dtype=np.int64)
        fetch = compose_unit(due.ids, due.priority, unread, self._s.bandwidth,
                             self._s.discovery_share)
        found = q.urls_and_depths(self._conn, np.concatenate((fetch.maintenance,
                                                              fetch.discovery)).tolist())
        out = [(found[int(i)][0], REFRESH) for i in fetch.maintenance]
        out += [(found[int(i)][0], DISCOVERY) for i in fetch.discovery]
        self.last_depths = dict(found.values())
        return out, fetch

    def offers(self, fetch: list[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
        """The fetch list as frontier offers per priority, in order: (url, stored depth).

        The frontier's admission checks ``scope.max_depth`` on the depth, and a refreshed
        page's links are offered at depth + 1 (DESIGN.md §2): a page at depth 16 refreshed
        as if it were a seed would let its new links past the limit. The depths are the
        ones read with the URLs (:attr:`last_depths`); an unknown one counts as a seed's.
        """
        by_priority: dict[int, list[tuple[str, int]]] = {}
        for url, priority in fetch:
            by_priority.setdefault(priority, []).append((url, self.last_depths.get(url, 0)))
        return by_priority

    # -- one unit --------------------------------------------------------------------------
    def run_unit(self, unit: int | None = None) -> list[tuple[str, int]]:
        """Plan (from the folders, or a full scan when the ledger must be rebuilt), write the
        refresh data, and return the unit's (url, priority) list."""
        started = self._clock.now()
        unit = self.current_unit() if unit is None else int(unit)
        with _snapshot(self._conn):
            ledger, jobs = self._valid_ledger()
            work = self._rebuild(unit, jobs) if ledger is None else \
                self._advance(ledger, unit, jobs)
            fetch_list, fetch = self._compose(unit, work.due)
        self._write(work, fetch)
        seconds = self._clock.now() - started  # on the injected clock, as JobRun's times
        led = work.ledger
        self._submit(JobRun("plan", started, self._clock.now(), "ok",
                            f"unit {unit}: {led.planned} planned, {work.n_estimated} "
                            f"estimated, {fetch.maintenance.size} due, "
                            f"{fetch.discovery.size} discovery, {fetch.deferred.size} "
                            f"deferred, {'full scan' if work.full_scan else 'folders'}, "
                            f"{seconds:.2f} s"))
        self.last_unit = UnitFigures(unit, led.planned, int(fetch.maintenance.size),
                                     int(fetch.discovery.size), int(fetch.deferred.size),
                                     float(work.omega_unclamped), float(work.omega), seconds,
                                     led.k, work.n_estimated, work.full_scan)
        return fetch_list

    def _write(self, work: _Work, fetch: UnitFetchList) -> None:
        """The unit's writes, in the order that lets the next unit trust the ledger: the
        run token first, the ledger (with the same token) after every page's data."""
        s, led, due = self._s, work.ledger, work.due
        refresh = dict(work.refresh)
        pos = {int(i): k for k, i in enumerate(due.ids)}
        for url_id, folder in _retry_folders(fetch, due, work.unit, pos):
            k = pos[url_id]
            t = float(due.intervals[k])
            refresh[url_id] = (float(due.rate_s[k]), due.sources[k], folder,
                               t if math.isfinite(t) else None)
        self._submit(SetState(RUN_KEY, led.token))
        self._submit(SetState(q.FOLDER_UNIT_KEY, s.time_unit_s))
        for url_id in sorted(refresh):
            self._submit(SetRefresh(url_id, *refresh[url_id]))
        if work.weights:
            ids = np.array(sorted(work.weights), dtype=np.int64)
            self._submit(SetWeights(ids, np.array([work.weights[int(i)] for i in ids])))
        self._submit(SetState(LEDGER_KEY, led.to_json()))
        self._submit(SetState(WATERMARK_KEY, work.watermark))
        self._submit(SetState("refresh.k", _finite(led.k)))
        self._submit(SetState("refresh.omega", work.omega))
        self._submit(SetState("refresh.prior_rate_per_unit", work.prior))

    def _valid_ledger(self) -> tuple[Ledger | None, int]:
        """The stored ledger if the folders can be trusted with it (module doc), else None;
        and the newest job run id (a ranking run after it will call for a rebuild)."""
        s = self._s
        text = q.state_value(self._conn, LEDGER_KEY)
        led = Ledger.from_json(text) if isinstance(text, str) else None
        jobs, ranked = q.rank_runs_after(self._conn, led.jobs_seen if led else 0)
        if led is None or q.state_value(self._conn, RUN_KEY) != led.token:
            return None, jobs
        if (led.unit_s, led.importance_source, led.importance_floor) != (
                s.time_unit_s, s.importance_source, s.importance_floor):
            return None, jobs
        return (None if ranked and s.importance_source != "uniform" else led), jobs

    # -- the full scan, and a ledger built from it -----------------------------------------
    def _rebuild(self, unit: int, jobs: int) -> _Work:
        """The unit from the full scan, and the ledger built from every page: O(N)."""
        s, conn = self._s, self._conn
        plan = self._full_plan(unit)
        pages = plan.pages
        assert pages is not None and plan.estimated is not None
        on_prior = np.array([src == _PRIOR for src in plan.sources], dtype=bool)
        kept = np.isfinite(plan.intervals)
        stored = _stored_keys(plan.importance, plan.rates, on_prior, kept, pages.weight)
        rate_s = self._rates_out(plan)
        fitted = ~on_prior
        level = self._level_of(plan, kept)
        water = WaterLedger({ESTIMATED: self._family(level, 1.0),
                             PRIOR: self._family(level, math.sqrt(plan.prior))})
        _add_keys(water, stored)
        refresh: dict[int, tuple[float | None, str | None, int | None, float | None]] = {}
        for k in np.flatnonzero(plan.refile):
            refresh[int(plan.ids[k])] = self._refresh_data(
                rate_s[k], plan.sources[k], plan.due[k], plan.intervals[k])
        changed = ~((stored == pages.weight) | (np.isnan(stored) & np.isnan(pages.weight)))
        weights = {int(i): float(w) for i, w in zip(pages.ids[changed], stored[changed])}
        for url_id in q.unplanned_leftovers(conn):  # left the plan: out of every sum
            refresh[url_id] = (None, None, None, None)
            weights[url_id] = math.nan
        ledger = Ledger(secrets.token_hex(8), unit, plan.watermark, jobs,
                        s.time_unit_s, s.importance_source,
                        s.importance_floor, level.k, int(plan.ids.size),
                        RateSum(rate_s[fitted] * s.time_unit_s), int(fitted.sum()), water)
        return _Work(unit, refresh, weights, self._candidates(plan, unit), ledger,
                     plan.omega_unclamped, plan.omega, plan.prior, plan.n_estimated,
                     plan.watermark, True)

    def _level_of(self, plan: Plan, kept: np.ndarray) -> WaterLevel:
        """The full scan's K as a :class:`WaterLevel` (where the ledger's bands go)."""
        s = self._s
        n = int(kept.sum())
        lo = 0.0 if math.isinf(plan.t_max_used) else 1.0 / plan.t_max_used
        hi = 1.0 / s.min_interval_units
        all_at_min = n * hi <= s.refresh_bandwidth or hi == lo
        return WaterLevel(plan.k, lo, hi, all_at_min)

    @staticmethod
    def _family(level: WaterLevel, scale: float) -> Family:
        """An empty family with its band edges at ``level`` (anywhere when K is not a
        water level: the next unit's solve places them)."""
        if math.isfinite(level.k) and not level.all_at_min:
            return Family(level.k * level.lo / scale, level.k * level.hi / scale)
        return Family()

    @staticmethod
    def _refresh_data(rate_s: float, source: str, due: int, interval: float
                      ) -> tuple[float | None, str | None, int | None, float | None]:
        """One page's SetRefresh fields (rate per second, source, folder, t_i)."""
        return (float(rate_s), source, None if due == q.NO_UNIT else int(due),
                float(interval) if math.isfinite(interval) else None)

    # -- the folder-based unit: O(G + pages changed) ----------------------------------------
    def _advance(self, led: Ledger, unit: int, jobs: int) -> _Work:
        """The unit from the folders and the ledger (module doc, steps 1–6)."""
        return _FolderUnit(self, led, unit, jobs).run()

    def _solve(self, led: Ledger, prior: float, overlay: dict[int, float]
               ) -> tuple[WaterLevel, float, float]:
        """K over every page in the ledger; also Ω(G) unclamped and Ω of the plan."""
        s = self._s
        g = s.refresh_bandwidth
        water = led.water
        water.family(ESTIMATED)
        water.family(PRIOR)
        scales = {ESTIMATED: 1.0, PRIOR: math.sqrt(prior)}
        t_max = s.t_max_for(water.n)
        if g <= 0 or water.n == 0:
            return WaterLevel(math.inf, 0.0, 1.0 / s.min_interval_units, False), 0.0, 0.0
        level = water.solve(scales, g, s.min_interval_units, t_max,
                            _StoredKeys(self._conn, overlay), led.k)
        total = water.weight_sum(scales)
        return (level, total * total / (2.0 * g),
                water.omega(level, scales, s.min_interval_units, t_max))

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


class _FolderUnit:
    """One unit from the folders and the ledger (module doc, steps 1–6): reads the pages
    observed since the last unit and the due folder, nothing else; updates ``led``. A part
    of :class:`RefreshPlanner` (it uses the planner's private helpers), apart for length."""

    def __init__(self, planner: RefreshPlanner, led: Ledger, unit: int, jobs: int) -> None:
        self.p, self.led, self.unit, self.jobs = planner, led, unit, jobs
        self.unit_s = planner._s.time_unit_s

    def run(self) -> _Work:
        self._read()
        self._take_out_leavers()
        prior0 = self.led.prior()
        evidence = self._reestimate(prior0)
        prior = self._account_rates(prior0)
        self._rekey()
        level, omega0, omega = self.p._solve(self.led, prior, self.overlay)
        t, due = self._folders(level)
        refresh, weights, cands = self._writes(t, due)
        s = self.p._s
        ledger = Ledger(secrets.token_hex(8), self.unit, self.top, self.jobs, self.unit_s,
                        s.importance_source, s.importance_floor, level.k, self.led.planned,
                        self.led.rate_sum, self.led.rate_count, self.led.water)
        return _Work(self.unit, refresh, weights, cands, ledger, omega0, omega, prior,
                     len(evidence), self.top, False)

    def _read(self) -> None:
        """Step 1: the observed pages and the due folder, and what becomes of each."""
        conn = self.p._conn
        self.top = q.max_observation_id(conn)
        touched = set(q.observed_since(conn, self.led.watermark, self.top))
        rows = self.rows = q.page_rows(conn, touched | set(q.due_ids(conn, self.unit)))
        self.accounted = ~np.isnan(rows.rate)  # in the ledger's sums
        filed = rows.due_unit != q.NO_UNIT
        keyed = ~np.isnan(rows.weight)
        # Not a fetched HTML/XML page any more: out of the plan, and of every sum.
        self.leaving = ~rows.is_planned & (self.accounted | keyed | filed)
        touched_mask = np.fromiter((int(i) in touched for i in rows.ids), dtype=bool,
                                   count=rows.ids.size)
        # Re-estimated: observed, never planned, or filed without a key (repair).
        self.need = rows.is_planned & (touched_mask | ~self.accounted | (~keyed & filed))
        self.sources = [src or "" for src in rows.rate_source]
        self.old_fitted = self.accounted & np.array([src != _PRIOR for src in self.sources],
                                                    dtype=bool)

    def _take_out_leavers(self) -> None:
        rows, leaving = self.rows, self.leaving
        _forget_rates(self.led, rows.rate[leaving & self.old_fitted] * self.unit_s)
        _forget_keys(self.led.water, rows.weight[leaving])
        self.led.planned -= int((leaving & self.accounted).sum())

    def _reestimate(self, prior0: float) -> dict[int, Evidence]:
        """Step 2: λ of the observed pages (changes per unit; NaN and "" when unread)."""
        rows = self.rows
        need_ids = [int(i) for i in rows.ids[self.need]]
        evidence = self.p._evidence(rows, need_ids, self.top, prior0)
        self.lam = rows.rate * self.unit_s
        for k in np.flatnonzero(self.need):
            ev = evidence.get(int(rows.ids[k]))
            self.lam[k], self.sources[k] = (ev.estimate.rate, ev.estimate.source.value) \
                if ev else (math.nan, _PRIOR)
        return evidence

    def _account_rates(self, prior0: float) -> float:
        """The deltas of Σλ (the prior's sum); returns the new prior. Sets the rates the
        unit plans with (λ per unit) and stores (per second)."""
        led, rows, need, u = self.led, self.rows, self.need, self.unit_s
        on_prior = np.array([src in ("", _PRIOR) for src in self.sources], dtype=bool)
        _forget_rates(led, rows.rate[need & self.old_fitted] * u)
        rate_s = np.where(need, self.lam / u, rows.rate)
        led.rate_sum.add(rate_s[need & ~on_prior] * u)
        led.rate_count += int((need & ~on_prior).sum())
        led.planned += int((need & ~self.accounted).sum())
        prior = led.prior(prior0)
        self.lam = np.where(on_prior, prior, np.where(need, self.lam, rows.rate * u))
        self.rate_s = np.where(on_prior, prior / u, rate_s)
        self.sources = [_PRIOR if p else src for p, src in zip(on_prior, self.sources)]
        self.on_prior = on_prior
        return prior

    def _rekey(self) -> None:
        """Step 3–4: r, the new weight keys of the re-estimated pages, S's deltas."""
        rows, need = self.rows, self.need
        self.r = r = self.p._importance(rows)
        lam = np.where(np.isnan(self.lam), 1.0, self.lam)
        self.w = np.sqrt(r * lam)  # √(r·λ), as the full scan computes it
        in_plan = rows.is_planned & ~self.leaving & self.p._kept(r)
        keys = np.where(self.on_prior, -np.sqrt(r), self.w)
        self.new_stored = np.where(need & in_plan, keys, np.nan)
        _forget_keys(self.led.water, rows.weight[need])
        _add_keys(self.led.water, self.new_stored[need])
        changed = self.leaving | need
        self.overlay = {int(i): float(w) for i, w in zip(rows.ids[changed],
                                                         self.new_stored[changed])}
        self.stays = rows.is_planned & ~self.leaving & (
            need & in_plan | ~need & ~np.isnan(rows.weight))

    def _folders(self, level: WaterLevel) -> tuple[np.ndarray, np.ndarray]:
        """Step 5: t_i at the new K, and the re-estimated pages' new folders."""
        rows = self.rows
        t = np.full(rows.ids.size, np.inf)
        if math.isfinite(level.k):
            t[self.stays] = level.intervals(self.w[self.stays])
        due = rows.due_unit.copy()
        go = self.need & np.isfinite(t)
        due[go] = self.p._refiled(rows.last_access[go], t[go], self.unit)
        due[~np.isfinite(t)] = q.NO_UNIT
        return t, due

    def _writes(self, t: np.ndarray, due: np.ndarray
                ) -> tuple[dict[int, tuple], dict[int, float], _Candidates]:
        """Step 6: the refresh data and keys to write, and the due pages."""
        rows, need = self.rows, self.need
        dropped = ~need & rows.is_planned & ~self.leaving & ~np.isfinite(t) & \
            (rows.due_unit != q.NO_UNIT)  # no longer refreshed (no refresh bandwidth)
        refresh: dict[int, tuple] = {}
        for k in np.flatnonzero(need | dropped):
            refresh[int(rows.ids[k])] = RefreshPlanner._refresh_data(
                self.rate_s[k], self.sources[k], due[k], t[k])
        for k in np.flatnonzero(self.leaving):
            refresh[int(rows.ids[k])] = (None, None, None, None)
        pos_of = {int(i): k for k, i in enumerate(rows.ids)}
        weights = {i: w for i, w in self.overlay.items()
                   if not _same(w, rows.weight[pos_of[i]])}
        mask = self.stays & np.isfinite(t) & (due != q.NO_UNIT) & (due <= self.unit)
        cands = _Candidates(rows.ids[mask], self.w[mask], t[mask], self.rate_s[mask],
                            [self.sources[k] for k in np.flatnonzero(mask)])
        return refresh, weights, cands


def _retry_folders(fetch: UnitFetchList, due: _Candidates, unit: int,
                   pos: dict[int, int]) -> Iterator[tuple[int, int]]:
    """Popped pages wait one interval (a fetch re-files them first); deferred: next unit."""
    for url_id in fetch.maintenance.tolist():
        t = float(due.intervals[pos[url_id]])
        yield url_id, unit + max(1, math.ceil(t))
    for url_id in fetch.deferred.tolist():
        yield url_id, unit + 1


def _forget_rates(led: Ledger, lam: np.ndarray) -> None:
    """Take estimated rates (changes per unit, as stored) out of the prior's sum."""
    if lam.size:
        led.rate_sum.remove(lam)
        led.rate_count -= int(lam.size)


def _stored_keys(r: np.ndarray, lam: np.ndarray, on_prior: np.ndarray, kept: np.ndarray,
                 before: np.ndarray) -> np.ndarray:
    """Weight keys as ``urls.weight`` stores them (NaN: not refreshed): √(r·λ), or −√r on
    the prior. A stored key equal to rounding (the rate was stored per second, so √(r·λ)
    of the stored rate can differ in the last bit) is kept, not rewritten."""
    keys = np.where(on_prior, -np.sqrt(r), np.sqrt(r * lam))
    new = np.where(kept, keys, np.nan)
    close = np.isclose(new, before, rtol=1e-12, atol=0.0)
    return np.where(close, before, new)


def _by_family(stored: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
    """Stored weight keys (NaN: none) split into (family, keys) (module constants)."""
    stored = stored[~np.isnan(stored)]
    for name, keys in ((ESTIMATED, stored[stored > 0]), (PRIOR, -stored[stored < 0])):
        if keys.size:
            yield name, keys


def _forget_keys(water: WaterLedger, stored: np.ndarray) -> None:
    """Take stored weight keys out of their families' bands."""
    for name, keys in _by_family(stored):
        water.family(name).remove(keys)


def _add_keys(water: WaterLedger, stored: np.ndarray) -> None:
    """Put stored weight keys into their families' bands."""
    for name, keys in _by_family(stored):
        water.family(name).add(keys)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


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
