"""Empirical-Bayes change rates (refresh.bayes): likelihood rows, EM prior, posterior means."""

from __future__ import annotations

import numpy as np
import pytest

from refresh import ChangeObservations, signature_rate
from refresh.bayes import (fit_prior, informative, last_modified_loglik, page_loglik,
                           posterior_mean, posterior_sd, rate_grid, signature_loglik)


def test_signature_rows_peak_at_the_mle() -> None:
    grid = rate_grid(1e-3, 1e2, 400)
    tau = np.array([1.0, 2.0, 0.5, 1.5, 1.0, 3.0])
    changed = np.array([1, 0, 0, 1, 1, 0], dtype=bool)
    row = signature_loglik(tau, changed, grid).sum(axis=0)
    mle = signature_rate(ChangeObservations(tau, changed)).rate
    assert grid[np.argmax(row)] == pytest.approx(mle, rel=0.03)


def test_posterior_mean_converges_to_the_true_rate_with_many_reads() -> None:
    rng = np.random.default_rng(3)
    grid = rate_grid(1e-3, 30.0, 128)
    rate = 0.7
    tau = rng.exponential(1.0, 2000)
    changed = rng.random(tau.size) < -np.expm1(-rate * tau)
    rows = page_loglik(signature_loglik(tau, changed, grid), np.zeros(tau.size, int), 1)
    prior = np.full(grid.size, 1.0 / grid.size)
    assert posterior_mean(rows, grid, prior)[0] == pytest.approx(rate, rel=0.1)
    assert posterior_sd(rows, grid, prior)[0] < 0.1


def test_em_recovers_a_two_rate_population_and_flat_rows_get_the_prior_mean() -> None:
    rng = np.random.default_rng(5)
    grid = rate_grid(1e-3, 30.0, 64)
    n = 3000
    true = np.where(rng.random(n) < 0.3, 3.0, 0.05)
    exposure = rng.gamma(20.0, 1.0 / true)  # 20 changes' worth of Last-Modified exposure
    changes = rng.poisson(true * exposure)
    rows = np.vstack([last_modified_loglik(exposure, changes, grid), np.zeros((5, grid.size))])
    assert informative(rows).sum() == n
    prior = fit_prior(rows)
    fast_share = prior[grid > 0.5].sum()
    assert fast_share == pytest.approx(0.3, abs=0.03)
    post = posterior_mean(rows, grid, prior)
    assert post[n:] == pytest.approx(np.full(5, float(prior @ grid)))
    assert np.median(np.abs(post[:n] - true) / true) < 0.3


def test_bad_inputs_are_refused() -> None:
    grid = rate_grid()
    with pytest.raises(ValueError, match="grid"):
        rate_grid(1.0, 0.5)
    with pytest.raises(ValueError, match="intervals"):
        signature_loglik([1.0, 0.0], [True, False], grid)
    with pytest.raises(ValueError, match="exposure"):
        last_modified_loglik([-1.0], [1], grid)
    with pytest.raises(ValueError, match="start prior"):
        fit_prior(np.zeros((2, grid.size)), start=np.zeros(grid.size))
