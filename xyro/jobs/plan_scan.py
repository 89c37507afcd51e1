"""The refresh planner's full scan (DESIGN.md §6): every page estimated and planned, O(N).

It is ``xyro plan``, ``--explain``, the check the tests compare the folder-based unit with,
and what a ledger is rebuilt from (:mod:`xyro.jobs.plan_unit`). It writes nothing.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field

import numpy as np

from metadata import refresh_queries as q
from refresh import refresh_intervals, refresh_weights
from refresh.folders import folders_after
from xyro.jobs.plan_estimate import PRIOR_SOURCE, Evidence, PageEstimator
from xyro.jobs.plan_settings import PlannerSettings


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


@dataclass(eq=False)
class Candidates:
    """The unit's due pages (ascending id) and what their refresh data becomes."""

    ids: np.ndarray
    priority: np.ndarray   # √(r·λ)
    intervals: np.ndarray  # t_i in units
    rate_s: np.ndarray     # what urls.rate holds after this unit (changes per second)
    sources: list[str]
    overdue: np.ndarray    # bool: unread for longer than t_max (:func:`waited_past`)


class FullScan:
    """Estimate and plan every page of the store read through ``conn`` (module doc)."""

    def __init__(self, conn: sqlite3.Connection, estimator: PageEstimator,
                 settings: PlannerSettings) -> None:
        self._conn = conn
        self._est = estimator
        self._s = settings

    def plan(self, unit: int, watermark: int) -> Plan:
        """The plan of ``unit``; pages observed after ``watermark`` (the last observation id
        accounted for) are re-estimated, with those never estimated."""
        s, conn, est = self._s, self._conn, self._est
        pages = q.planned_pages(conn)
        top = q.max_observation_id(conn)
        touched = set(q.observed_since(conn, watermark, top))
        rates = pages.rate * s.time_unit_s  # changes per unit; NaN: never estimated
        sources = [src or "" for src in pages.rate_source]
        need = [int(i) for i, r in zip(pages.ids, rates) if math.isnan(r) or int(i) in touched]
        # The prior for this pass: the mean of the stored estimated rates.
        estimated = [not (math.isnan(r) or src == PRIOR_SOURCE)
                     for r, src in zip(rates, sources)]
        prior = _mean_or(rates[np.asarray(estimated, dtype=bool)], 1.0) if rates.size else 1.0
        evidence = est.evidence(pages, need, top, prior)
        pos_of = {int(i): k for k, i in enumerate(pages.ids)}
        for url_id, ev in evidence.items():
            rates[pos_of[url_id]] = ev.estimate.rate
            sources[pos_of[url_id]] = ev.estimate.source.value
        # Fresh estimates move the prior; pages still on the prior follow it.
        fitted = np.array([src not in ("", PRIOR_SOURCE) for src in sources], dtype=bool)
        prior = _mean_or(rates[fitted], prior) if rates.size else prior
        rates[~fitted] = prior
        for k in np.flatnonzero(~fitted):
            sources[k] = PRIOR_SOURCE
        r = est.importance(pages)
        intervals, k, bw, omega0, omega, t_max = self._intervals(r, rates)
        due, refile = self._folders(pages, intervals, touched | set(need), unit,
                                    self._intervals_shrank(), self._unit_changed())
        fresh = np.zeros(pages.ids.size, dtype=bool)
        fresh[[pos_of[i] for i in need]] = True
        return Plan(unit, pages.ids, r, rates, sources, intervals, due, refile, k, omega0,
                    omega, bw, t_max, prior, len(evidence), top, evidence, pages, fresh)

    def _intervals(self, r: np.ndarray, rates: np.ndarray
                   ) -> tuple[np.ndarray, float, float, float, float, float]:
        s = self._s
        g = s.refresh_bandwidth
        kept = int(self._est.kept(r).sum())
        if g <= 0 or kept == 0:
            return np.full(r.size, np.inf), math.inf, 0.0, 0.0, 0.0, s.max_interval_units
        t_max = s.t_max_for(kept)
        p = refresh_intervals(r, rates, g, s.min_interval_units, t_max, s.importance_floor)
        return p.intervals, p.k, p.bandwidth, p.omega_unclamped, p.omega, t_max

    def _intervals_shrank(self) -> bool:
        """Whether the folders were filed for longer intervals than this plan's: a refresh
        bandwidth larger than theirs (discovery's end, ρ → 0, or a larger G), or a smaller
        t_max (``refresh.max_interval_units``)."""
        filed_for = q.state_value(self._conn, q.BANDWIDTH_KEY)
        t_max = q.state_value(self._conn, q.MAX_INTERVAL_KEY)
        return (isinstance(filed_for, (int, float)) and filed_for < self._s.refresh_bandwidth
                or isinstance(t_max, (int, float)) and t_max > self._s.max_interval_units)

    def _unit_changed(self) -> bool:
        """Whether the folders are numbered in another time unit (``refresh.time_unit_s``
        changed): each stored folder, read in this unit, would be years away or long past."""
        filed_in = q.state_value(self._conn, q.FOLDER_UNIT_KEY)
        return isinstance(filed_in, (int, float)) and filed_in != self._s.time_unit_s

    def _folders(self, pages: q.PlannedPages, intervals: np.ndarray, touched: set[int],
                 unit: int, pull_forward: bool = False, refile_all: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Folders after this run: re-filed from the last access for touched, unfiled and
        no-longer-refreshed pages (every page with ``refile_all``: the folders were numbered
        in another time unit); the stored folder for the others.

        With ``pull_forward`` (the refresh bandwidth grew or t_max shrank, so t_i did) a
        page whose new folder comes before its stored one is re-filed too: left where it was,
        it would wait for the longer interval of the smaller bandwidth, up to t_max units (measured
        in tests/bench/e2e_freshness.py: 13 units after discovery's end, 14 to 28 % of the
        pages with intervals under 24 units had waited longer than their interval). A page
        its new t_i makes overdue goes to this unit's folder; those beyond G are deferred
        unit by unit, the most valuable first."""
        due = pages.due_unit.copy()
        finite = np.isfinite(intervals)
        is_touched = np.fromiter((int(i) in touched for i in pages.ids), dtype=bool,
                                 count=pages.ids.size)
        refile = is_touched | ((due == q.NO_UNIT) & finite) | ((due != q.NO_UNIT) & ~finite)
        if refile_all:
            refile |= finite
        new = np.full(due.shape, q.NO_UNIT, dtype=due.dtype)
        new[finite] = refiled(pages.last_access[finite], intervals[finite], unit,
                              self._s.time_unit_s)
        if pull_forward:
            refile |= finite & (due != q.NO_UNIT) & (new < due)
        go = refile & finite
        due[go] = new[go]
        due[refile & ~finite] = q.NO_UNIT
        return due, refile

    def candidates(self, plan: Plan, unit: int) -> Candidates:
        """The full scan's due pages: planned, finite t_i, folder ≤ unit."""
        assert plan.pages is not None
        mask = (plan.due != q.NO_UNIT) & (plan.due <= unit)
        rate_s = self.rates_out(plan)
        return Candidates(plan.ids[mask], refresh_weights(plan.importance[mask],
                                                          plan.rates[mask]),
                          plan.intervals[mask], rate_s[mask],
                          [plan.sources[k] for k in np.flatnonzero(mask)],
                          waited_past(plan.pages.last_access[mask], plan.t_max_used, unit,
                                      self._s.time_unit_s))

    def rates_out(self, plan: Plan) -> np.ndarray:
        """urls.rate after this unit: the stored one for pages not re-estimated (so the
        ledger's Σλ matches the store exactly), λ/unit for the others and the prior."""
        unit_s = self._s.time_unit_s
        out = plan.rates / unit_s
        if plan.pages is not None and plan.estimated is not None:
            keep = ~plan.estimated & ~np.isnan(plan.pages.rate) & np.array(
                [src != PRIOR_SOURCE for src in plan.sources], dtype=bool)
            out[keep] = plan.pages.rate[keep]
        return out


def refiled(last_access: np.ndarray, intervals: np.ndarray, unit: int,
            unit_s: float) -> np.ndarray:
    """Folder ⌊(t_last + t_i·unit)/unit⌋, not before the current unit."""
    last = np.where(np.isnan(last_access), unit * unit_s, last_access)
    return np.maximum(folders_after(last, intervals, unit_s), unit)


def waited_past(last_access: np.ndarray, t_max: float, unit: int,
                unit_s: float) -> np.ndarray:
    """Which pages, last read at ``last_access`` (clock seconds; NaN: never), had gone
    unread for longer than t_max units when ``unit`` began. ``refresh.compose_unit`` hands
    them out before every other due page, whatever their √(r·λ): the folders hold about as
    many pages a unit as it has slots, and with deferral by weight alone the lightest pages
    could wait far past t_max (DESIGN.md §6 clamps t_i to t_max to bound that wait)."""
    return unit * unit_s - np.asarray(last_access, dtype=np.float64) > t_max * unit_s


def _mean_or(values: np.ndarray, default: float) -> float:
    values = values[np.isfinite(values) & (values > 0)]
    return float(values.mean()) if values.size else default
