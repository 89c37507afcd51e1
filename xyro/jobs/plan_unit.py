"""One unit of the refresh planner before its writes (DESIGN.md §6, 003 §6): worked out
either by rebuilding the ledger from the full scan (:func:`rebuild`, O(N)) or by advancing
it from the folders (:class:`FolderUnit`, O(G + pages changed since the last unit)).
:mod:`xyro.jobs.plan_job` decides which, writes the result and hands out the fetch list.
"""

from __future__ import annotations

import math
import secrets
import sqlite3
from dataclasses import dataclass

import numpy as np

from metadata import refresh_queries as q
from refresh import RateSum
from refresh.waterlevel import WaterLedger, WaterLevel
from xyro.jobs.plan_estimate import PRIOR_SOURCE, Evidence, PageEstimator
from xyro.jobs.plan_ledger import (ESTIMATED, PRIOR, Ledger, add_keys, family_at, forget_keys,
                                   forget_rates, level_of, solve, stored_keys)
from xyro.jobs.plan_scan import Candidates, FullScan, Plan, refiled, waited_past
from xyro.jobs.plan_settings import PlannerSettings

#: One page's SetRefresh fields: rate per second, rate source, folder, t_i (None: cleared).
RefreshData = tuple[float | None, str | None, int | None, float | None]


@dataclass(eq=False)
class UnitWork:
    """One unit before its writes: refresh data per page, weight keys, due candidates."""

    unit: int
    refresh: dict[int, RefreshData]
    weights: dict[int, float]  # stored key per page (NaN: NULL)
    due: Candidates
    ledger: Ledger
    omega_unclamped: float
    omega: float
    prior: float
    n_estimated: int
    watermark: int
    full_scan: bool
    verdicts: dict[int, bool]  # the re-estimated pages' own Last-Modified verdicts


def page_verdicts(evidence: dict[int, Evidence]) -> dict[int, bool]:
    """Each re-estimated page's own Last-Modified verdict, to store for its host's."""
    return {url_id: ev.page_verdict for url_id, ev in evidence.items()}


def refresh_data(rate_s: float, source: str, due: int, interval: float) -> RefreshData:
    """One page's SetRefresh fields (rate per second, source, folder, t_i)."""
    return (float(rate_s), source, None if due == q.NO_UNIT else int(due),
            float(interval) if math.isfinite(interval) else None)


# -- the full scan, and a ledger built from it ----------------------------------------------
def rebuild(conn: sqlite3.Connection, scan: FullScan, s: PlannerSettings, plan: Plan,
            unit: int, jobs: int) -> UnitWork:
    """The unit from the full scan ``plan``, and the ledger built from every page: O(N)."""
    pages = plan.pages
    assert pages is not None and plan.estimated is not None
    on_prior = np.array([src == PRIOR_SOURCE for src in plan.sources], dtype=bool)
    kept = np.isfinite(plan.intervals)
    stored = stored_keys(plan.importance, plan.rates, on_prior, kept, pages.weight)
    rate_s = scan.rates_out(plan)
    fitted = ~on_prior
    level = level_of(s, plan, kept)
    water = WaterLedger({ESTIMATED: family_at(level, 1.0),
                         PRIOR: family_at(level, math.sqrt(plan.prior))})
    add_keys(water, stored)
    refresh: dict[int, RefreshData] = {}
    for k in np.flatnonzero(plan.refile):
        refresh[int(plan.ids[k])] = refresh_data(
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
    return UnitWork(unit, refresh, weights, scan.candidates(plan, unit), ledger,
                    plan.omega_unclamped, plan.omega, plan.prior, plan.n_estimated,
                    plan.watermark, True, page_verdicts(plan.evidence))


# -- the folder-based unit: O(G + pages changed) --------------------------------------------
class FolderUnit:
    """One unit from the folders and the ledger (:mod:`xyro.jobs.plan_job`, steps 1–6):
    reads the pages observed since the last unit and the due folder, nothing else; updates
    ``led``."""

    def __init__(self, conn: sqlite3.Connection, estimator: PageEstimator,
                 settings: PlannerSettings, led: Ledger, unit: int, jobs: int) -> None:
        self.conn, self.est, self.s = conn, estimator, settings
        self.led, self.unit, self.jobs = led, unit, jobs
        self.unit_s = settings.time_unit_s

    def run(self) -> UnitWork:
        self._read()
        self._take_out_leavers()
        prior0 = self.led.prior()
        evidence = self._reestimate(prior0)
        prior = self._account_rates(prior0)
        self._rekey()
        level, omega0, omega = solve(self.conn, self.s, self.led, prior, self.overlay)
        t, due = self._folders(level)
        refresh, weights, cands = self._writes(t, due)
        s = self.s
        ledger = Ledger(secrets.token_hex(8), self.unit, self.top, self.jobs, self.unit_s,
                        s.importance_source, s.importance_floor, level.k, self.led.planned,
                        self.led.rate_sum, self.led.rate_count, self.led.water)
        return UnitWork(self.unit, refresh, weights, cands, ledger, omega0, omega, prior,
                        len(evidence), self.top, False, page_verdicts(evidence))

    def _read(self) -> None:
        """Step 1: the observed pages and the due folder, and what becomes of each."""
        conn = self.conn
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
        self.old_fitted = self.accounted & np.array(
            [src != PRIOR_SOURCE for src in self.sources], dtype=bool)

    def _take_out_leavers(self) -> None:
        rows, leaving = self.rows, self.leaving
        forget_rates(self.led, rows.rate[leaving & self.old_fitted] * self.unit_s)
        forget_keys(self.led.water, rows.weight[leaving])
        self.led.planned -= int((leaving & self.accounted).sum())

    def _reestimate(self, prior0: float) -> dict[int, Evidence]:
        """Step 2: λ of the observed pages (changes per unit; NaN and "" when unread)."""
        rows = self.rows
        need_ids = [int(i) for i in rows.ids[self.need]]
        evidence = self.est.evidence(rows, need_ids, self.top, prior0)
        self.lam = rows.rate * self.unit_s
        for k in np.flatnonzero(self.need):
            ev = evidence.get(int(rows.ids[k]))
            self.lam[k], self.sources[k] = (ev.estimate.rate, ev.estimate.source.value) \
                if ev else (math.nan, PRIOR_SOURCE)
        return evidence

    def _account_rates(self, prior0: float) -> float:
        """The deltas of Σλ (the prior's sum); returns the new prior. Sets the rates the
        unit plans with (λ per unit) and stores (per second)."""
        led, rows, need, u = self.led, self.rows, self.need, self.unit_s
        on_prior = np.array([src in ("", PRIOR_SOURCE) for src in self.sources], dtype=bool)
        forget_rates(led, rows.rate[need & self.old_fitted] * u)
        rate_s = np.where(need, self.lam / u, rows.rate)
        led.rate_sum.add(rate_s[need & ~on_prior] * u)
        led.rate_count += int((need & ~on_prior).sum())
        led.planned += int((need & ~self.accounted).sum())
        prior = led.prior(prior0)
        self.lam = np.where(on_prior, prior, np.where(need, self.lam, rows.rate * u))
        self.rate_s = np.where(on_prior, prior / u, rate_s)
        self.sources = [PRIOR_SOURCE if p else src for p, src in zip(on_prior, self.sources)]
        self.on_prior = on_prior
        return prior

    def _rekey(self) -> None:
        """Step 3–4: r, the new weight keys of the re-estimated pages, S's deltas."""
        rows, need = self.rows, self.need
        self.r = r = self.est.importance(rows)
        lam = np.where(np.isnan(self.lam), 1.0, self.lam)
        self.w = np.sqrt(r * lam)  # √(r·λ), as the full scan computes it
        in_plan = rows.is_planned & ~self.leaving & self.est.kept(r)
        keys = np.where(self.on_prior, -np.sqrt(r), self.w)
        self.new_stored = np.where(need & in_plan, keys, np.nan)
        forget_keys(self.led.water, rows.weight[need])
        add_keys(self.led.water, self.new_stored[need])
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
        due[go] = refiled(rows.last_access[go], t[go], self.unit, self.unit_s)
        due[~np.isfinite(t)] = q.NO_UNIT
        return t, due

    def _writes(self, t: np.ndarray, due: np.ndarray
                ) -> tuple[dict[int, RefreshData], dict[int, float], Candidates]:
        """Step 6: the refresh data and keys to write, and the due pages."""
        rows, need = self.rows, self.need
        dropped = ~need & rows.is_planned & ~self.leaving & ~np.isfinite(t) & \
            (rows.due_unit != q.NO_UNIT)  # no longer refreshed (no refresh bandwidth)
        refresh: dict[int, RefreshData] = {}
        for k in np.flatnonzero(need | dropped):
            refresh[int(rows.ids[k])] = refresh_data(
                self.rate_s[k], self.sources[k], due[k], t[k])
        for k in np.flatnonzero(self.leaving):
            refresh[int(rows.ids[k])] = (None, None, None, None)
        pos_of = {int(i): k for k, i in enumerate(rows.ids)}
        weights = {i: w for i, w in self.overlay.items()
                   if not _same(w, rows.weight[pos_of[i]])}
        mask = self.stays & np.isfinite(t) & (due != q.NO_UNIT) & (due <= self.unit)
        # The t_max this unit's K was solved with (plan_ledger.solve), as the full scan's.
        t_max = self.s.t_max_for(self.led.water.n)
        cands = Candidates(rows.ids[mask], self.w[mask], t[mask], self.rate_s[mask],
                           [self.sources[k] for k in np.flatnonzero(mask)],
                           waited_past(rows.last_access[mask], t_max, self.unit, self.unit_s))
        return refresh, weights, cands


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b
