"""Empirical-Bayes change rates: a population prior on a rate grid, posterior means per page
(DESIGN.md §6; the likelihoods are those of 003 §6.1, eq. 9 and eq. 10).

Why: the planner's cost is linear in λ (page i refreshed every t_i costs r_i·λ_i·t_i/2), so
with an uncertain λ_i the interval that minimises the EXPECTED cost is the one computed
with E[λ_i | observations]. Plugging in the MLE instead is what fails with few reads: a
page seen once has no MLE at all, a page never seen to change has a boundary answer, a
fast page read rarely is seen changed at every visit and judged slow. The posterior mean
answers all of these from the same formula, and it is never 0 nor infinite.

Representation: λ on a fixed log-spaced grid λ_1 < … < λ_K (changes per time unit); for
each page the log-likelihood of its observations at every grid rate, ``loglik[i, k]``. It is
a SUM over observations, so it is updated in O(K) per new observation:

* signature interval of length τ with no change: −λ·τ; with a change: log(1 − e^{−λτ})
  (eq. 9, one factor per interval);
* Last-Modified, change seen with age l (the page had been unchanged for l when read;
  also the first read): log λ − λ·l; no change over τ: −λ·τ (the corrected eq. 10 of
  :mod:`refresh.last_modified`).

The prior is the nonparametric maximum-likelihood mixing distribution over the grid
(weights π_k), fitted by EM over the pages that carry information:
π_k ← mean_i π_k·L_ik / Σ_k′ π_k′·L_ik′. Pages without information (read once, no usable
Last-Modified) have a flat row and get the prior mean. Pages are chosen for reading from
their own observations only, so this selection does not bias the fit (the design is
ignorable for likelihood inference).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray


def rate_grid(low: float = 1e-4, high: float = 1e3, points: int = 96) -> NDArray[np.float64]:
    """Log-spaced grid of rates (changes per time unit); the posterior lives on it."""
    if not (0 < low < high and math.isfinite(high)) or points < 2:
        raise ValueError(f"rate grid needs 0 < low < high < inf and >= 2 points, got "
                         f"low={low!r}, high={high!r}, points={points!r}")
    return np.geomspace(low, high, points)


def signature_loglik(intervals: ArrayLike, changed: ArrayLike,
                     grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-interval log-likelihood rows (eq. 9 factors), shape (len(intervals), K)."""
    tau = np.asarray(intervals, dtype=np.float64)[:, None]
    ch = np.asarray(changed, dtype=bool)[:, None]
    if tau.size and not (np.isfinite(tau).all() and (tau > 0).all()):
        raise ValueError("intervals must be finite and > 0 (access times strictly increase)")
    y = tau * grid[None, :]
    # log(1 − e^{−y}) = log(−expm1(−y)); y ≥ grid[0]·τ > 0, so it is finite.
    return np.where(ch, np.log(-np.expm1(-y)), -y)


def last_modified_loglik(exposure: ArrayLike, changes: ArrayLike,
                         grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows C·log λ − λ·exposure for Last-Modified evidence (corrected eq. 10)."""
    e = np.asarray(exposure, dtype=np.float64)[:, None]
    c = np.asarray(changes, dtype=np.float64)[:, None]
    if e.size and not (np.isfinite(e).all() and (e >= 0).all() and (c >= 0).all()):
        raise ValueError("exposure must be finite and >= 0, changes >= 0")
    return c * np.log(grid)[None, :] - e * grid[None, :]


def page_loglik(rows: NDArray[np.float64], page: ArrayLike, n_pages: int) -> NDArray[np.float64]:
    """Sum per-observation rows into one row per page (pages without rows: zeros)."""
    pg = np.asarray(page, dtype=np.int64)
    out = np.zeros((n_pages, rows.shape[1]))
    np.add.at(out, pg, rows)
    return out


def _likelihoods(loglik: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.exp(loglik - loglik.max(axis=1, keepdims=True))


def informative(loglik: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Rows that are not flat (the page's observations say something about λ)."""
    return np.ptp(loglik, axis=1) > 1e-12


def fit_prior(loglik: NDArray[np.float64], start: ArrayLike | None = None,
              iterations: int = 200, tol: float = 1e-7) -> NDArray[np.float64]:
    """NPMLE mixing weights π over the grid by EM (module doc); uniform when no row informs.

    ``start`` warm-starts EM (e.g. the previous unit's prior). A tiny floor keeps every
    grid point possible, so later evidence can always move a page there.
    """
    k = loglik.shape[1]
    pi = np.full(k, 1.0 / k) if start is None else np.asarray(start, dtype=np.float64).copy()
    if pi.shape != (k,) or not (np.isfinite(pi).all() and (pi >= 0).all() and pi.sum() > 0):
        raise ValueError(f"start prior must be {k} non-negative weights with a positive sum")
    pi /= pi.sum()
    rows = loglik[informative(loglik)]
    if rows.shape[0] == 0:
        return pi
    lik = _likelihoods(rows)
    floor = 1e-6 / k
    for _ in range(iterations):
        mix = lik @ pi
        new = pi * (lik.T @ (1.0 / mix)) / rows.shape[0]
        new = np.maximum(new, floor)
        new /= new.sum()
        done = float(np.abs(new - pi).max()) < tol
        pi = new
        if done:
            break
    return pi


def posterior_mean(loglik: NDArray[np.float64], grid: NDArray[np.float64],
                   prior: NDArray[np.float64]) -> NDArray[np.float64]:
    """E[λ | observations] per page under ``prior`` (changes per time unit, always > 0)."""
    lik = _likelihoods(loglik) * prior[None, :]
    return (lik @ grid) / lik.sum(axis=1)


def posterior_sd(loglik: NDArray[np.float64], grid: NDArray[np.float64],
                 prior: NDArray[np.float64]) -> NDArray[np.float64]:
    """Posterior standard deviation of λ per page (the confidence shown by ``--explain``)."""
    lik = _likelihoods(loglik) * prior[None, :]
    z = lik.sum(axis=1)
    m1 = (lik @ grid) / z
    m2 = (lik @ (grid * grid)) / z
    return np.sqrt(np.maximum(m2 - m1 * m1, 0.0))
