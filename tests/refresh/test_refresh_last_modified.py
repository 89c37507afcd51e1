"""Last-Modified estimator (003 §6.1.2, eq. 10), reliability tests and the estimator choice."""

from __future__ import annotations

import numpy as np
import pytest

from refresh import (AccessHistory, RateSource, dated_history, estimate_rate, host_reliability,
                     last_modified_rate, page_reliability)

# Times in seconds; a page read every 100 s. It changed at 30, 250 and 260 s and at no other time.
TIMES = [100.0, 200.0, 300.0, 400.0]
DATES = [30.0, 30.0, 260.0, 260.0]
MD5_CHANGED = [False, True, False]


def test_constructed_history_gives_changes_over_unchanged_time() -> None:
    h = AccessHistory(TIMES, MD5_CHANGED, DATES)
    assert page_reliability(h).reliable
    est = last_modified_rate(h)
    # change intervals: first access (age 70) and (200, 300] (age 40); no-change: 100 + 100
    assert est.source is RateSource.LAST_MODIFIED
    assert est.n_changes == 2
    assert est.rate == pytest.approx(2 / (70 + 40 + 100 + 100))
    assert last_modified_rate(h, paper_eq10=True).rate == pytest.approx(2 / (70 + 40))


def test_one_date_near_the_access_time_is_not_enough_to_distrust() -> None:
    # A genuine page may change just before a fetch; a dynamic server stamps every one.
    h = AccessHistory(TIMES, MD5_CHANGED, [30.0, 30.0, 299.5, 299.5])
    assert page_reliability(h).reliable


def test_a_date_a_little_after_its_access_is_a_change_seen_there() -> None:
    # The server's clock 1.5 s ahead: the change seen at 300 s is dated 301.5 s, within
    # the tolerance. It is a change in (200, 300], repeated unchanged at 400 s, not a
    # no-change interval followed by a date that moved to before its access.
    ahead = AccessHistory(TIMES, MD5_CHANGED, [30.0, 30.0, 301.5, 301.5])
    on_time = AccessHistory(TIMES, MD5_CHANGED, [30.0, 30.0, 300.0, 300.0])
    assert page_reliability(ahead) == page_reliability(on_time)
    assert page_reliability(ahead).reliable
    assert last_modified_rate(ahead).rate == last_modified_rate(on_time).rate
    assert last_modified_rate(ahead).n_changes == 2
    last = AccessHistory(TIMES, [False, False, True], [30.0, 30.0, 30.0, 401.0])
    assert page_reliability(last).reliable
    assert last_modified_rate(last).rate == pytest.approx(2 / (70 + 100 + 100 + 0))


def test_first_access_alone_counts() -> None:
    est = last_modified_rate(AccessHistory([100.0], [], [75.0]))
    assert est.rate == pytest.approx(1 / 25) and est.n_changes == 1


def test_estimator_is_close_to_the_truth_on_a_poisson_page() -> None:
    rng = np.random.default_rng(5)
    rate = 0.02
    changes = np.cumsum(rng.exponential(1 / rate, 4000))
    times = np.cumsum(rng.uniform(5, 95, 1500)) + changes[0] + 1
    last = changes[np.searchsorted(changes, times, side="right") - 1]
    md5 = np.diff(last) != 0
    h = AccessHistory(times, md5, last)
    assert page_reliability(h).reliable
    est = last_modified_rate(h)
    assert est.rate == pytest.approx(rate, rel=0.1)
    assert estimate_rate(h, prior=1.0).source is RateSource.LAST_MODIFIED


@pytest.mark.parametrize("dates, md5, reason", [
    ([100.0, 200.0, 300.0, 400.0], MD5_CHANGED, "equals the access time"),
    ([99.5, 199.5, 299.5, 399.5], [True, True, True], "equals the access time"),
    ([30.0, 30.0, 260.0, 500.0], MD5_CHANGED, "in the future"),
    ([30.0, 150.0, 260.0, 260.0], MD5_CHANGED, "MD5 is equal"),
    ([30.0, 30.0, 30.0, 30.0], MD5_CHANGED, "MD5 changed but Last-Modified did not"),
    ([30.0, 30.0, 260.0, 20.0], MD5_CHANGED, "backwards"),
    ([30.0, 50.0, 260.0, 260.0], [True, True, False], "before the previous access"),
    ([30.0, float("nan"), 260.0, 260.0], MD5_CHANGED, "no Last-Modified"),
])
def test_unreliable_servers_fall_back_to_signatures(dates: list, md5: list, reason: str) -> None:
    h = AccessHistory(TIMES, md5, dates)
    verdict = page_reliability(h)
    assert not verdict.reliable
    assert reason in verdict.reason
    est = estimate_rate(h, prior=1.0)
    assert est.source in (RateSource.SIGNATURE_MLE, RateSource.NEVER_CHANGED,
                          RateSource.ALWAYS_CHANGED)


def test_unreliable_host_overrides_a_good_page() -> None:
    h = AccessHistory(TIMES, MD5_CHANGED, DATES)
    verdicts = host_reliability(["a", "a", "b", "b", "b"], [True, True, True, False, True])
    assert verdicts == {"a": True, "b": False}
    est = estimate_rate(h, prior=1.0, host_reliable=verdicts["b"])
    assert est.source is RateSource.SIGNATURE_MLE
    assert estimate_rate(h, prior=1.0, host_reliable=verdicts["a"]).source is RateSource.LAST_MODIFIED


def test_single_access_without_dates_uses_the_prior() -> None:
    est = estimate_rate(AccessHistory([10.0], []), prior=0.3)
    assert est.source is RateSource.PRIOR and est.rate == 0.3


def test_a_first_date_that_is_the_response_time_says_nothing() -> None:
    # The crawler records the server's stamp on a first fetch rather than a listed date it
    # cannot trust yet; the later dates are real change dates (a listing trusted by then).
    h = AccessHistory(TIMES, MD5_CHANGED, [99.5, 30.0, 260.0, 260.0])
    assert not page_reliability(h).reliable  # judged whole, the dates go backwards
    tail = AccessHistory(TIMES[1:], MD5_CHANGED[1:], [30.0, 260.0, 260.0])
    dated = dated_history(h)
    assert (dated.access_times.tolist(), dated.changed.tolist(),
            dated.last_modified.tolist()) == (TIMES[1:], MD5_CHANGED[1:], [30.0, 260.0, 260.0])
    est = estimate_rate(h, prior=1.0)
    assert est.source is RateSource.LAST_MODIFIED
    assert est.rate == pytest.approx(last_modified_rate(tail).rate)  # 2 / (170 + 40 + 100)
    assert est.rate == pytest.approx(2 / 310)


def test_only_a_stamped_first_date_is_dropped() -> None:
    genuine = AccessHistory(TIMES, MD5_CHANGED, DATES)
    assert dated_history(genuine) is genuine
    alone = AccessHistory([100.0], [], [100.0])
    assert dated_history(alone) is alone  # nothing would remain
    est = estimate_rate(alone, prior=0.3)
    assert est.source is RateSource.PRIOR and est.rate == 0.3
    undated = AccessHistory(TIMES, MD5_CHANGED)
    assert dated_history(undated) is undated
    # A server stamping every response stays unreliable once its first stamp is dropped.
    stamped = AccessHistory(TIMES, [False, False, False], [100.0, 200.0, 300.0, 400.0])
    assert not page_reliability(dated_history(stamped)).reliable
    assert estimate_rate(stamped, prior=1.0).source is not RateSource.LAST_MODIFIED


def test_a_second_stamp_after_the_dropped_one_falls_back_to_signatures() -> None:
    # The first date was the response time; the second is just after its access (server
    # clock ahead): no date left to measure an age from, so the dates are not used.
    h = AccessHistory(TIMES, MD5_CHANGED, [100.0, 200.3, 200.3, 200.3])
    verdict = page_reliability(dated_history(h))
    assert not verdict.reliable and "first access is not before" in verdict.reason
    assert estimate_rate(h, prior=1.0).source is RateSource.SIGNATURE_MLE


@pytest.mark.parametrize("times, changed, dates, message", [
    ([], [], None, "empty"),
    ([1.0, 1.0], [False], None, "strictly increase"),
    ([2.0, 1.0], [False], None, "strictly increase"),
    ([1.0, float("nan")], [False], None, "NaN"),
    ([1.0, 2.0], [False, True], None, "one flag per interval"),
    ([1.0, 2.0], [False], [0.5], "use NaN"),
    ([1.0, 2.0], [False], [0.5, float("inf")], "infinite"),
])
def test_bad_histories_raise(times: list, changed: list, dates: list | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AccessHistory(times, changed, dates)


def test_bad_arguments_raise() -> None:
    h = AccessHistory(TIMES, MD5_CHANGED, DATES)
    with pytest.raises(ValueError, match="tolerance"):
        page_reliability(h, tolerance=float("nan"))
    with pytest.raises(ValueError, match="prior"):
        estimate_rate(h, prior=-1.0)
    with pytest.raises(ValueError, match="one host per page"):
        host_reliability(["a"], [True, False])
    with pytest.raises(ValueError, match="max_bad_share"):
        host_reliability(["a"], [True], max_bad_share=2.0)
    with pytest.raises(ValueError, match="not before the first access"):
        last_modified_rate(AccessHistory([10.0], [], [12.0]))
    with pytest.raises(ValueError, match="missing"):
        last_modified_rate(AccessHistory([10.0, 20.0], [False], [5.0, float("nan")]))


def test_shrunk_last_modified_rate_is_the_gamma_posterior_mean() -> None:
    from refresh.last_modified import shrunk_rate
    # One change seen with a tiny age: raw C/exposure says 100 per unit, the posterior
    # with an exponential prior of mean 0.5 stays near the prior.
    assert float(shrunk_rate(1, 0.01, 0.5, 1.0)) == pytest.approx(2 / 2.01)
    # Much evidence: the prior washes out.
    assert float(shrunk_rate(400, 200.0, 0.5, 1.0)) == pytest.approx(2.0, rel=0.01)
    t = [0.0, 1.0, 2.0, 3.0]
    h = AccessHistory(t, [True, False, True], [-0.5, 0.5, 0.5, 2.9])
    raw = estimate_rate(h, prior=1.0, tolerance=0.01)
    shrunk = estimate_rate(h, prior=1.0, tolerance=0.01, lm_prior_shape=1.0)
    assert raw.source is shrunk.source is RateSource.LAST_MODIFIED
    exposure = raw.n_changes / raw.rate
    assert shrunk.rate == pytest.approx((raw.n_changes + 1) / (exposure + 1))
    with pytest.raises(ValueError, match="prior rate"):
        shrunk_rate(1, 1.0, 0.0)
