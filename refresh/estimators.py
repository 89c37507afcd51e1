"""Change-rate estimators from MD5 change observations (003 §6.1.1, eq. 9; DESIGN.md §6).

A page changes as a Poisson process of rate λ (changes per time unit). An access interval
of length τ shows a change with probability 1 − e^{−λτ}. With change intervals c_j (C of
them) and no-change intervals v_i (V of them), the likelihood is

    f(x) = e^{−x·Σv_i} · Π_j (1 − e^{−c_j·x})                                     (eq. 9)

and its log-derivative  g(x) = −Σv_i + Σ_j c_j / (e^{c_j·x} − 1)  is strictly decreasing
from +∞ (x → 0) to −Σv_i (x → ∞), so for C > 0 and V > 0 the MLE is its unique root.
Bounds used as the bracket: y/(e^y − 1) lies in [1 − y/2, 1], hence the root lies in
[C / (Σv + Σc/2), C / Σv].  We solve in log x with ``scipy.optimize.brentq`` and evaluate
c/(e^{cx} − 1) as c·e^{−cx}/(−expm1(−cx)), which neither overflows for huge cx nor loses
precision for tiny cx.

Boundary cases (the likelihood has no finite positive maximum), answered the same way:
add *half an observation of the kind never seen*.

* C = 0 (never seen to change): half a change over the observed time, λ = 1 / (2·Σv).
  This is also the posterior mean of a Poisson rate under the Jeffreys prior with zero
  events in exposure Σv. It is positive, and it decreases as the page keeps not changing.
* V = 0 (changed at every visit): a no-change interval of half the shortest change
  interval, i.e. the root of Σ_j c_j/(e^{c_j x} − 1) = min(c)/2. For regular accesses
  (all c_j = I, n of them) this is log(2n + 1)/I, exactly Cho & Garcia-Molina's
  bias-reduced estimate at X = n. Finite, governed by the shortest intervals (the only
  ones that bound the rate from above), growing like log n as changes keep being seen.
  With a ``resolution`` (the planner's shortest refresh interval, one time unit) the
  answer is at least log(2C + 1)/resolution: the same estimate as if the changes had been
  seen at that interval. Without it a fast page that the planner reads rarely is always
  seen changed, judged slow (≈ 1/interval), planned more rarely still: a self-reinforcing
  error. The optimistic floor makes the planner look sooner; the first no-change interval
  then hands over to the MLE.

Both are flagged by their ``source`` and carry no standard error (they are bounds, not fits).

Bias reduction (``bias_reduced=True``, what the planner uses). The MLE is biased upward
when few no-change intervals bound the rate from above (λ·interval ≳ 2): measured by
``tests/bench/change_rates.py`` at 50 reads with exponential access intervals, +10.4 % at
λτ = 5. The V = 0 rule above, applied always, removes most of it: add half a no-change
interval of the shortest change interval, v_eff = Σv + min(c)/2, then solve eq. 9. This is
Cho & Garcia-Molina's "+0.5" idea for irregular accesses; it changes little where
no-change time dominates (Σv ≫ min c, slow pages) and makes the estimate continuous at
V = 0 (the same equation with V = 0). Measured: max |bias| 8.1 % at 50 reads over the
benchmark's whole grid (10.4 % for the plain MLE), and 23 % instead of 35 % at 20 reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray

from refresh.observations import ChangeObservations


class RateSource(StrEnum):
    """Where a rate estimate comes from (stored next to the rate; shown by ``--explain``)."""

    SIGNATURE_MLE = "signature-mle"
    NEVER_CHANGED = "never-changed"
    ALWAYS_CHANGED = "always-changed"
    LAST_MODIFIED = "last-modified"
    PRIOR = "prior"


@dataclass(frozen=True)
class RateEstimate:
    """A change rate (changes per time unit) and the evidence behind it.

    ``stderr`` is the asymptotic standard error from the observed Fisher information
    (None for bounds and priors); ``n_intervals``/``n_changes`` are the evidence counts.
    """

    rate: float
    source: RateSource
    stderr: float | None
    n_intervals: int
    n_changes: int


def _rate_terms(c: NDArray[np.float64], x: float) -> NDArray[np.float64]:
    """c / (e^{c·x} − 1), computed without overflow or cancellation."""
    y = c * x
    return c * np.exp(-y) / -np.expm1(-y)


def _score(c: NDArray[np.float64], v_sum: float, x: float) -> float:
    """g(x), the derivative of log f (eq. 9) at rate x."""
    return float(_rate_terms(c, x).sum()) - v_sum


def _solve_score_root(c: NDArray[np.float64], v_sum: float) -> float:
    """Unique root of g for C > 0 and v_sum > 0, by brentq in log x on the proven bracket."""
    n = float(c.size)
    lo = n / (v_sum + 0.5 * float(c.sum()))
    hi = n / v_sum
    if hi <= lo * (1.0 + 1e-14):  # all c_j·x tiny: the bounds coincide
        return hi
    # Imported here: scipy.optimize costs ~1 s to import, paid by every CLI command if
    # at the top; the first estimate pays it once.
    from scipy.optimize import brentq

    def score(u: float) -> float:
        return _score(c, v_sum, math.exp(u))

    # g(lo) > 0 > g(hi) in exact arithmetic; a no-change time far above the change
    # intervals (Σv/c ≳ 1e7) rounds g to 0 or past it at an end, which is then the root.
    u_lo, u_hi = math.log(lo), math.log(hi)
    if score(u_lo) <= 0.0:
        return math.exp(u_lo)
    if score(u_hi) >= 0.0:
        return math.exp(u_hi)
    root = brentq(score, u_lo, u_hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=200)
    return math.exp(root)


def fisher_stderr(c: ArrayLike, rate: float) -> float:
    """1/√I(λ̂) with I the observed information −d²log f/dx² = Σ c_j² e^{c_j x}/(e^{c_j x}−1)².

    Independent of the no-change intervals (they enter log f linearly).
    """
    c = np.asarray(c, dtype=np.float64)
    y = c * rate
    info = float((c * c * np.exp(-y) / np.expm1(-y) ** 2).sum())
    return math.inf if info <= 0.0 else 1.0 / math.sqrt(info)


def _check_resolution(resolution: float) -> None:
    if not resolution > 0:  # also rejects NaN
        raise ValueError(f"resolution {resolution!r} must be > 0 (inf: no cap)")


def signature_rate(obs: ChangeObservations, resolution: float = math.inf, *,
                   bias_reduced: bool = False) -> RateEstimate:
    """The MLE of eq. 9, with the documented answers for C = 0 and V = 0 (module doc);
    ``bias_reduced`` adds half a no-change interval of the shortest change interval.

    Raises ValueError when there is no interval at all (one access tells nothing about a
    rate: use a prior, see :func:`refresh.rate_choice.estimate_rate`).
    """
    _check_resolution(resolution)
    n = obs.intervals.size
    if n == 0:
        raise ValueError("no access interval: a rate needs at least two accesses; use a prior")
    c = obs.change_lengths
    n_c = int(c.size)
    if n_c == 0:
        return RateEstimate(0.5 / obs.unchanged_time, RateSource.NEVER_CHANGED, None, n, 0)
    if n_c == n:
        rate = max(_solve_score_root(c, 0.5 * float(c.min())),
                   math.log(2 * n_c + 1) / resolution)
        return RateEstimate(rate, RateSource.ALWAYS_CHANGED, None, n, n_c)
    v_sum = obs.unchanged_time + (0.5 * float(c.min()) if bias_reduced else 0.0)
    rate = _solve_score_root(c, v_sum)
    return RateEstimate(rate, RateSource.SIGNATURE_MLE, fisher_stderr(c, rate), n, n_c)


def log_likelihood_derivative(obs: ChangeObservations, x: float) -> float:
    """g(x) = d log f / dx of eq. 9 (strictly decreasing in x > 0)."""
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"rate {x!r} must be finite and positive")
    return _score(obs.change_lengths, obs.unchanged_time, x)


def log_likelihood(obs: ChangeObservations, x: ArrayLike) -> NDArray[np.float64]:
    """log f(x) of eq. 9 at each rate in ``x`` (for tests and plots)."""
    xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
    c = obs.change_lengths
    out = -xs * obs.unchanged_time
    for cj in c:
        out = out + np.log(-np.expm1(-cj * xs))
    return out


def signature_rates(intervals: ArrayLike, changed: ArrayLike, page: ArrayLike,
                    n_pages: int, prior: float, resolution: float = math.inf, *,
                    bias_reduced: bool = False) -> NDArray[np.float64]:
    """Vectorised :func:`signature_rate` for many pages at once (same answers, same rules).

    ``intervals``/``changed``/``page`` are parallel flat arrays: interval k belongs to page
    ``page[k]`` (0 ≤ page < n_pages). Pages without intervals get ``prior``. Solved by
    bisection in log x on the proven bracket (64 halvings of the log-bracket: relative
    error below 1e-15 of its width), O(total intervals) per step.
    """
    obs = ChangeObservations(intervals, changed)
    pg = np.asarray(page)
    if pg.shape != obs.intervals.shape:
        raise ValueError(f"page has {pg.size} entries for {obs.intervals.size} intervals")
    if n_pages < 0 or (pg.size and (pg.min() < 0 or pg.max() >= n_pages)):
        raise ValueError(f"page ids must lie in [0, {n_pages}); got range "
                         f"[{pg.min() if pg.size else 0}, {pg.max() if pg.size else 0}]")
    if not (math.isfinite(prior) and prior > 0):
        raise ValueError(f"prior rate {prior!r} must be finite and positive")
    _check_resolution(resolution)
    iv, ch = obs.intervals, obs.changed
    count = np.bincount(pg, minlength=n_pages)
    n_c = np.bincount(pg, weights=ch, minlength=n_pages)
    c_sum = np.bincount(pg, weights=np.where(ch, iv, 0.0), minlength=n_pages)
    v_sum = np.bincount(pg, weights=np.where(ch, 0.0, iv), minlength=n_pages)
    c_min = np.full(n_pages, np.inf)
    np.minimum.at(c_min, pg[ch], iv[ch])
    rates = np.full(n_pages, float(prior))
    never = (count > 0) & (n_c == 0)
    rates[never] = 0.5 / v_sum[never]
    solve = n_c > 0
    always = solve & (n_c == count)
    v_eff = np.where(always, 0.5 * c_min, v_sum + 0.5 * c_min if bias_reduced else v_sum)
    idx = np.flatnonzero(solve)
    if idx.size:
        lo = np.log(n_c[idx] / (v_eff[idx] + 0.5 * c_sum[idx]))
        hi = np.log(n_c[idx] / v_eff[idx])
        slot = np.full(n_pages, -1)
        slot[idx] = np.arange(idx.size)
        sel = ch & solve[pg]
        c_pg, c_len = slot[pg[sel]], iv[sel]
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            terms = _rate_terms(c_len, np.exp(mid)[c_pg])
            g = np.bincount(c_pg, weights=terms, minlength=idx.size) - v_eff[idx]
            lo = np.where(g > 0, mid, lo)
            hi = np.where(g > 0, hi, mid)
        rates[idx] = np.exp(0.5 * (lo + hi))
    rates[always] = np.maximum(rates[always], np.log(2 * n_c[always] + 1) / resolution)
    return rates


def naive_rate(obs: ChangeObservations) -> float:
    """X/T: changes seen over total observed time (biased low: it misses repeat changes)."""
    return obs.n_changed / float(obs.intervals.sum())


def cho_bias_reduced_rate(obs: ChangeObservations) -> float:
    """Cho & Garcia-Molina (2003, "Estimating frequency of change", ACM TOIT 3(3)),
    bias-reduced estimator for regular accesses: λ̂ = −log((n − X + 0.5)/(n + 0.5)) / I.

    Their estimator assumes a constant access interval I; applied here to irregular
    accesses with I = mean interval (their own irregular-access estimator is the MLE of
    eq. 9, i.e. :func:`signature_rate`). Used by the benchmark as the classical peer.
    """
    n = obs.intervals.size
    if n == 0:
        raise ValueError("no access interval: the estimator needs at least two accesses")
    x = obs.n_changed
    mean_interval = float(obs.intervals.mean())
    return -math.log((n - x + 0.5) / (n + 0.5)) / mean_interval
