"""Refresh intervals that minimise importance-weighted obsolescence (003 §6.3–6.4,
eq. 15–22; DESIGN.md §6).

Units: t in time units, λ in changes per time unit, r dimensionless (centred on 1),
G in pages per time unit. Page i refreshed every t_i has time-average obsolescence
r_i·λ_i·t_i/2 (expected changes it is behind, weighted by importance). With weights
w_i = √(r_i·λ_i), minimising Σ w_i²·t_i/2 under Σ 1/t_i = G gives

    t_i = K / w_i,   K = S / G,   S = Σ_j w_j,   Ω(G) = S² / (2G)                (eq. 22)

With clamps t_min ≤ t_i ≤ t_max the problem (convex in x_i = 1/t_i) is solved by
water-filling: x_i = clip(w_i/K, 1/t_max, 1/t_min) with K chosen so that Σ x_i = G.
KKT: free pages have w_i·t_i = K, pages at t_min have w_i·t_min ≥ K, pages at t_max have
w_i·t_max ≤ K. Pages with importance below the floor are never refreshed (t = ∞) and
are left out of S, G and Ω.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


def refresh_weights(importance: ArrayLike, rates: ArrayLike) -> NDArray[np.float64]:
    """w_i = √(r_i·λ_i), validated (importance ≥ 0, rates > 0, finite, same length)."""
    r = np.asarray(importance, dtype=np.float64)
    lam = np.asarray(rates, dtype=np.float64)
    if r.ndim != 1 or r.shape != lam.shape:
        raise ValueError(f"importance {r.shape} and rates {lam.shape} must be 1-D arrays "
                         "of the same length (one entry per page)")
    if not (np.isfinite(r).all() and (r >= 0).all()):
        raise ValueError("importance must be finite and >= 0 (NaN, inf or negative found)")
    if not (np.isfinite(lam).all() and (lam > 0).all()):
        raise ValueError("rates must be finite and > 0 (NaN, inf, zero or negative found); "
                         "estimators never return 0, use a prior for unread pages")
    return np.sqrt(r * lam)


@dataclass(frozen=True)
class IntervalPlan:
    """Refresh intervals for every page and what they predict.

    ``intervals``: t_i in time units (inf: below the importance floor, never refreshed).
    ``k``: the water level K (t_i = K/w_i for free pages). ``bandwidth``: Σ 1/t_i planned
    (equals G unless every page already sits at t_min). ``omega_unclamped``: S²/(2G), the
    optimum without clamps (a lower bound). ``omega``: Σ r_i·λ_i·t_i/2 of this plan, the
    clamped optimum's time-average obsolescence.
    """

    intervals: NDArray[np.float64]
    k: float
    bandwidth: float
    omega_unclamped: float
    omega: float
    n_at_min: int
    n_at_max: int
    n_below_floor: int


def _check_budget(bandwidth: float, t_min: float, t_max: float, floor: float) -> None:
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"bandwidth G={bandwidth!r} must be a positive number of pages per unit")
    if not (math.isfinite(t_min) and t_min > 0):
        raise ValueError(f"t_min={t_min!r} must be a positive number of time units")
    if not (t_max >= t_min):
        raise ValueError(f"t_max={t_max!r} must be >= t_min={t_min!r}")
    if not (math.isfinite(floor) and floor >= 0):
        raise ValueError(f"importance floor {floor!r} must be a finite number >= 0")


def water_level(weights: NDArray[np.float64], bandwidth: float, t_min: float,
                t_max: float) -> float:
    """K such that Σ clip(w_i/K, 1/t_max, 1/t_min) = G (weights > 0, feasible budget).

    Sort once, then bisection on log K where each evaluation is O(log N) with prefix sums;
    the final K is the closed form over the free pages of the bracketed clamp pattern.
    """
    lo, hi = (0.0 if math.isinf(t_max) else 1.0 / t_max), 1.0 / t_min
    ws = np.sort(weights)
    n = ws.size
    prefix = np.concatenate(([0.0], np.cumsum(ws)))

    def pattern(k: float) -> tuple[int, int]:
        a = int(np.searchsorted(ws, k * lo, side="right")) if lo > 0 else 0
        b = n - int(np.searchsorted(ws, k * hi, side="left"))
        return a, b

    def used(k: float) -> float:
        a, b = pattern(k)
        return a * lo + b * hi + (prefix[n - b] - prefix[a]) / k

    k_small = 0.5 * ws[0] / hi
    k_big = ws[-1] / lo * (1 + 1e-12) if lo > 0 else 2.0 * max(prefix[n] / bandwidth, ws[-1] / hi)
    lk, hk = math.log(k_small), math.log(k_big)
    for _ in range(200):
        mid = 0.5 * (lk + hk)
        if used(math.exp(mid)) > bandwidth:
            lk = mid
        else:
            hk = mid
        if hk - lk < 1e-15:
            break
    k = math.exp(0.5 * (lk + hk))
    a, b = pattern(k)
    free_budget = bandwidth - a * lo - b * hi
    free_sum = prefix[n - b] - prefix[a]
    if free_budget > 0 and free_sum > 0:
        k = free_sum / free_budget
    return k


def refresh_intervals(importance: ArrayLike, rates: ArrayLike, bandwidth: float,
                      t_min: float = 1.0, t_max: float = math.inf,
                      importance_floor: float = 0.0) -> IntervalPlan:
    """Optimal clamped refresh intervals t_i (module doc), one per page.

    Pages with importance ≤ 0 or below ``importance_floor`` get t = inf. Raises
    ValueError when the pages above the floor cannot all be refreshed every t_max within
    G (N/t_max > G): raise t_max, the floor, or the bandwidth.
    """
    _check_budget(bandwidth, t_min, t_max, importance_floor)
    w_all = refresh_weights(importance, rates)
    r = np.asarray(importance, dtype=np.float64)
    kept = (r > 0) & (r >= importance_floor)
    w = w_all[kept]
    t = np.full(w_all.size, np.inf)
    n = int(w.size)
    if n == 0:
        return IntervalPlan(t, math.inf, 0.0, 0.0, 0.0, 0, 0, int(w_all.size))
    lo, hi = (0.0 if math.isinf(t_max) else 1.0 / t_max), 1.0 / t_min
    if n * lo > bandwidth * (1 + 1e-12):
        raise ValueError(f"{n} pages refreshed at least every t_max={t_max} units need "
                         f"{n * lo:.6g} pages/unit > G={bandwidth}; raise t_max, the "
                         "importance floor or the bandwidth")
    s = float(math.fsum(w))
    if n * hi <= bandwidth or hi == lo:
        k = float(w.max() * t_min)
        x = np.full(n, hi)
    else:
        k = water_level(w, bandwidth, t_min, t_max)
        x = np.clip(w / k, lo, hi)
    t_kept = 1.0 / x
    t[kept] = t_kept
    omega = 0.5 * float(math.fsum(w * w * t_kept))
    return IntervalPlan(
        intervals=t, k=k, bandwidth=float(math.fsum(x)),
        omega_unclamped=s * s / (2.0 * bandwidth), omega=omega,
        n_at_min=int((x >= hi).sum()), n_at_max=int((x <= lo).sum()) if lo > 0 else 0,
        n_below_floor=int(w_all.size - n))


def time_average_obsolescence(importance: ArrayLike, rates: ArrayLike,
                              intervals: ArrayLike) -> float:
    """Σ r_i·λ_i·t_i/2 over pages with finite t_i: the steady-state score of a schedule."""
    w = refresh_weights(importance, rates)
    t = np.asarray(intervals, dtype=np.float64)
    if t.shape != w.shape:
        raise ValueError(f"intervals {t.shape} must match importance/rates {w.shape}")
    if np.isnan(t).any() or (t <= 0).any():
        raise ValueError("intervals must be positive (inf allowed for never refreshed)")
    fin = np.isfinite(t)
    return 0.5 * float(math.fsum(w[fin] ** 2 * t[fin]))


class RateSum:
    """S = Σ √(r_j·λ_j), kept up to date incrementally (DESIGN.md §6).

    ``update(old, new)`` applies S += Σ new − Σ old with compensated (Neumaier) summation,
    so a long run of updates stays within rounding of a recomputed S.
    """

    def __init__(self, weights: ArrayLike = ()) -> None:
        self._sum = 0.0
        self._comp = 0.0
        self.add(weights)

    def _accumulate(self, value: float) -> None:
        total = self._sum + value
        if abs(self._sum) >= abs(value):
            self._comp += (self._sum - total) + value
        else:
            self._comp += (value - total) + self._sum
        self._sum = total

    @staticmethod
    def _checked(weights: ArrayLike) -> NDArray[np.float64]:
        w = np.atleast_1d(np.asarray(weights, dtype=np.float64))
        if not (np.isfinite(w).all() and (w >= 0).all()):
            raise ValueError("weights √(r·λ) must be finite and >= 0")
        return w

    def _accumulate_all(self, values: NDArray[np.float64]) -> None:
        """Add Σ values as two doubles, its rounded sum and what that rounding left out:
        one rounded fsum per batch lost the latter (1.5 + 1e16 − 1e16 came out 2.0)."""
        total = math.fsum(values)
        self._accumulate(total)
        self._accumulate(math.fsum(np.append(values, -total)))

    def add(self, weights: ArrayLike) -> None:
        """Pages entering the plan (new pages, or above the floor again)."""
        self._accumulate_all(self._checked(weights))

    def remove(self, weights: ArrayLike) -> None:
        """Pages leaving the plan (dead, or below the floor)."""
        self._accumulate_all(-self._checked(weights))

    def update(self, old: ArrayLike, new: ArrayLike) -> None:
        """Pages whose r or λ changed: their old and new weights, in the same order."""
        o, n = self._checked(old), self._checked(new)
        if o.shape != n.shape:
            raise ValueError(f"old {o.shape} and new {n.shape} weights differ in length")
        self._accumulate_all(np.concatenate([n, -o]))

    def state(self) -> tuple[float, float]:
        """The running sum and its compensation, for persisting (``RateSum.restore``)."""
        return self._sum, self._comp

    @classmethod
    def restore(cls, state: tuple[float, float] | list[float]) -> RateSum:
        """A sum continued from :meth:`state` (e.g. read back from the store's JSON)."""
        total, comp = (float(x) for x in state)
        if not (math.isfinite(total) and math.isfinite(comp)):
            raise ValueError(f"RateSum state {state!r} must be two finite numbers")
        out = cls()
        out._sum, out._comp = total, comp
        return out

    @property
    def value(self) -> float:
        """S, never below 0 (rounding could otherwise leave −1e−17 after removing all)."""
        return max(0.0, self._sum + self._comp)

    def k(self, bandwidth: float) -> float:
        """K = S/G of eq. 19, valid while no clamp binds."""
        _check_budget(bandwidth, 1.0, 1.0, 0.0)
        return self.value / bandwidth

    def omega(self, bandwidth: float) -> float:
        """Ω(G) = S²/(2G), the predicted obsolescence without clamps."""
        _check_budget(bandwidth, 1.0, 1.0, 0.0)
        return self.value ** 2 / (2.0 * bandwidth)
