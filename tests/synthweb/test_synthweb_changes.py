"""Poisson page changes on the injected clock, ETag / Last-Modified and 304 answers."""

from __future__ import annotations

from email.utils import formatdate, parsedate_to_datetime

import numpy as np
import requests
from scipy import stats

from xyro.clock import ManualClock
from xyro.synthweb import SyntheticWeb
from xyro.synthweb.changes import MAX_AGE, ChangeProcess

T0 = 1_780_000_000.0


def test_change_counts_follow_poisson_with_the_page_rate() -> None:
    rates = np.full(400, 1 / 600.0)  # one change per 10 clock minutes
    proc = ChangeProcess(seed=5, rates=rates, t0=T0)
    horizon = 6 * 3600.0
    counts = np.array([proc.changes_between(i, T0, T0 + horizon) for i in range(400)])
    expected = horizon / 600.0  # 36 per page
    assert abs(counts.mean() - expected) < 3 * np.sqrt(expected / 400)
    # Dispersion test: for Poisson, sum (x - mean)^2 / mean ~ chi2(n - 1).
    d = ((counts - expected) ** 2).sum() / expected
    assert stats.chi2.sf(d, 399) > 0.001 and stats.chi2.cdf(d, 399) > 0.001


def test_gaps_are_exponential() -> None:
    proc = ChangeProcess(seed=9, rates=np.array([1 / 60.0]), t0=T0)
    times = np.array(proc.events(0, T0, T0 + 60 * 2000))
    gaps = np.diff(np.concatenate([[T0], times]))
    assert stats.kstest(gaps, "expon", args=(0, 60.0)).pvalue > 0.001


def test_last_change_before_t0_is_that_of_the_same_poisson_process() -> None:
    # The age of version 0 at t0 is the backward recurrence time of the page's own process,
    # Exp(lambda), unless the page was created later (at most MAX_AGE before t0); a birth
    # drawn without the rate would date a page changing hourly weeks back.
    rates = np.full(2000, 1 / 3600.0)
    proc = ChangeProcess(seed=3, rates=rates, t0=T0)
    ages = np.array([T0 - proc.birth(i) for i in range(2000)])
    assert stats.kstest(ages, "expon", args=(0, 3600.0)).pvalue > 0.001
    slow = ChangeProcess(seed=3, rates=np.array([1e-12, 0.0]), t0=T0)
    assert 0 < T0 - slow.birth(0) <= MAX_AGE and 0 < T0 - slow.birth(1) <= MAX_AGE


def test_events_do_not_depend_on_query_order() -> None:
    rates = np.array([1 / 100.0, 1 / 7.0, 0.0])
    a = ChangeProcess(seed=1, rates=rates, t0=T0)
    b = ChangeProcess(seed=1, rates=rates, t0=T0)
    for t in (T0 + 50, T0 + 5000, T0 + 120):
        a.version(0, t)
    assert a.events(0, T0, T0 + 9000) == b.events(0, T0, T0 + 9000)
    assert a.version(1, T0 + 1000) == b.version(1, T0 + 1000)
    assert a.events(2, T0, T0 + 1e9) == [] and a.version(2, T0 + 1e9) == 0


def test_served_version_follows_the_clock(web: SyntheticWeb, clock: ManualClock) -> None:
    page = next(p for p in web.model.pages if p.rate > 1 / 7200 and p.kind == "html"
                and not web.model.hosts[p.host].throttled)
    url = web.url(page.id)
    first = requests.get(url, timeout=5)
    assert "Revision 0:" in first.text
    clock.advance(20 / page.rate)  # about 20 changes
    n = web.changes_between(page.id, T0, clock.now())
    assert n > 0
    second = requests.get(url, timeout=5)
    assert f"Revision {n}:" in second.text
    assert second.text != first.text


def _pick(web: SyntheticWeb, reliable: bool, etag: bool = True) -> int:
    return next(p.id for p in web.model.pages if p.kind == "html" and p.rate > 0
                and web.model.hosts[p.host].reliable_last_modified == reliable
                and web.model.hosts[p.host].etag == etag
                and not web.model.hosts[p.host].throttled)


def test_etag_gives_304_until_the_page_changes(web: SyntheticWeb, clock: ManualClock) -> None:
    pid = _pick(web, reliable=False)
    url = web.url(pid)
    r = requests.get(url, timeout=5)
    tag = r.headers["ETag"]
    again = requests.get(url, headers={"If-None-Match": tag}, timeout=5)
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == tag
    nxt = web.change_times(pid, clock.now(), clock.now() + 1e9)[0]
    clock.set(nxt + 1)
    changed = requests.get(url, headers={"If-None-Match": tag}, timeout=5)
    assert changed.status_code == 200 and changed.headers["ETag"] != tag


def test_reliable_last_modified_is_the_last_change(web: SyntheticWeb,
                                                   clock: ManualClock) -> None:
    pid = _pick(web, reliable=True)
    url = web.url(pid)
    clock.advance(3 / web.model.pages[pid].rate)
    r = requests.get(url, timeout=5)
    lm = parsedate_to_datetime(r.headers["Last-Modified"]).timestamp()
    version, last = web.changes.state(pid, clock.now())
    assert lm == int(last) and lm <= clock.now()
    ims = {"If-Modified-Since": r.headers["Last-Modified"]}
    assert requests.get(url, headers=ims, timeout=5).status_code == 304
    older = {"If-Modified-Since": formatdate(last - 10, usegmt=True)}
    assert requests.get(url, headers=older, timeout=5).status_code == 200
    assert requests.get(url, headers={"If-Modified-Since": "garbage"}, timeout=5
                        ).status_code == 200


def test_unreliable_last_modified_is_now(web: SyntheticWeb, clock: ManualClock) -> None:
    pid = _pick(web, reliable=False)
    url = web.url(pid)
    clock.advance(12345.0)
    r = requests.get(url, timeout=5)
    assert parsedate_to_datetime(r.headers["Last-Modified"]).timestamp() == int(clock.now())
    # Unreliable hosts ignore If-Modified-Since: always a full answer.
    ims = {"If-Modified-Since": formatdate(clock.now() + 3600, usegmt=True)}
    assert requests.get(url, headers=ims, timeout=5).status_code == 200
