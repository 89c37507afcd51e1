"""Baseline refresh policies, to measure the planner against (003 §6; DESIGN.md §6).

The planner refreshes page i every t_i = K/√(r_i·λ_i) (water-filled under the clamps). Two
policies a plain crawler would use instead, with the same bandwidth:

* ``uniform`` (round robin): every page as often as every other, t_i = N/G;
* ``change_proportional``: t_i ∝ 1/λ_i, every page refreshed after the same expected number
  of changes (Cho and Garcia-Molina's "proportional" policy).

Each is run as a priority list, the way a crawler without folders runs it: each unit the G
(less discovery) pages with the highest priority are fetched, the priority being the age
(time since the page was last read) for ``uniform`` and the expected changes since then,
λ_i·age, for ``change_proportional``. In steady state a page is fetched when its priority
reaches the level at which G pages a unit cross it: age = N/G for all pages, and
λ_i·age = c for every page, i.e. t_i = c/λ_i. Pages older than ``t_max`` come first, the
clamp the planner keeps too (t_i ≤ t_max). Arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

POLICIES = ("planner", "uniform", "change_proportional")


def baseline_priority(policy: str, age_units: ArrayLike, rates_per_unit: ArrayLike,
                      t_max_units: float) -> NDArray[np.float64]:
    """Priority of each page under ``policy`` (higher: fetched first; module doc).

    ``age_units``: time since each page's last read, in time units (≥ 0); ``rates_per_unit``:
    its estimated change rate λ̂ (changes per unit, > 0); ``t_max_units``: the longest
    interval, past which a page goes before every other.
    """
    age = np.asarray(age_units, dtype=np.float64)
    lam = np.asarray(rates_per_unit, dtype=np.float64)
    if age.shape != lam.shape or age.ndim != 1:
        raise ValueError(f"ages {age.shape} and rates {lam.shape} must be 1-D arrays of the "
                         "same length (one entry per page)")
    if policy == "uniform":
        score = age.copy()
    elif policy == "change_proportional":
        score = lam * age
    else:
        raise ValueError(f"refresh policy {policy!r} is not a baseline; use one of "
                         f"{POLICIES[1:]}")
    # Past t_max: first (above every other page's score), the most overdue first.
    overdue = age >= t_max_units
    if overdue.any():
        top = float(score[~overdue].max()) if (~overdue).any() else 0.0
        score[overdue] = top + 1.0 + age[overdue]
    return score
