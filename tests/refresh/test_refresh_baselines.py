"""Baseline refresh policies (refresh.baselines): the steady states they are named for."""

from __future__ import annotations

import numpy as np
import pytest

from refresh import baseline_priority


def _simulate(policy: str, rates: np.ndarray, g: int, units: int, t_max: float = 1e9
              ) -> np.ndarray:
    """Each unit fetch the g highest-priority pages; return each page's mean interval."""
    n = rates.size
    last = -np.arange(n, dtype=np.float64) * n / g / n  # staggered first reads
    fetches = np.zeros(n)
    for unit in range(units):
        score = baseline_priority(policy, unit - last, rates, t_max)
        top = np.argsort(-score, kind="stable")[:g]
        last[top] = unit
        if unit >= units // 2:
            fetches[top] += 1
    return (units - units // 2) / np.maximum(fetches, 1e-9)


def test_uniform_refreshes_every_page_every_n_over_g_units() -> None:
    rates = np.random.default_rng(1).lognormal(0, 2, 200)
    intervals = _simulate("uniform", rates, g=20, units=400)
    assert np.allclose(intervals, 10.0, rtol=0.02)


def test_change_proportional_intervals_are_inverse_to_the_rates() -> None:
    rates = np.array([0.05, 0.1, 0.2, 0.4] * 25)
    intervals = _simulate("change_proportional", rates, g=15, units=2000)
    product = intervals * rates  # t_i * lambda_i: the same for every page
    assert product.std() / product.mean() < 0.08, product
    assert intervals[0] > 7 * intervals[3]


def test_pages_past_t_max_come_first_most_overdue_first() -> None:
    score = baseline_priority("change_proportional", np.array([5.0, 12.0, 30.0, 1.0]),
                              np.array([10.0, 1e-6, 1e-6, 60.0]), t_max_units=10.0)
    assert list(np.argsort(-score)) == [2, 1, 3, 0]


def test_unknown_policies_and_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="not a baseline"):
        baseline_priority("planner", np.ones(2), np.ones(2), 10.0)
    with pytest.raises(ValueError, match="same length"):
        baseline_priority("uniform", np.ones(2), np.ones(3), 10.0)
