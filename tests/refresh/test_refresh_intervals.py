"""Optimal refresh intervals: eq. 22, water-filling under clamps, Ω(G), incremental S."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refresh import RateSum, refresh_intervals, refresh_weights, time_average_obsolescence


def random_instance(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    importance = rng.pareto(1.2, n) + 0.01  # heavy-tailed, like PageRank
    rates = np.exp(rng.uniform(math.log(0.01), math.log(10.0), n))
    return importance, rates


def test_unclamped_matches_eq_22_and_omega() -> None:
    rng = np.random.default_rng(1)
    r, lam = random_instance(rng, 500)
    g = 40.0
    plan = refresh_intervals(r, lam, g, t_min=1e-9)
    s = np.sqrt(r * lam).sum()
    assert plan.k == pytest.approx(s / g)
    assert np.allclose(plan.intervals, (s / g) / np.sqrt(r * lam))
    assert plan.omega == pytest.approx(s * s / (2 * g))
    assert plan.omega_unclamped == pytest.approx(plan.omega)


def kkt_holds(w: np.ndarray, t: np.ndarray, k: float, t_min: float, t_max: float) -> bool:
    at_min = np.isclose(t, t_min, rtol=1e-9)
    at_max = np.isclose(t, t_max, rtol=1e-9)
    free = ~at_min & ~at_max
    return bool(np.allclose(w[free] * t[free], k, rtol=1e-8)
                and (w[at_min] * t_min >= k * (1 - 1e-9)).all()
                and (w[at_max] * t_max <= k * (1 + 1e-9)).all())


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 400), t_max=st.floats(5.0, 400.0),
       g_share=st.floats(0.0, 1.0))
@settings(max_examples=80, deadline=None)
def test_water_filling_is_feasible_and_optimal(seed: int, n: int, t_max: float, g_share: float) -> None:
    rng = np.random.default_rng(seed)
    r, lam = random_instance(rng, n)
    lo_g, hi_g = n / t_max, float(n)
    g = lo_g + g_share * (hi_g - lo_g) * 0.999 + 1e-9
    plan = refresh_intervals(r, lam, g, t_min=1.0, t_max=t_max)
    t = plan.intervals
    assert (t >= 1.0 - 1e-12).all() and (t <= t_max * (1 + 1e-12)).all()
    assert (1.0 / t).sum() == pytest.approx(g, rel=1e-9)
    w = refresh_weights(r, lam)
    assert kkt_holds(w, t, plan.k, 1.0, t_max)
    assert plan.omega >= plan.omega_unclamped * (1 - 1e-12)
    # Beats (or equals) "unclamped, then clamped and rescaled to the same bandwidth".
    naive = np.clip((w.sum() / g) / w, 1.0, t_max)
    x = 1.0 / naive
    scale = g / x.sum()
    naive = np.clip(1.0 / (x * scale), 1.0, t_max)
    if (1.0 / naive).sum() <= g * (1 + 1e-9):
        assert plan.omega <= time_average_obsolescence(r, lam, naive) * (1 + 1e-9)
    # And any feasible random perturbation at the same bandwidth is no better.
    for _ in range(5):
        y = (1.0 / t) * np.exp(rng.normal(0, 0.1, n))
        y = np.clip(y * g / y.sum(), 1.0 / t_max, 1.0)
        if abs(y.sum() - g) < 1e-9 * g:
            assert plan.omega <= time_average_obsolescence(r, lam, 1.0 / y) * (1 + 1e-12)


def test_clamps_bind_and_floor_excludes_pages() -> None:
    rng = np.random.default_rng(2)
    r, lam = random_instance(rng, 1000)
    r[:10] = 1e-6
    plan = refresh_intervals(r, lam, 60.0, t_min=1.0, t_max=50.0, importance_floor=1e-3)
    assert np.isinf(plan.intervals[:10]).all() and plan.n_below_floor == 10
    assert plan.n_at_max > 0
    kept = np.isfinite(plan.intervals)
    assert (1.0 / plan.intervals[kept]).sum() == pytest.approx(60.0, rel=1e-9)
    assert plan.omega > plan.omega_unclamped


def test_more_bandwidth_than_pages_puts_everyone_at_t_min() -> None:
    plan = refresh_intervals([1.0, 2.0], [0.5, 0.5], 10.0, t_min=1.0, t_max=30.0)
    assert np.allclose(plan.intervals, 1.0) and plan.bandwidth == pytest.approx(2.0)


def test_all_pages_below_floor() -> None:
    plan = refresh_intervals([0.0, 0.0], [1.0, 1.0], 1.0)
    assert np.isinf(plan.intervals).all() and plan.bandwidth == 0.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(importance=[1.0], rates=[1.0], bandwidth=0.0), "bandwidth"),
    (dict(importance=[1.0], rates=[1.0], bandwidth=-3.0), "bandwidth"),
    (dict(importance=[1.0], rates=[1.0], bandwidth=float("nan")), "bandwidth"),
    (dict(importance=[1.0, 2.0], rates=[1.0], bandwidth=1.0), "same length"),
    (dict(importance=[float("nan")], rates=[1.0], bandwidth=1.0), "importance"),
    (dict(importance=[-1.0], rates=[1.0], bandwidth=1.0), "importance"),
    (dict(importance=[1.0], rates=[0.0], bandwidth=1.0), "rates"),
    (dict(importance=[1.0], rates=[float("nan")], bandwidth=1.0), "rates"),
    (dict(importance=[1.0], rates=[1.0], bandwidth=1.0, t_min=0.0), "t_min"),
    (dict(importance=[1.0], rates=[1.0], bandwidth=1.0, t_max=0.5), "t_max"),
    (dict(importance=[1.0], rates=[1.0], bandwidth=1.0, importance_floor=-1.0), "floor"),
    (dict(importance=[1.0] * 100, rates=[1.0] * 100, bandwidth=1.0, t_max=10.0), "raise t_max"),
])
def test_bad_plans_raise(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        refresh_intervals(**kwargs)


def test_incremental_sum_equals_recomputed_after_many_updates() -> None:
    rng = np.random.default_rng(4)
    r, lam = random_instance(rng, 10_000)
    w = refresh_weights(r, lam)
    s = RateSum(w)
    for _ in range(2000):
        ids = rng.choice(w.size, 50, replace=False)
        new = w[ids] * np.exp(rng.normal(0, 1, 50))
        s.update(w[ids], new)
        w[ids] = new
    s.remove(w[:100])
    s.add(np.array([3.0]))
    expected = math.fsum(w[100:]) + 3.0
    assert s.value == pytest.approx(expected, rel=1e-12)
    assert s.k(5.0) == pytest.approx(expected / 5.0, rel=1e-12)
    assert s.omega(5.0) == pytest.approx(expected ** 2 / 10.0, rel=1e-12)


def test_rate_sum_rejects_bad_input() -> None:
    s = RateSum([1.0])
    with pytest.raises(ValueError, match="finite"):
        s.add([float("nan")])
    with pytest.raises(ValueError, match="differ in length"):
        s.update([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="bandwidth"):
        s.k(0.0)
    with pytest.raises(ValueError, match="intervals must be positive"):
        time_average_obsolescence([1.0], [1.0], [0.0])


def test_rate_sum_keeps_what_each_batch_sum_rounds_away() -> None:
    # One rounded fsum per batch lost the small weights beside a huge one.
    s = RateSum([1e16, 1.5])
    s.remove([1e16])
    assert s.value == 1.5
    t = RateSum([1e16])
    t.update([1e16], [1e16 + 2.0])
    t.add([0.25, 0.25])
    t.remove([1e16 + 2.0])
    assert t.value == 0.5
