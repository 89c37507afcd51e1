"""The refresh planner over the metadata store (``xyro plan`` and the daemon's unit job).

Each time unit (DESIGN.md §6, 003 §6) :meth:`RefreshPlanner.run_unit` works on the persisted
folders in O(G + pages changed since the last unit); it reads nothing else:

1. the pages observed since the last unit (``observations`` rows after the watermark, by
   row id) and the due folder (``urls.due_unit ≤ unit``, by the partial index ``urls_due``);
2. λ_i is re-estimated for the observed pages (:mod:`xyro.jobs.plan_estimate`: the
   Last-Modified estimator where the dates are reliable, else the signature MLE of eq. 9);
   a page read once takes the prior, the mean rate of the estimated pages (obsolescence is
   linear in λ, so the mean is the plug-in), and follows it as it moves;
3. r_i: direct importance for XML pages, interest for HTML pages (mean 1), 1 when missing
   or with ``importance_source: uniform`` (direct importance for every page with
   ``importance``); below the importance floor: never refreshed;
4. S = Σ√(r_i·λ_i) is updated by the deltas of the pages re-estimated (003 §6.6), split in
   the clamp bands of :mod:`refresh.waterlevel`, and K solved with the water-filling clamp
   correction: t_i = K/√(r_i·λ_i) within [min_interval_units, max_interval_units] and
   Σ 1/t_i = G − round(ρ·G), the slots a unit leaves due pages (all of G once
   :data:`DISCOVERY_END_UNITS` units in a row began with no page unread), the water level
   a full solve over every page gives;
5. the observed pages are re-filed into folder ⌊(t_last + t_i·unit)/unit⌋
   (:func:`refresh.folders.folders_after`; the metadata writer already re-filed them with
   their previous t_i when it applied their fetch, ``refresh_queries.refiled_after_fetch``);
6. the unit's fetch list: the due folder (priority REFRESH: the pages unread for longer
   than t_max first, then highest √(r·λ) first, :func:`~xyro.jobs.plan_scan.waited_past`)
   plus round(ρ·G) unread pages by OPIC cash, else importance (priority DISCOVERY: the
   first entries of the index ``urls_unread``), via ``refresh.compose_unit``. Popped pages
   move to a retry folder one interval later (a fetch re-files them from the fetch time;
   a lost fetch comes due again); deferred ones stay in their folder, past by then and read
   with the due folder of the next unit (every folder ≤ unit): re-filed, a backlog (after
   downtime) would be rewritten every unit until served, O(N²/G) writes in all. When the
   due folder and the unread pages leave part of G unused, the pages of the next folders
   fill it (earliest folder first, read at the end of the unit): a page is read after its
   due time, never before, so the folders hold a little less than G a unit on average
   (3.5 % in tests/bench/e2e_freshness.py) and the bandwidth would otherwise go unspent
   while work exists.

What carries over between units is the *ledger*, one JSON value of the ``state`` table
(:mod:`xyro.jobs.plan_ledger`: the observation watermark, Σλ of the estimated pages whose
mean is the prior, the water-level bands, K, and the settings they were built with) and each
page's weight key ``urls.weight`` (schema v4). Steps 1–5 and the due pages of step 6 are
:class:`~xyro.jobs.plan_unit.FolderUnit`; :meth:`RefreshPlanner.run_unit` composes the fetch
list and writes. A unit runs the full scan instead (:mod:`xyro.jobs.plan_scan`, O(N): it is
also ``xyro plan``, ``--explain`` and the check the tests compare with) and rebuilds the
ledger (:func:`~xyro.jobs.plan_unit.rebuild`) when there is none, when the previous unit's
writes were not all applied (a crash: its token, written first, differs from the ledger's,
written last), when the time unit, the importance source or the floor changed, or after a
ranking run: every r_i changed then, and 003 §6.6 updates S "after the Page Rank process"
too; and when the refresh bandwidth G − round(ρ·G) changed (the configuration, discovery's
end: all of G refreshes once :data:`DISCOVERY_END_UNITS` units in a row began with no page
unread, or its return: at once when a page is unread again). A larger bandwidth shortens every t_i,
so that rebuild also pulls forward the pages filed for their longer intervals
(:meth:`~xyro.jobs.plan_scan.FullScan._folders`).

Rates are stored as changes per second (``urls.rate``), planned in changes per unit.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from metadata import JobRun, Op, SetRefresh, SetState
from metadata import refresh_queries as q
from metadata.records import SetLastModifiedVerdicts, SetWeights
from refresh import UnitFetchList, baseline_priority, compose_unit
from refresh.discovery import discovery_slots
from xyro.clock import Clock, unit_index
from xyro.crawl.frontier import DISCOVERY, REFRESH
from xyro.errors import XyroError
from xyro.jobs.plan_estimate import PageEstimator
from xyro.jobs.plan_explain import explain, finite
from xyro.jobs.plan_ledger import Ledger
from xyro.jobs.plan_scan import Candidates, FullScan, Plan
from xyro.jobs.plan_settings import PlannerSettings
from xyro.jobs.plan_unit import FolderUnit, UnitWork, rebuild

WATERMARK_KEY = "refresh.observations_done"
LEDGER_KEY = "refresh.ledger"
RUN_KEY = "refresh.run"  # the token of the last unit whose writes began
LATEST_IN_UNIT = 0.8  # a due page waits at most this far into its unit (share of the unit)
#: Units in a row that must begin with nothing to discover (no unread page, no failed one
#: due for another try) before discovery's share ρG goes to refresh. Every change of the
#: refresh bandwidth re-plans every page (a full scan, O(N) reads and writes), and in a
#: mature scoped crawl a trickle of new links empties and refills the unread set unit after
#: unit: dropping ρ at the first empty unit rebuilt the ledger nearly every unit (5 s of
#: planning and 300,000 writes a unit at 300,000 pages). While ρ waits, no slot idles
#: (refresh.compose_unit hands discovery's idle slots to due pages, :meth:`_ahead` the rest
#: to the next folders); a page unread again brings ρ back at once: discovery never waits.
DISCOVERY_END_UNITS = 10


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
    ahead: int = 0


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
        self._empty_since = self._unread_empty_since(settings)
        if self._empty_since is not None and \
                unit_index(clock.now(), settings.time_unit_s) - self._empty_since + 1 >= \
                DISCOVERY_END_UNITS:
            # Nothing left to discover: all of G refreshes (compose_unit would hand the idle
            # discovery share to due pages, but the intervals must be planned for it too).
            settings = replace(settings, discovery_share=0.0)
        self._s = settings
        self._est = PageEstimator(conn, settings)
        self._scan = FullScan(conn, self._est, settings)
        self.last_unit: UnitFigures | None = None  # set by run_unit
        #: Stored link depth of each URL of the last fetch list (run_unit, due_now): what
        #: the frontier's admission needs, read with the URLs by primary key.
        self.last_depths: dict[str, int] = {}
        self.due_at: dict[str, float] = {}  # clock time each refreshed page falls due

    def _unread_empty_since(self, s: PlannerSettings) -> int | None:
        """The first of the units in a row, the current one included, that began with
        nothing to discover (:data:`DISCOVERY_END_UNITS`); None when there is something now
        or ρ = 0. A unit, not a count, is stored: a unit planned twice (a restart within
        it) counts once."""
        conn, now = self._conn, self._clock.now()
        if s.discovery_share <= 0 or q.unread_ranked(conn, 1) or \
                q.retries_due(conn, now, s.time_unit_s, 1):
            return None
        unit = unit_index(now, s.time_unit_s)
        since = q.state_value(conn, q.UNREAD_EMPTY_SINCE_KEY)
        # A unit ahead of the clock (the time unit grew): the run of units starts again.
        return since if isinstance(since, int) and since <= unit else unit

    # -- time ------------------------------------------------------------------------------
    def current_unit(self) -> int:
        return unit_index(self._clock.now(), self._s.time_unit_s)

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
        return self._scan.plan(unit, self._watermark())

    def explain(self, url: str, plan: Plan | None = None) -> dict[str, Any]:
        """r, λ and its evidence, t and the folder of one page (``xyro plan --explain``)."""
        return explain(self._conn, self._est, self._s, url,
                       self.plan if plan is None else lambda: plan)

    # -- the unit's fetch list ------------------------------------------------------------
    def due_now(self, unit: int, plan: Plan | None = None) -> list[tuple[str, int]]:
        """The unit's (url, priority) list from the full scan, due pages (REFRESH) then
        discovery (DISCOVERY), without writing anything (the check of :meth:`run_unit`)."""
        with _snapshot(self._conn):
            plan = self._full_plan(unit) if plan is None else plan
            refiled: dict[int, int | None] = {
                int(plan.ids[k]): None if plan.due[k] == q.NO_UNIT else int(plan.due[k])
                for k in np.flatnonzero(plan.refile)}
            refiled.update(dict.fromkeys(q.unplanned_leftovers(self._conn)))  # as rebuild()
            return self._compose(unit, self._scan.candidates(plan, unit), refiled)[0]

    def _compose(self, unit: int, due: Candidates, refiled: dict[int, int | None]
                 ) -> tuple[list[tuple[str, int]], UnitFetchList, np.ndarray]:
        """The unit's fetch list; ``refiled``: the folder this unit files each page it
        re-files in (None: none), which overrides the stored one for :meth:`_ahead`."""
        if self._s.policy != "planner":  # a baseline to measure against: its own due list
            due = self._baseline_due()
        n_disc = discovery_slots(self._s.bandwidth, self._s.discovery_share)
        spare = max(0, self._s.bandwidth - n_disc - due.ids.size)
        unread = self._unread(n_disc + spare)
        fetch = compose_unit(due.ids, due.priority, unread, self._s.bandwidth,
                             self._s.discovery_share, due.overdue)
        ahead = (self._ahead(unit, fetch, refiled) if self._s.policy == "planner"
                 else np.empty(0, dtype=np.int64))
        found = q.urls_and_depths(self._conn, np.concatenate(
            (fetch.maintenance, ahead, fetch.discovery)).tolist())
        out = [(found[int(i)][0], REFRESH) for i in (*fetch.maintenance, *ahead)]
        out += [(found[int(i)][0], DISCOVERY) for i in fetch.discovery]
        self.last_depths = {url: depth for url, depth, _ in found.values()}
        self.due_at = ({**self._due_times(due, fetch, found),
                        **dict.fromkeys((found[int(i)][0] for i in ahead), self._latest())}
                       if self._s.policy == "planner" else {})
        return out, fetch, ahead

    def _unread(self, limit: int) -> np.ndarray:
        """Up to ``limit`` pages to discover: never-loaded pages whose failed fetches are
        due for another try first (their links led here, and the failure may have been
        passing), then unread URLs in OPIC order."""
        retry = q.retries_due(self._conn, self._clock.now(), self._s.time_unit_s, limit)
        unread = q.unread_ranked(self._conn, limit - len(retry))
        return np.asarray(retry + unread, dtype=np.int64)

    def _ahead(self, unit: int, fetch: UnitFetchList, refiled: dict[int, int | None]
               ) -> np.ndarray:
        """Up to the part of G the unit leaves unused, pages of the next folders, the
        earliest folder first (then by id), each in the folder this unit leaves it in.
        None read in this unit already: a plan made again within the unit (a restart) would
        otherwise read them twice in it, which one made at its start cannot."""
        room = self._s.bandwidth - fetch.maintenance.size - fetch.discovery.size
        if room <= 0:
            return np.empty(0, dtype=np.int64)
        taken = set(fetch.maintenance.tolist()) | set(fetch.discovery.tolist())
        # The stored folders, but those of the pages re-filed this unit: at most
        # len(refiled) of the first room + len(refiled) are replaced.
        unit_start = unit * self._s.time_unit_s
        stored = q.next_folders(self._conn, unit, room + len(refiled), unit_start)
        later = [(f, i) for i, f in stored if i not in refiled and i not in taken]
        read_now = set(q.read_since(self._conn, refiled, unit_start))
        later += [(f, i) for i, f in refiled.items()
                  if f is not None and f > unit and i not in taken and i not in read_now]
        later.sort()
        return np.array([i for _, i in later[:room]], dtype=np.int64)

    def _latest(self) -> float:
        """The latest clock time a page offered this unit waits for (LATEST_IN_UNIT)."""
        unit_s = self._s.time_unit_s
        return (math.floor(self._clock.now() / unit_s) + LATEST_IN_UNIT) * unit_s

    def _due_times(self, due: Candidates, fetch: UnitFetchList,
                   found: dict[int, tuple[str, int, float | None]]) -> dict[str, float]:
        """When each page taken from the due folder is due, t_last + t_i: its folder is the
        unit that time falls in (⌊(t_last + t_i)/unit⌋), so fetched as soon as the unit's
        plan is queued it would come up to a unit early, every time, and the plan's
        Σ 1/t_i = G would be overspent by the pages of short intervals at the expense of
        the others (measured: tests/bench/e2e_freshness.py)."""
        interval = dict(zip(due.ids.tolist(), due.intervals.tolist()))
        # This unit's re-estimate may have moved a page's due time past the unit: it still
        # goes in this unit, late in it (its folder said so; the next plan re-files it).
        unit_s = self._s.time_unit_s
        latest = self._latest()
        out: dict[str, float] = {}
        for url_id in fetch.maintenance.tolist():
            url, _, last = found[url_id]
            t = interval.get(url_id, math.nan)
            if last is not None and math.isfinite(t):
                out[url] = min(last + t * unit_s, latest)
        return out

    def _baseline_due(self) -> Candidates:
        """Every fetched page, prioritized by ``refresh.policy`` (``refresh.baselines``):
        one full scan a unit, as a crawler without folders would do. Pages with no rate
        estimate yet take the mean of the estimated ones."""
        pages = q.planned_pages(self._conn)
        unit_s = self._s.time_unit_s
        lam = pages.rate * unit_s
        known = np.isfinite(lam) & (lam > 0)
        prior = float(lam[known].mean()) if known.any() else 1.0
        lam = np.where(known, lam, prior)
        age = np.maximum(self._clock.now() - np.nan_to_num(pages.last_access), 0.0) / unit_s
        score = baseline_priority(self._s.policy, age, lam, self._s.max_interval_units)
        # No overdue group: a baseline's score ranks the pages past t_max first itself.
        return Candidates(pages.ids, score, np.full(pages.ids.size, np.nan), pages.rate,
                          list(pages.rate_source), np.zeros(pages.ids.size, dtype=bool))

    def offers(self, fetch: list[tuple[str, int]]) -> dict[int, list[tuple[str, int, float]]]:
        """The fetch list as frontier offers per priority, in order: (url, stored depth,
        not before): a page from the due folder waits for the moment it is due
        (:meth:`_due_times`).

        The frontier's admission checks ``scope.max_depth`` on the depth, and a refreshed
        page's links are offered at depth + 1 (DESIGN.md §2): a page at depth 16 refreshed
        as if it were a seed would let its new links past the limit. The depths are the
        ones read with the URLs (:attr:`last_depths`); an unknown one counts as a seed's.
        """
        by_priority: dict[int, list[tuple[str, int, float]]] = {}
        for url, priority in fetch:
            by_priority.setdefault(priority, []).append(
                (url, self.last_depths.get(url, 0), self.due_at.get(url, 0.0)))
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
            fetch_list, fetch, ahead = self._compose(
                unit, work.due, {i: data[2] for i, data in work.refresh.items()})
        # A baseline's fetch list is not the folders' due list: their pages stay filed.
        self._write(work, fetch if self._s.policy == "planner" else None)
        seconds = self._clock.now() - started  # on the injected clock, as JobRun's times
        led = work.ledger
        self._submit(JobRun("plan", started, self._clock.now(), "ok",
                            f"unit {unit}: {led.planned} planned, {work.n_estimated} "
                            f"estimated, {fetch.maintenance.size} due, "
                            f"{fetch.discovery.size} discovery, {fetch.deferred.size} "
                            f"deferred, {ahead.size} ahead, "
                            f"{'full scan' if work.full_scan else 'folders'}, "
                            f"{seconds:.2f} s"))
        self.last_unit = UnitFigures(unit, led.planned, int(fetch.maintenance.size),
                                     int(fetch.discovery.size), int(fetch.deferred.size),
                                     float(work.omega_unclamped), float(work.omega), seconds,
                                     led.k, work.n_estimated, work.full_scan,
                                     int(ahead.size))
        return fetch_list

    def _write(self, work: UnitWork, fetch: UnitFetchList | None) -> None:
        """The unit's writes, in the order that lets the next unit trust the ledger: the
        run token first, the ledger (with the same token) after every page's data. The
        pages of ``fetch`` taken from the due folder move to their retry folder."""
        s, led, due = self._s, work.ledger, work.due
        refresh = dict(work.refresh)
        pos = {int(i): k for k, i in enumerate(due.ids)}
        moved = () if fetch is None else _retry_folders(fetch, due, work.unit, pos)
        for url_id, folder in moved:
            k = pos[url_id]
            t = float(due.intervals[k])
            refresh[url_id] = (float(due.rate_s[k]), due.sources[k], folder,
                               t if math.isfinite(t) else None)
        self._submit(SetState(RUN_KEY, led.token))
        self._submit(SetState(q.FOLDER_UNIT_KEY, s.time_unit_s))
        # The writer bounds a failing page's back-off by t_max (refresh_queries).
        self._submit(SetState(q.MAX_INTERVAL_KEY, s.max_interval_units))
        for url_id in sorted(refresh):
            self._submit(SetRefresh(url_id, *refresh[url_id]))
        if work.weights:
            ids = np.array(sorted(work.weights), dtype=np.int64)
            self._submit(SetWeights(ids, np.array([work.weights[int(i)] for i in ids])))
        if work.verdicts:
            ids = np.array(sorted(work.verdicts), dtype=np.int64)
            self._submit(SetLastModifiedVerdicts(
                ids, np.array([work.verdicts[int(i)] for i in ids], dtype=bool)))
        self._submit(SetState(q.BANDWIDTH_KEY, s.refresh_bandwidth))
        self._submit(SetState(q.UNREAD_EMPTY_SINCE_KEY, self._empty_since))
        self._submit(SetState(LEDGER_KEY, led.to_json()))
        self._submit(SetState(WATERMARK_KEY, work.watermark))
        self._submit(SetState("refresh.k", finite(led.k)))
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
        # Every t_i scales with the refresh bandwidth: a new G or ρ (or discovery's end,
        # when ρ becomes 0, or its return) re-plans every page now rather than as each is
        # next fetched; DISCOVERY_END_UNITS keeps a trickle of new links from doing so often.
        if q.state_value(self._conn, q.BANDWIDTH_KEY) != s.refresh_bandwidth:
            return None, jobs
        # A smaller t_max bounds every page's wait now, not once each is next fetched.
        if q.state_value(self._conn, q.MAX_INTERVAL_KEY) != s.max_interval_units:
            return None, jobs
        return (None if ranked and s.importance_source != "uniform" else led), jobs

    def _rebuild(self, unit: int, jobs: int) -> UnitWork:
        """The unit from the full scan, and the ledger built from every page: O(N)."""
        return rebuild(self._conn, self._scan, self._s, self._full_plan(unit), unit, jobs)

    def _advance(self, led: Ledger, unit: int, jobs: int) -> UnitWork:
        """The unit from the folders and the ledger (module doc, steps 1–6)."""
        return FolderUnit(self._conn, self._est, self._s, led, unit, jobs).run()


def _retry_folders(fetch: UnitFetchList, due: Candidates, unit: int,
                   pos: dict[int, int]) -> Iterator[tuple[int, int]]:
    """Popped pages wait one interval (a fetch re-files them first). Deferred ones are left
    in their folder: it is ≤ ``unit``, so due again next unit (module doc, step 6)."""
    for url_id in fetch.maintenance.tolist():
        t = float(due.intervals[pos[url_id]])
        yield url_id, unit + max(1, math.ceil(t))
