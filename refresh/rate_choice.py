"""Which estimator to use for one page (003 §6.1): Last-Modified when the server's dates
are reliable (per page and per host), else the MD5-signature MLE (bias-reduced, see
:mod:`refresh.estimators`), else the prior."""

from __future__ import annotations

import math

from refresh.estimators import RateEstimate, RateSource, signature_rate
from refresh.last_modified import dated_history, last_modified_rate, page_reliability, shrunk_rate
from refresh.observations import AccessHistory


def estimate_rate(history: AccessHistory, prior: float, host_reliable: bool = True,
                  tolerance: float = 2.0, resolution: float = math.inf,
                  lm_prior_shape: float | None = None) -> RateEstimate:
    """The rate (changes per time unit of ``history``) the planner should use for a page.

    ``prior`` (changes per time unit) answers a page read once whose dates cannot be used.
    The dates are judged and used from the second access on when the first is the response
    time (:func:`refresh.last_modified.dated_history`); signatures use every access.
    ``host_reliable`` comes from :func:`refresh.last_modified.host_reliability`;
    ``resolution`` (the planner's shortest interval, in the history's unit) is passed to
    :func:`refresh.estimators.signature_rate` for pages seen changed at every visit.
    ``lm_prior_shape`` (e.g. 1.0): Last-Modified rates become the Gamma posterior mean
    toward ``prior`` (:func:`refresh.last_modified.shrunk_rate`) instead of C / exposure.
    """
    if not (math.isfinite(prior) and prior > 0):
        raise ValueError(f"prior rate {prior!r} must be finite and positive")
    dated = dated_history(history, tolerance)
    if host_reliable and page_reliability(dated, tolerance).reliable:
        est = last_modified_rate(dated)
        if lm_prior_shape is None:
            return est
        exposure = est.n_changes / est.rate
        rate = float(shrunk_rate(est.n_changes, exposure, prior, lm_prior_shape))
        return RateEstimate(rate, RateSource.LAST_MODIFIED,
                            math.sqrt(est.n_changes + lm_prior_shape)
                            / (exposure + lm_prior_shape / prior),
                            est.n_intervals, est.n_changes)
    if history.access_times.size < 2:
        return RateEstimate(float(prior), RateSource.PRIOR, None, 0, 0)
    return signature_rate(history.change_observations(), resolution, bias_reduced=True)
