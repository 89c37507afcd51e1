"""Which estimator to use for one page (003 §6.1): Last-Modified when the server's dates
are reliable (per page and per host), else the MD5-signature MLE, else the prior."""

from __future__ import annotations

import math

from refresh.estimators import RateEstimate, RateSource, signature_rate
from refresh.last_modified import last_modified_rate, page_reliability
from refresh.observations import AccessHistory


def estimate_rate(history: AccessHistory, prior: float, host_reliable: bool = True,
                  tolerance: float = 2.0, resolution: float = math.inf) -> RateEstimate:
    """The rate (changes per time unit of ``history``) the planner should use for a page.

    ``prior`` (changes per time unit) answers a page read once whose dates cannot be used.
    ``host_reliable`` comes from :func:`refresh.last_modified.host_reliability`;
    ``resolution`` (the planner's shortest interval, in the history's unit) is passed to
    :func:`refresh.estimators.signature_rate` for pages seen changed at every visit.
    """
    if not (math.isfinite(prior) and prior > 0):
        raise ValueError(f"prior rate {prior!r} must be finite and positive")
    if host_reliable and page_reliability(history, tolerance).reliable:
        return last_modified_rate(history)
    if history.access_times.size < 2:
        return RateEstimate(float(prior), RateSource.PRIOR, None, 0, 0)
    return signature_rate(history.change_observations(), resolution)
