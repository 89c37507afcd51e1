"""Signature-based change-rate estimators (003 §6.1.1, eq. 9)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from refresh import (ChangeObservations, RateSource, cho_bias_reduced_rate, naive_rate,
                     signature_rate, signature_rates)
from refresh.estimators import fisher_stderr, log_likelihood, log_likelihood_derivative


def brute_force_mle(obs: ChangeObservations) -> float:
    """Grid over log x, then a bounded 1-D refinement around the best grid point."""
    us = np.linspace(-25.0, 25.0, 20001)
    ll = log_likelihood(obs, np.exp(us))
    best = int(np.argmax(ll))
    lo, hi = us[max(best - 1, 0)], us[min(best + 1, us.size - 1)]
    res = minimize_scalar(lambda u: -float(log_likelihood(obs, math.exp(u))[0]),
                          bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return math.exp(res.x)


def random_observations(rng: np.random.Generator, n: int, rate: float) -> ChangeObservations:
    intervals = rng.exponential(1.0, n) * rng.choice([0.1, 1.0, 10.0], n)
    changed = rng.random(n) < -np.expm1(-rate * intervals)
    return ChangeObservations(intervals, changed)


def test_mle_matches_brute_force_maximiser_on_random_data() -> None:
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(60):
        obs = random_observations(rng, int(rng.integers(2, 40)), float(np.exp(rng.uniform(-4, 2))))
        if obs.n_changed == 0 or obs.n_unchanged == 0:
            continue
        est = signature_rate(obs)
        assert est.source is RateSource.SIGNATURE_MLE
        assert est.rate == pytest.approx(brute_force_mle(obs), rel=1e-6)
        assert abs(log_likelihood_derivative(obs, est.rate)) < 1e-8 * (obs.unchanged_time + 1)
        checked += 1
    assert checked >= 30


@given(st.lists(st.tuples(st.floats(1e-3, 1e3), st.booleans()), min_size=2, max_size=30))
@settings(max_examples=60, deadline=None)
def test_score_is_strictly_decreasing(rows: list[tuple[float, bool]]) -> None:
    obs = ChangeObservations([r[0] for r in rows], [r[1] for r in rows])
    if obs.n_changed == 0:
        return
    xs = np.exp(np.linspace(-12, 12, 200))
    g = np.array([log_likelihood_derivative(obs, float(x)) for x in xs])
    assert np.all(np.isfinite(g))
    assert np.all(np.diff(g) <= 0)
    assert np.all(np.diff(g)[g[1:] > -obs.unchanged_time * (1 - 1e-9)] < 0)


def test_extreme_products_stay_finite() -> None:
    # c·x from 1e-12 to 1e12 in one history: no overflow, no 0/0.
    obs = ChangeObservations([1e-6, 1e6, 3.0, 1e-6, 5.0], [True, True, False, False, True])
    est = signature_rate(obs)
    assert math.isfinite(est.rate) and est.rate > 0
    assert est.rate == pytest.approx(brute_force_mle(obs), rel=1e-6)
    assert math.isfinite(log_likelihood_derivative(obs, 1e12))
    assert math.isfinite(log_likelihood_derivative(obs, 1e-12))


def test_never_changed_is_half_a_change_over_observed_time() -> None:
    est = signature_rate(ChangeObservations([2.0, 3.0, 5.0], [False, False, False]))
    assert est.source is RateSource.NEVER_CHANGED and est.stderr is None
    assert est.rate == pytest.approx(1.0 / 20.0)
    longer = signature_rate(ChangeObservations([2.0, 3.0, 5.0, 10.0], [False] * 4))
    assert 0 < longer.rate < est.rate


def test_always_changed_is_finite_and_matches_cho_at_x_equals_n() -> None:
    for n in (1, 5, 50):
        est = signature_rate(ChangeObservations([2.0] * n, [True] * n))
        assert est.source is RateSource.ALWAYS_CHANGED
        assert est.rate == pytest.approx(math.log(2 * n + 1) / 2.0, rel=1e-10)
    irregular = signature_rate(ChangeObservations([0.5, 4.0, 9.0], [True, True, True]))
    assert math.isfinite(irregular.rate) and irregular.rate > 0
    # Governed by the shortest interval: shrinking it raises the bound.
    shorter = signature_rate(ChangeObservations([0.05, 4.0, 9.0], [True, True, True]))
    assert shorter.rate > irregular.rate


def test_stderr_shrinks_with_more_observations() -> None:
    rng = np.random.default_rng(3)
    small = signature_rate(random_observations(rng, 20, 0.5))
    big = signature_rate(random_observations(rng, 2000, 0.5))
    assert small.stderr is not None and big.stderr is not None
    assert big.stderr < small.stderr
    assert big.rate == pytest.approx(0.5, rel=4 * big.stderr / 0.5)
    assert fisher_stderr([1.0, 2.0], 0.3) > 0


def test_batch_equals_scalar_estimates() -> None:
    rng = np.random.default_rng(11)
    n_pages = 40
    page = rng.integers(0, n_pages - 3, 600)  # the last three pages have no interval
    intervals = rng.exponential(1.0, 600)
    changed = rng.random(600) < rng.random(n_pages)[page]
    batch = signature_rates(intervals, changed, page, n_pages, prior=0.25)
    for p in range(n_pages):
        sel = page == p
        expected = (signature_rate(ChangeObservations(intervals[sel], changed[sel])).rate
                    if sel.any() else 0.25)
        assert batch[p] == pytest.approx(expected, rel=1e-9)


def test_naive_and_cho_on_regular_accesses() -> None:
    obs = ChangeObservations([2.0] * 10, [True] * 4 + [False] * 6)
    assert naive_rate(obs) == pytest.approx(4 / 20)
    assert cho_bias_reduced_rate(obs) == pytest.approx(-math.log(6.5 / 10.5) / 2.0)


@pytest.mark.parametrize("intervals, changed, message", [
    ([1.0, -2.0], [True, False], "not positive"),
    ([1.0, 0.0], [True, False], "not positive"),
    ([1.0, float("nan")], [True, False], "NaN"),
    ([1.0, float("inf")], [True, False], "NaN or infinite"),
    ([1.0, 2.0], [True], "differ in length"),
    ([[1.0, 2.0]], [[True, False]], "1-D"),
    (["a", "b"], [True, False], "not numeric"),
    ([1.0, 2.0], [2, 0], "booleans"),
])
def test_bad_observations_raise(intervals: list, changed: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ChangeObservations(intervals, changed)


def test_no_interval_and_bad_batch_inputs_raise() -> None:
    with pytest.raises(ValueError, match="at least two accesses"):
        signature_rate(ChangeObservations([], []))
    with pytest.raises(ValueError, match="at least two accesses"):
        cho_bias_reduced_rate(ChangeObservations([], []))
    with pytest.raises(ValueError, match="page ids"):
        signature_rates([1.0], [True], [5], 3, prior=1.0)
    with pytest.raises(ValueError, match="prior"):
        signature_rates([1.0], [True], [0], 1, prior=0.0)
    with pytest.raises(ValueError, match="entries for"):
        signature_rates([1.0, 2.0], [True, False], [0], 1, prior=1.0)
    with pytest.raises(ValueError, match="finite and positive"):
        log_likelihood_derivative(ChangeObservations([1.0], [True]), float("nan"))


def test_resolution_floors_always_changed_pages_only() -> None:
    slow_looking = ChangeObservations([20.0, 30.0], [True, True])
    plain = signature_rate(slow_looking)
    floored = signature_rate(slow_looking, resolution=1.0)
    assert floored.rate == pytest.approx(math.log(5) / 1.0)
    assert floored.rate > plain.rate
    mixed = ChangeObservations([20.0, 30.0, 5.0], [True, True, False])
    assert signature_rate(mixed, resolution=1.0).rate == signature_rate(mixed).rate
    batch = signature_rates([20.0, 30.0, 20.0, 30.0, 5.0], [1, 1, 1, 1, 0], [0, 0, 1, 1, 1], 2,
                            prior=1.0, resolution=1.0)
    assert batch[0] == pytest.approx(floored.rate)
    assert batch[1] == pytest.approx(signature_rate(mixed).rate)
    with pytest.raises(ValueError, match="resolution"):
        signature_rate(slow_looking, resolution=0.0)
    with pytest.raises(ValueError, match="resolution"):
        signature_rates([1.0], [True], [0], 1, prior=1.0, resolution=float("nan"))


def test_bias_reduction_is_the_mle_with_half_a_short_no_change_interval() -> None:
    obs = ChangeObservations([0.5, 1.0, 2.0, 0.7], [True, True, False, True])
    reduced = signature_rate(obs, bias_reduced=True)
    augmented = signature_rate(ChangeObservations([0.5, 1.0, 2.0, 0.7, 0.25],
                                                  [True, True, False, True, False]))
    assert reduced.rate == pytest.approx(augmented.rate, rel=1e-12)
    assert reduced.rate < signature_rate(obs).rate
    # continuous with the V = 0 rule, which already adds that half interval
    always = ChangeObservations([0.5, 1.0, 0.7], [True, True, True])
    assert signature_rate(always, bias_reduced=True).rate == signature_rate(always).rate
    # never changed: untouched
    never = ChangeObservations([2.0, 3.0], [False, False])
    assert signature_rate(never, bias_reduced=True).rate == signature_rate(never).rate


def test_bias_reduced_batch_matches_the_scalar_estimator() -> None:
    rng = np.random.default_rng(11)
    pages = [random_observations(rng, int(rng.integers(2, 30)), 1.5) for _ in range(40)]
    intervals = np.concatenate([o.intervals for o in pages])
    changed = np.concatenate([o.changed for o in pages])
    page = np.concatenate([np.full(o.intervals.size, k) for k, o in enumerate(pages)])
    batch = signature_rates(intervals, changed, page, len(pages), prior=0.3, bias_reduced=True)
    for k, o in enumerate(pages):
        assert batch[k] == pytest.approx(signature_rate(o, bias_reduced=True).rate, rel=1e-9)


def test_bias_reduction_lowers_the_bias_of_fast_pages() -> None:
    """λ·interval = 5, 49 exponential intervals: the plain MLE runs ~10 % high."""
    rng = np.random.default_rng(5)
    pages, n, rate = 3000, 49, 5.0
    tau = rng.exponential(1.0, (pages, n))
    changed = rng.random(tau.shape) < -np.expm1(-rate * tau)
    page = np.repeat(np.arange(pages), n)
    plain = signature_rates(tau.ravel(), changed.ravel(), page, pages, prior=1.0)
    reduced = signature_rates(tau.ravel(), changed.ravel(), page, pages, prior=1.0,
                              bias_reduced=True)
    bias_plain, bias_reduced = plain.mean() / rate - 1, reduced.mean() / rate - 1
    assert bias_plain > 0.07
    assert abs(bias_reduced) < bias_plain - 0.015


@pytest.mark.parametrize("unchanged", [1e7, 1e8, 3e8, 1e12, 1e15])
def test_a_long_unchanged_time_after_one_short_change_has_a_rate(unchanged: float) -> None:
    # One change seen between two fetches 1 s apart, then months unchanged: Σv/c so large
    # that the score rounds to 0 at the bracket's low end; brentq then found no sign change.
    obs = ChangeObservations([1.0, unchanged], [True, False])
    est = signature_rate(obs)
    assert est.source is RateSource.SIGNATURE_MLE
    assert est.rate == pytest.approx(1.0 / unchanged, rel=1e-6)
    batch = signature_rates([1.0, unchanged], [True, False], [0, 0], 1, prior=1.0)
    assert batch[0] == pytest.approx(est.rate, rel=1e-9)
