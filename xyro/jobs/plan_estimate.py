"""What the refresh planner knows of each page (DESIGN.md §6, 003 §6, steps 2–3 of
:mod:`xyro.jobs.plan_job`): λ_i from the page's observations and r_i from its ranks.

λ_i: the Last-Modified estimator where the page's dates pass the reliability test and its
host's do too (shrunk toward the population mean: a Gamma posterior mean, see
``LM_PRIOR_SHAPE``), else the signature MLE (eq. 9, bias-reduced) with its documented
boundary answers; a page read once takes the prior. A page is read as its newest
``RECENT_OBSERVATIONS`` observations (metadata.refresh_queries) and, when it has more, a
summary of the older ones (:class:`_Older`), in chunks of ``ESTIMATE_CHUNK`` pages: a unit's
cost and memory do not grow with the pages' histories. r_i: direct importance for XML pages,
interest for HTML pages (mean 1), 1 when missing or with ``importance_source: uniform``;
direct importance for every page with ``importance_source: importance``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from metadata import refresh_queries as q
from refresh import (AccessHistory, ChangeObservations, RateEstimate, RateSource, Reliability,
                     dated_history, estimate_rate, last_modified_rate, page_reliability,
                     reliable_hosts, signature_rate)
from refresh.last_modified import shrunk_rate
from xyro.jobs.plan_settings import PlannerSettings

HTTP_DATE_TOLERANCE_S = 2.0  # Last-Modified has 1 s resolution, plus a little skew
#: Gamma prior shape for Last-Modified rates (refresh.last_modified.shrunk_rate): with few
#: accesses C/exposure is heavy-tailed; in tests/bench/refresh_sim.py the raw estimator
#: made Last-Modified hurt (1.65x the optimum vs 1.52x without it), the shrunk one help.
LM_PRIOR_SHAPE = 1.0
#: ``urls.rate_source`` of a page whose rate is the prior (the mean of the estimated ones).
PRIOR_SOURCE = RateSource.PRIOR.value
#: Pages whose observations are read and estimated together: memory per chunk, not per unit.
ESTIMATE_CHUNK = 500
#: A page with older reads than those read joins them to its estimate when at most this
#: share of its newest intervals changed: few changes, whose rate the newest reads alone
#: pin down poorly (at 256 reads, λ × interval ≲ 0.13: under 32 changes). There both
#: likelihoods are as good as linear in the change intervals, so the older reads enter
#: through their sums alone (:meth:`PageEstimator._with_older_signature`,
#: ``_with_older_dates``): within 1.5 % (p90) of the whole history's rate in
#: tests/bench/history_window.py. Faster pages have the changes to go by their newest reads.
OLDER_SHARE = 1 / 8


#: The importance given to r = 0 under a floor of 0 (r has mean 1): small enough that such
#: a page's weight √(r·λ) sits in the low band (every t_max) of any plan that can afford it.
R_ZERO = 1e-9


@dataclass(frozen=True)
class Evidence:
    """What a page's rate rests on (for ``--explain``); ``accesses`` and ``changes`` count
    the observations read one by one (a long history's newest: ``urls`` has its totals)."""

    estimate: RateEstimate
    accesses: int
    changes: int
    lm_reliable: bool
    lm_reason: str
    page_verdict: bool  # the page's own dates passed the test (its host's aside)


@dataclass(frozen=True, slots=True)
class _Older:
    """A long history's older reads: its first two (``first``, a history), the changes
    up to the first read kept and the page's stored verdict on its dates."""

    first: AccessHistory
    changes: int
    lm_reliable: bool | None


@dataclass(frozen=True, slots=True)
class _Facts:
    """A page's own verdict and its estimates, until its host's verdict is known."""

    verdict: Reliability
    by_dates: RateEstimate | None  # Last-Modified, when the verdict passed
    signature: RateEstimate | None  # when the verdict failed, or the host's did
    accesses: int
    changes: int


class PageEstimator:
    """λ_i and r_i of pages of the store read through ``conn`` (module doc)."""

    def __init__(self, conn: sqlite3.Connection, settings: PlannerSettings) -> None:
        self._conn = conn
        self._s = settings

    def history(self, rows: list[tuple[float, int, float | None]]) -> AccessHistory:
        """Observation rows (by access time) → a history in units; repeated access times
        are merged, a change seen at one counting in the interval that ends there (after
        the first access, which ends none: the next one), and an unchanged access without
        Last-Modified keeps the previous date (a 304 often omits it)."""
        unit = self._s.time_unit_s
        times: list[float] = []
        changed: list[bool] = []
        dates: list[float] = []
        last_s = -math.inf
        carried = False  # a change seen again at the first access time
        for access, ch, lm in rows:
            if access <= last_s:
                if ch and changed:
                    changed[-1] = True
                carried = carried or (bool(ch) and not changed)
                continue
            last_s = access
            if lm is None and not (ch or carried) and dates:
                date = dates[-1]
            else:
                date = math.nan if lm is None else lm / unit
            if times:
                changed.append(bool(ch) or carried)
                carried = False
            times.append(access / unit)
            dates.append(date)
        return AccessHistory(times, changed, dates)

    def estimate(self, histories: dict[int, AccessHistory], host_of: dict[int, int],
                 prior: float) -> dict[int, Evidence]:
        """Evidence of pages whose ``histories`` are whole."""
        facts = {i: self._facts(h, prior) for i, h in histories.items()}
        hosts = self._host_verdicts({i: f.verdict.reliable for i, f in facts.items()}, host_of)
        for i in _wanting_signatures(facts, hosts, host_of):
            facts[i] = replace(facts[i], signature=self._signature(histories[i], prior))
        return _evidence(facts, hosts, host_of)

    def evidence(self, pages: q.PlannedPages, need: list[int], top: int,
                 prior: float) -> dict[int, Evidence]:
        """Rate estimates of the ``need`` pages from their observations up to ``top``, read
        and estimated ``ESTIMATE_CHUNK`` pages at a time. A page whose dates passed the
        test goes by them unless its host's failed over all pages: only then are its
        observations read again, for its signature estimate."""
        pos_of = {int(i): k for k, i in enumerate(pages.ids)}
        host_of = {i: int(pages.host_id[pos_of[i]]) for i in need}
        facts: dict[int, _Facts] = {}
        for start in range(0, len(need), ESTIMATE_CHUNK):
            for url_id, history, older in self._read(need[start:start + ESTIMATE_CHUNK], top):
                facts[url_id] = self._facts(history, prior, older)
        hosts = self._host_verdicts({i: f.verdict.reliable for i, f in facts.items()}, host_of)
        late = _wanting_signatures(facts, hosts, host_of)
        for start in range(0, len(late), ESTIMATE_CHUNK):
            for url_id, history, older in self._read(late[start:start + ESTIMATE_CHUNK], top):
                facts[url_id] = replace(facts[url_id],
                                        signature=self._signature(history, prior, older))
        return _evidence(facts, hosts, host_of)

    def _read(self, ids: list[int], top: int
              ) -> Iterator[tuple[int, AccessHistory, _Older | None]]:
        """Each page's newest observations as a history, and its older reads if any."""
        reads = q.recent_observations(self._conn, ids, top)
        cut = [i for i, r in reads.items() if r.older is not None]
        stored = q.last_modified_verdicts(self._conn, (), cut)[1] if cut else {}
        for url_id, r in reads.items():
            older = None if r.older is None else \
                _Older(self.history(r.older.first), r.older.changes, stored.get(url_id))
            yield url_id, self.history(r.rows), older

    def _facts(self, history: AccessHistory, prior: float,
               older: _Older | None = None) -> _Facts:
        """A page's own verdict and the estimate it implies: Last-Modified where its dates
        passed the test (older reads that failed it, their stored verdict, fail them),
        else signatures (also needed, later, if its host's dates fail)."""
        tol = HTTP_DATE_TOLERANCE_S / self._s.time_unit_s
        dates = history if older is None else _known_dates(history)
        verdict = page_reliability(dated_history(dates, tol), tol)
        if verdict.reliable and older is not None and older.lm_reliable is False:
            verdict = Reliability(False, "Last-Modified failed the test on older reads")
        accesses, changes = int(history.access_times.size), int(history.changed.sum())
        if not verdict.reliable:
            return _Facts(verdict, None, self._signature(history, prior, older), accesses,
                          changes)
        joined = older if older is not None and self._joins(history, older) else None
        by_dates = self._rate(dates, prior, True) if joined is None else \
            self._with_older_dates(dates, prior, joined, history)
        return _Facts(verdict, by_dates, None, accesses, changes)

    def _signature(self, history: AccessHistory, prior: float,
                   older: _Older | None = None) -> RateEstimate:
        """The signature estimate: with the older reads where they join it."""
        if older is not None and self._joins(history, older):
            return self._with_older_signature(history, older)
        return self._rate(history, prior, False)

    def _rate(self, history: AccessHistory, prior: float, dates: bool) -> RateEstimate:
        """The estimate of ``refresh.estimate_rate`` from ``history`` alone: Last-Modified
        (``dates``, the page's dates having passed the test) or signatures."""
        return estimate_rate(history, prior, host_reliable=dates,
                             tolerance=HTTP_DATE_TOLERANCE_S / self._s.time_unit_s,
                             resolution=self._s.min_interval_units,
                             lm_prior_shape=LM_PRIOR_SHAPE)

    @staticmethod
    def _joins(history: AccessHistory, older: _Older) -> bool:
        """Whether the older reads join the estimate (``OLDER_SHARE``)."""
        n = history.changed.size
        return n > 0 and history.changed.sum() <= OLDER_SHARE * n \
            and older.first.access_times[0] < history.access_times[0]

    def _with_older_signature(self, history: AccessHistory, older: _Older) -> RateEstimate:
        """Eq. 9 over the newest intervals and the older reads: their ``changes`` as
        change intervals of the newest ones' mean length (of all of them when none
        changed), the rest of their time without change. Few changes, short against the
        time between them: eq. 9 is as good as linear in their lengths, so their sum is
        what counts (exact for regular reads). More than ``RECENT_OBSERVATIONS`` older
        changes count as that many over their time scaled alike (same rate, bounded work)."""
        obs = history.change_observations()
        c = obs.change_lengths
        span = float(history.access_times[0] - older.first.access_times[0])
        n_old = min(older.changes, q.RECENT_OBSERVATIONS)
        span *= n_old / older.changes if older.changes else 1.0
        mean = float(c.mean() if c.size else obs.intervals.mean())
        mean = min(mean, span / n_old) if n_old else mean
        rest = span - n_old * mean
        intervals = np.concatenate((obs.intervals, np.full(n_old, mean), [rest] if rest > 0
                                    else []))
        changed = np.concatenate((obs.changed, np.ones(n_old, dtype=bool),
                                  [False] if rest > 0 else []))
        return signature_rate(ChangeObservations(intervals, changed),
                              self._s.min_interval_units, bias_reduced=True)

    def _with_older_dates(self, dates: AccessHistory, prior: float, older: _Older,
                          history: AccessHistory) -> RateEstimate:
        """The Last-Modified estimate over the whole history, shrunk as in
        ``refresh.estimate_rate``: C / exposure is additive over intervals, so the reads
        before ``dates`` (the newest ``history`` from its first known date) add their
        changes and the time from the page's first date to the first of ``dates``, less
        the unseen part of each of their change intervals (d_k − t_{k−1}: taken as the
        newest ones' mean, half an interval when none changed). ``dates`` alone when its
        first date is its response time, or the page's first date is missing."""
        tol = HTTP_DATE_TOLERANCE_S / self._s.time_unit_s
        dated, first = dated_history(dates, tol), dated_history(older.first, tol)
        d0, db = first.last_modified[0], dated.last_modified[0]
        if dated is not dates or not np.isfinite(d0):
            return self._rate(dates, prior, True)
        recent = last_modified_rate(dated)
        t, d = dated.access_times, dated.last_modified
        moved = (d[1:] > t[:-1]) & (d[1:] <= t[1:])
        gaps = (np.minimum(d[1:], t[1:]) - t[:-1])[moved]
        gap = float(gaps.mean() if gaps.size else np.diff(t).mean() / 2 if t.size > 1 else 0.0)
        skipped = history.access_times.size - t.size
        n_old = older.changes + int(history.changed[:skipped].sum())
        n_c = recent.n_changes + n_old
        exposure = recent.n_changes / recent.rate + max(
            0.0, float(min(db, t[0]) - min(d0, first.access_times[0])) - n_old * gap)
        rate = float(shrunk_rate(n_c, exposure, prior, LM_PRIOR_SHAPE))
        return RateEstimate(rate, RateSource.LAST_MODIFIED,
                            math.sqrt(n_c + LM_PRIOR_SHAPE) / (exposure + LM_PRIOR_SHAPE / prior),
                            recent.n_intervals, n_c)

    def _host_verdicts(self, fresh: dict[int, bool], host_of: dict[int, int]
                       ) -> dict[int, bool]:
        """Each host's verdict over all its checked pages: the stored verdicts of the
        others (``urls.lm_reliable``) and the ``fresh`` ones of the pages at hand, which
        replace theirs. Judged on the pages re-estimated together alone, one host's verdict
        changed with whichever of its pages a unit happened to observe."""
        stored_hosts, stored_pages = q.last_modified_verdicts(
            self._conn, {host_of[i] for i in fresh}, fresh)
        counts = {h: list(stored_hosts.get(h, (0, 0))) for h in {host_of[i] for i in fresh}}
        for url_id, ok in fresh.items():
            count = counts[host_of[url_id]]
            if url_id in stored_pages:
                count[0] -= 1
                count[1] -= not stored_pages[url_id]
            count[0] += 1
            count[1] += not ok
        return reliable_hosts({h: (c[0], c[1]) for h, c in counts.items()})

    def importance(self, pages: q.PlannedPages) -> np.ndarray:
        if self._s.importance_source == "uniform":
            return np.ones(pages.ids.size)
        r = pages.importance if self._s.importance_source == "importance" else \
            np.where(pages.is_xml, pages.importance, pages.interest)
        r = np.where(np.isnan(r) | (r < 0), 1.0, r)
        # A floor of 0 refreshes every page (DESIGN.md §6: never refreshed means below the
        # floor): r = 0 (interest of a page with no known path to XML yet, whose new links
        # may lead to some) becomes R_ZERO, so the clamp re-reads it every t_max.
        return np.maximum(r, R_ZERO) if self._s.importance_floor == 0 else r

    def kept(self, r: np.ndarray) -> np.ndarray:
        """Pages refreshed at all: r > 0 and not below the importance floor."""
        return (r > 0) & (r >= self._s.importance_floor)


def _wanting_signatures(facts: dict[int, _Facts], hosts: dict[int, bool],
                        host_of: dict[int, int]) -> list[int]:
    """Pages whose own dates passed the test on a host whose dates failed it."""
    return [i for i, f in facts.items() if f.signature is None and not hosts[host_of[i]]]


def _evidence(facts: dict[int, _Facts], hosts: dict[int, bool], host_of: dict[int, int]
              ) -> dict[int, Evidence]:
    """Each page's evidence once its host's verdict is known: Last-Modified where both the
    page's dates and its host's passed the test, else signatures."""
    out: dict[int, Evidence] = {}
    for url_id, f in facts.items():
        host_ok = hosts[host_of[url_id]]
        dated = f.verdict.reliable and host_ok
        reason = f.verdict.reason if host_ok or not f.verdict.reliable else \
            "host's Last-Modified dates failed the test on other pages"
        estimate = f.by_dates if dated else f.signature
        assert estimate is not None  # by_dates when the verdict passed, else a signature
        out[url_id] = Evidence(estimate, f.accesses, f.changes, dated, reason,
                               f.verdict.reliable)
    return out


def _known_dates(history: AccessHistory) -> AccessHistory:
    """The newest reads of a longer history from the first whose date is known: one sent,
    carried, or missing at a change (``metadata.refresh_queries`` leaves the first read's
    date unknown when it was carried from older reads)."""
    d, changed = history.last_modified, history.changed
    known = np.flatnonzero(~np.isnan(d) | np.concatenate(([False], changed)))
    k = int(known[0]) if known.size else 0
    if k == 0:
        return history
    return AccessHistory(history.access_times[k:], changed[k:], d[k:])
