"""Change rate from Last-Modified dates, and whether a server's dates can be trusted
(003 §6.1.2, eq. 10; DESIGN.md §6).

Notation: accesses at t_0 < … < t_N, Last-Modified d_k sent at t_k. Interval k (k = 1…N)
is a change interval when t_{k−1} < d_k ≤ t_k; the first access always counts as one
(d_0 < t_0). For a change interval l_k = t_k − d_k, the time the page then had been
unchanged.

Eq. 10 as printed is λ = C / Σ l_k, the sum over change intervals only. That drops the
no-change intervals, during which the page was also seen not to change: for a slow page
read often it overestimates λ by a large factor (λ·τ = 0.05 gives about ×20). Under the
Poisson model the exact likelihood of these observations is λ^C·e^{−λ·(Σ l_k + Σ v_i)}
(the last change in a change interval has density λ·e^{−λ·l_k}; a no-change interval of
length v_i has probability e^{−λ·v_i}; the first access's age l_0 is the backward
recurrence time, also Exp(λ)), so the MLE is

    λ = C / (Σ_{change} l_k + Σ_{no-change} v_i)

which is what :func:`last_modified_rate` returns; ``paper_eq10=True`` gives the printed
form for comparison (the change-rate benchmark reports both).

A first date equal to the first access time (within the tolerance) is the time of the
response, not a change date: it says nothing about the page's age, and nothing is known of
an interval before it. :func:`dated_history` drops that access, and the test and the
estimator judge the history from its second access on (the crawler records such a stamp on
a first fetch rather than a listed date it cannot trust yet; DESIGN.md §6).

Reliability (the paper: "unless Xyleme detects that the web server provides an
unreliable last date of change"): a page's dates are unreliable when any date is
missing, in the future, equal to the access time at more than half of the accesses
(dynamic pages stamped "now"; a genuine page changes just before a fetch only by chance,
at a rate λ·tolerance per access), going backwards, or inconsistent with the MD5 signature (date moved but content equal, or
content changed but date did not). One bad sign is enough: a false alarm only costs the
fall-back to the signature MLE, a consistent estimator; trusting a lying server is worse.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from refresh.estimators import RateEstimate, RateSource
from refresh.observations import AccessHistory


@dataclass(frozen=True)
class Reliability:
    """Whether a page's Last-Modified dates can be used, and if not, why."""

    reliable: bool
    reason: str


def dated_history(history: AccessHistory, tolerance: float = 2.0) -> AccessHistory:
    """``history`` without its first access when that access's date is the response time
    (module doc), so long as an access remains; else ``history`` itself."""
    t, d = history.access_times, history.last_modified
    if t.size < 2 or not abs(d[0] - t[0]) <= tolerance:  # NaN compares False: kept
        return history
    return AccessHistory(t[1:], history.changed[1:], d[1:])


def _dates_no_later_than_seen(t: NDArray[np.float64], d: NDArray[np.float64]
                              ) -> NDArray[np.float64]:
    """d with each date capped at the access that first sent it: a server clock a little
    ahead (within the tolerance) dates a change just after the access that saw it, which
    would count a change interval as a no-change one; the date repeats unchanged on later
    accesses, so all of its repeats get the same cap."""
    first = np.concatenate(([True], d[1:] != d[:-1]))
    seen_at = np.maximum.accumulate(np.where(first, np.arange(d.size), 0))
    return np.minimum(d, t[seen_at])


def page_reliability(history: AccessHistory, tolerance: float = 2.0) -> Reliability:
    """The per-page reliability test of Last-Modified dates (module doc).

    ``tolerance`` is in the history's time unit (2.0 suits POSIX seconds: HTTP dates have
    one-second resolution, plus a little clock skew).
    """
    if not tolerance >= 0:
        raise ValueError(f"tolerance {tolerance!r} must be a non-negative number")
    t, d, md5 = history.access_times, history.last_modified, history.changed
    if np.isnan(d).any():
        return Reliability(False, f"no Last-Modified at access {int(np.flatnonzero(np.isnan(d))[0])}")
    if (d > t + tolerance).any():
        k = int(np.flatnonzero(d > t + tolerance)[0])
        return Reliability(False, f"Last-Modified in the future at access {k}")
    d = _dates_no_later_than_seen(t, d)
    stamped = d >= t - tolerance
    if stamped.sum() * 2 > t.size:
        return Reliability(False, f"Last-Modified equals the access time at {int(stamped.sum())} "
                                  f"of {t.size} accesses")
    if d[0] >= t[0]:  # a first change date must precede its access (eq. 10's l_0 > 0)
        return Reliability(False, "Last-Modified at the first access is not before it")
    moved = np.diff(d) > 0  # HTTP dates repeat exactly while the page is unchanged
    if (np.diff(d) < -tolerance).any():
        k = int(np.flatnonzero(np.diff(d) < -tolerance)[0]) + 1
        return Reliability(False, f"Last-Modified went backwards at access {k}")
    in_interval = d[1:] > t[:-1]
    if (moved != in_interval).any():
        k = int(np.flatnonzero(moved != in_interval)[0]) + 1
        return Reliability(False, f"Last-Modified moved to before the previous access at access {k}")
    if (in_interval & ~md5).any():
        k = int(np.flatnonzero(in_interval & ~md5)[0]) + 1
        return Reliability(False, f"Last-Modified moved but the MD5 is equal at access {k}")
    if (md5 & ~in_interval).any():
        k = int(np.flatnonzero(md5 & ~in_interval)[0]) + 1
        return Reliability(False, f"MD5 changed but Last-Modified did not at access {k}")
    return Reliability(True, "consistent")


def host_reliability(hosts: Iterable[Hashable], reliable: Iterable[bool],
                     max_bad_share: float = 0.1) -> dict[Hashable, bool]:
    """Per-host verdict from its pages' verdicts: unreliable when more than
    ``max_bad_share`` of its checked pages failed :func:`page_reliability`.

    A page on an unreliable host falls back to signatures even if its own dates look fine
    (a server that lies for some pages is likely to lie for the others).
    """
    total: dict[Hashable, int] = defaultdict(int)
    bad: dict[Hashable, int] = defaultdict(int)
    hosts, reliable = list(hosts), list(reliable)
    if len(hosts) != len(reliable):
        raise ValueError(f"{len(hosts)} hosts for {len(reliable)} verdicts; pass one host per page")
    for host, ok in zip(hosts, reliable):
        total[host] += 1
        bad[host] += not ok
    return reliable_hosts({h: (total[h], bad[h]) for h in total}, max_bad_share)


def reliable_hosts(counts: Mapping[Hashable, tuple[int, int]],
                   max_bad_share: float = 0.1) -> dict[Hashable, bool]:
    """:func:`host_reliability` from counts per host: (pages checked, pages that failed).
    The planner keeps every page's verdict, so a host is judged on all its checked pages,
    not on the few re-estimated together."""
    if not 0.0 <= max_bad_share <= 1.0:
        raise ValueError(f"max_bad_share {max_bad_share!r} must lie in [0, 1]")
    return {h: bad <= max_bad_share * checked for h, (checked, bad) in counts.items()}


def last_modified_rate(history: AccessHistory, paper_eq10: bool = False) -> RateEstimate:
    """λ from Last-Modified dates (module doc), changes per time unit of the history.

    Call only for histories that passed :func:`page_reliability`; raises ValueError when a
    date is missing or not before its access time. ``stderr`` is λ/√C (Gamma posterior).
    """
    t, d = history.access_times, history.last_modified
    if np.isnan(d).any():
        raise ValueError("Last-Modified missing at some access; check page_reliability first")
    if d[0] >= t[0]:
        raise ValueError(f"Last-Modified {d[0]!r} is not before the first access {t[0]!r}")
    d = _dates_no_later_than_seen(t, d)
    change = np.concatenate(([True], (d[1:] > t[:-1]) & (d[1:] <= t[1:])))
    ages = (t - d)[change]
    n_c = int(change.sum())
    exposure = float(ages.sum())
    if not paper_eq10:
        exposure += float(np.diff(t)[~change[1:]].sum())
    if exposure <= 0:
        raise ValueError("Last-Modified dates give no unchanged time; check page_reliability first")
    rate = n_c / exposure
    return RateEstimate(rate, RateSource.LAST_MODIFIED, rate / np.sqrt(n_c),
                        int(t.size - 1), n_c)


def shrunk_rate(changes: ArrayLike, exposure: ArrayLike, prior_rate: float,
                shape: float = 1.0) -> NDArray[np.float64]:
    """Posterior mean of λ under a Gamma(shape, shape/prior_rate) prior given C changes in
    ``exposure`` (the Last-Modified likelihood λ^C·e^{−λ·exposure} is conjugate):
    (C + shape) / (exposure + shape/prior_rate), changes per time unit.

    Why: with few accesses C / exposure is heavy-tailed (at C = 1 it is 1/Exp(λ), whose
    mean is infinite) and one tiny age makes a page look extremely fast; the planner,
    whose cost is linear in λ, wants the posterior mean. ``shape`` = 1 is an exponential
    prior with the population's mean rate (the refresh benchmark: this cut the planner's
    obsolescence with Last-Modified on half the sites; see tests/bench/refresh_sim.py).
    """
    c = np.asarray(changes, dtype=np.float64)
    e = np.asarray(exposure, dtype=np.float64)
    if not (np.isfinite(prior_rate) and prior_rate > 0 and np.isfinite(shape) and shape > 0):
        raise ValueError(f"prior rate {prior_rate!r} and shape {shape!r} must be finite and > 0")
    if c.shape != e.shape or (c < 0).any() or (e < 0).any() or not np.isfinite(e).all():
        raise ValueError("changes and exposure must be same-shaped, finite and >= 0")
    return (c + shape) / (e + shape / prior_rate)
