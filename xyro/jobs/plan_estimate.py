"""What the refresh planner knows of each page (DESIGN.md §6, 003 §6, steps 2–3 of
:mod:`xyro.jobs.plan_job`): λ_i from the page's observations and r_i from its ranks.

λ_i: the Last-Modified estimator where the page's dates pass the reliability test and its
host's do too (shrunk toward the population mean: a Gamma posterior mean, see
``LM_PRIOR_SHAPE``), else the signature MLE (eq. 9, bias-reduced) with its documented
boundary answers; a page read once takes the prior. r_i: direct importance for XML pages,
interest for HTML pages (mean 1), 1 when missing or with ``importance_source: uniform``;
direct importance for every page with ``importance_source: importance``.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass

import numpy as np

from metadata import refresh_queries as q
from refresh import (AccessHistory, RateEstimate, RateSource, dated_history, estimate_rate,
                     page_reliability, reliable_hosts)
from xyro.jobs.plan_settings import PlannerSettings

HTTP_DATE_TOLERANCE_S = 2.0  # Last-Modified has 1 s resolution, plus a little skew
#: Gamma prior shape for Last-Modified rates (refresh.last_modified.shrunk_rate): with few
#: accesses C/exposure is heavy-tailed; in tests/bench/refresh_sim.py the raw estimator
#: made Last-Modified hurt (1.65x the optimum vs 1.52x without it), the shrunk one help.
LM_PRIOR_SHAPE = 1.0
#: ``urls.rate_source`` of a page whose rate is the prior (the mean of the estimated ones).
PRIOR_SOURCE = RateSource.PRIOR.value


#: The importance given to r = 0 under a floor of 0 (r has mean 1): small enough that such
#: a page's weight √(r·λ) sits in the low band (every t_max) of any plan that can afford it.
R_ZERO = 1e-9


@dataclass(frozen=True)
class Evidence:
    """What a page's rate rests on (for ``--explain``)."""

    estimate: RateEstimate
    accesses: int
    changes: int
    lm_reliable: bool
    lm_reason: str
    page_verdict: bool  # the page's own dates passed the test (its host's aside)


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
        tol = HTTP_DATE_TOLERANCE_S / self._s.time_unit_s
        verdicts = {i: page_reliability(dated_history(h, tol), tol)
                    for i, h in histories.items()}
        hosts = self._host_verdicts({i: v.reliable for i, v in verdicts.items()}, host_of)
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
                                   reason, verdict.reliable)
        return out

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

    def evidence(self, pages: q.PlannedPages, need: list[int], top: int,
                 prior: float) -> dict[int, Evidence]:
        """Rate estimates of the ``need`` pages from their observations up to ``top``."""
        rows = q.observations_of(self._conn, need, top)
        pos_of = {int(i): k for k, i in enumerate(pages.ids)}
        host_of = {i: int(pages.host_id[pos_of[i]]) for i in need}
        histories = {i: self.history(rows[i]) for i in need if i in rows}
        return self.estimate(histories, host_of, prior)

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
