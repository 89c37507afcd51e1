"""Published dates: W3C/RFC 822 parsing, judging one interval, and the per-source trust rule
(honest, lying, frozen, stamped, future, noisy sources), driven through real sitemaps."""

from __future__ import annotations

import random
from calendar import timegm
from datetime import datetime, timezone

import pytest

from xyro.publication.trust import (
    Outcome, PublishedDateTrust, PublishedDateTrusts, change_date, judge, parse_rfc822_datetime,
    parse_w3c_datetime, publication_kind,
)
from xyro.publication.feeds import parse_feed
from xyro.publication.sitemaps import parse_sitemap

DAY = 86400.0


@pytest.mark.parametrize("text, expected", [
    ("1997", timegm((1997, 1, 1, 0, 0, 0))),
    ("1997-07", timegm((1997, 7, 1, 0, 0, 0))),
    ("1997-07-16", timegm((1997, 7, 16, 0, 0, 0))),
    ("1997-07-16T19:20+01:00", timegm((1997, 7, 16, 18, 20, 0))),
    ("1997-07-16T19:20:30+01:00", timegm((1997, 7, 16, 18, 20, 30))),
    ("1997-07-16T19:20:30.45+01:00", timegm((1997, 7, 16, 18, 20, 30)) + 0.45),
    ("1997-07-16T19:20:30Z", timegm((1997, 7, 16, 19, 20, 30))),
    ("1997-07-16t19:20:30z", timegm((1997, 7, 16, 19, 20, 30))),
    ("1997-07-16 19:20:30", timegm((1997, 7, 16, 19, 20, 30))),  # no zone: UTC
    ("1997-07-16T19:20:30-0530", timegm((1997, 7, 17, 0, 50, 30))),
    ("  2024-02-29T23:59:59Z \n", timegm((2024, 2, 29, 23, 59, 59))),
])
def test_w3c_datetime_forms(text: str, expected: float) -> None:
    assert parse_w3c_datetime(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", [
    "", "yesterday", "1997-13-01", "1997-02-30", "2023-02-29", "1997-07-16T24:00Z",
    "1997-07-16T19:61Z", "1997-07-16T19:20+25:00", "97-07-16", "1997-7-16",
    "1997-07-16T19", "1997-07-16T19:20:30+01", "1997-07-16T19:20:30 PST", None, 12345,
])
def test_w3c_datetime_rejects(text: object) -> None:
    assert parse_w3c_datetime(text) is None  # type: ignore[arg-type]


def test_rfc822_rejects_garbage() -> None:
    for text in ("", "   ", "not a date", "Mon, 99 Foo 2003", None):
        assert parse_rfc822_datetime(text) is None  # type: ignore[arg-type]
    assert parse_rfc822_datetime("Wed, 02 Oct 2002 08:00:00 -0000") == timegm(
        (2002, 10, 2, 8, 0, 0))


@pytest.mark.parametrize("text, expected", [
    ("Mon, 01 Jan 2024 10:00:00 +0200", timegm((2024, 1, 1, 8, 0, 0))),
    # A colon in the numeric zone (generators mixing RFC 822 and ISO 8601): its offset too,
    # not UTC (a feed in UTC+2 was held to date two hours into the future).
    ("Mon, 01 Jan 2024 10:00:00 +02:00", timegm((2024, 1, 1, 8, 0, 0))),
    ("Mon, 01 Jan 2024 10:00:00+02:00", timegm((2024, 1, 1, 8, 0, 0))),
    ("Mon, 01 Jan 2024 10:00 -05:30 \n", timegm((2024, 1, 1, 15, 30, 0))),
    ("2024-01-01T10:00:00+02:00", timegm((2024, 1, 1, 8, 0, 0))),  # ISO in pubDate
])
def test_rfc822_numeric_zones(text: str, expected: float) -> None:
    assert parse_rfc822_datetime(text) == expected


def test_an_rss_date_with_a_colon_zone_is_not_in_the_future() -> None:
    """An item published at 10:00 in UTC+2 (08:00 UTC) and read at 09:00 UTC."""
    rss = (b'<?xml version="1.0"?><rss version="2.0"><channel><item><link>http://h.test/a'
           b'</link><pubDate>Mon, 01 Jan 2024 10:00:00 +02:00</pubDate></item></channel></rss>')
    published = timegm((2024, 1, 1, 8, 0, 0))
    listed = parse_feed(rss, "http://h.test/feed.rss").entries[0].updated
    assert listed == published
    # Fetched changed at 08:30 (last at 07:00), the feed read at 09:00: the date agrees.
    assert judge(published - 3600.0, published + 1800.0, True, listed, published + 3600.0) \
        is Outcome.AGREE


# judge(previous_fetch=100, fetch=200, changed, published, read_at)
@pytest.mark.parametrize("changed, published, read_at, outcome", [
    (True, 150.0, 300.0, Outcome.AGREE),        # date in the interval, content changed
    (False, 150.0, 300.0, Outcome.DISAGREE),    # date moved, content equal
    (False, 50.0, 300.0, Outcome.AGREE),        # date before the interval, no change
    (True, 50.0, 300.0, Outcome.MISSED),        # content changed, date did not move
    (True, 50.0, 150.0, Outcome.UNDECIDABLE),   # ... but the source was read mid-interval
    (True, 250.0, 300.0, Outcome.UNDECIDABLE),  # changed again after the fetch
    (False, 250.0, 300.0, Outcome.UNDECIDABLE),
    (True, 299.0, 300.0, Outcome.STAMPED),      # the generation time
    (True, 400.0, 300.0, Outcome.FUTURE),
    (True, 201.0, 300.0, Outcome.AGREE),        # within tolerance of the fetch
])
def test_judge(changed: bool, published: float, read_at: float, outcome: Outcome) -> None:
    assert judge(100.0, 200.0, changed, published, read_at) is outcome


D = float(timegm((2024, 3, 10, 0, 0, 0)))   # a calendar day's date: midnight UTC
H = 3600.0


@pytest.mark.parametrize("t0, t1, changed, read_at, outcome", [
    # the day spans the previous fetch: the change may lie on either side of it
    (D + 10 * H, D + 34 * H, True, D + 40 * H, Outcome.UNDECIDABLE),   # an instant: MISSED
    # the day spans the fetch: the page may have changed after it, that day
    (D - 4 * H, D + 8 * H, False, D + 40 * H, Outcome.UNDECIDABLE),    # an instant: DISAGREE
    (D - 2 * DAY, D + 3 * DAY, True, D + 4 * DAY, Outcome.AGREE),      # the day inside
    (D - 2 * DAY, D + 3 * DAY, False, D + 4 * DAY, Outcome.DISAGREE),
    (D + 2 * DAY, D + 4 * DAY, False, D + 5 * DAY, Outcome.AGREE),     # the day before t0
    (D + 2 * DAY, D + 4 * DAY, True, D + 5 * DAY, Outcome.MISSED),
    (D + 2 * DAY, D + 4 * DAY, True, D + 3 * DAY, Outcome.UNDECIDABLE),
])
def test_judge_a_calendar_day_as_its_span_in_any_time_zone(
        t0: float, t1: float, changed: bool, read_at: float, outcome: Outcome) -> None:
    assert judge(t0, t1, changed, D, read_at) is outcome
    # the same date as an instant (00:00:01Z) is judged as before
    assert judge(D - 2 * DAY, D + 3 * DAY, True, D + 1, D + 4 * DAY) is Outcome.AGREE
    assert judge(D + 10 * H, D + 34 * H, True, D + 1, D + 40 * H) is Outcome.MISSED


def test_tomorrows_date_is_in_the_future_only_when_no_time_zone_has_reached_it() -> None:
    # 11:00 UTC on D is already D + 1 in UTC+14 (earliest D + 1 - 14 h = D + 10 h)
    assert judge(D - 3 * DAY, D + 10 * H, True, D + DAY, D + 11 * H) is Outcome.UNDECIDABLE
    assert judge(D - 3 * DAY, D + 10 * H, True, D + 2 * DAY, D + 11 * H) is Outcome.FUTURE
    trust = PublishedDateTrust()
    assert trust.observe_listing(D + DAY, D + 11 * H) is None
    assert trust.observe_listing(D + 2 * DAY, D + 11 * H) is Outcome.FUTURE


def test_an_honest_source_giving_calendar_days_is_trusted() -> None:
    """A site in UTC+9 lists the local day of each page's last change (``YYYY-MM-DD``), its
    pages refetched every three days: every judged day agrees."""
    def local_day(page: Page, at: float) -> float:
        day = datetime.fromtimestamp(page.last_change(at) + 9 * H, tz=timezone.utc).date()
        return float(timegm(day.timetuple()))

    trust = run_source(local_day, random.Random(1), pages=30, rounds=16,
                       trust=PublishedDateTrust(window=200), lastmod_format="%Y-%m-%d")
    verdict = trust.verdict()
    assert verdict.trusted, verdict.reason
    assert verdict.bad == 0 and verdict.judged >= 100 and verdict.changes > 20


def test_judge_refuses_bad_times() -> None:
    with pytest.raises(ValueError, match="after previous_fetch"):
        judge(200.0, 100.0, True, 150.0, 300.0)
    with pytest.raises(ValueError, match="published must be finite"):
        judge(100.0, 200.0, True, float("nan"), 300.0)


class Page:
    """A page whose content changes at Poisson times; fetched at regular times."""

    def __init__(self, rng: random.Random, rate_per_day: float, start: float) -> None:
        self.changes: list[float] = []
        t = start - DAY * 30
        while t < start + DAY * 400:
            t += rng.expovariate(rate_per_day / DAY)
            self.changes.append(t)

    def last_change(self, at: float) -> float:
        return max((c for c in self.changes if c <= at), default=0.0)

    def changed(self, t0: float, t1: float) -> bool:
        return any(t0 < c <= t1 for c in self.changes)


def run_source(date_of, rng: random.Random, *, pages: int = 20, rounds: int = 12,
               trust: PublishedDateTrust | None = None,
               lastmod_format: str = "%Y-%m-%dT%H:%M:%SZ") -> PublishedDateTrust:
    """Crawl ``pages`` pages every 3 days; after each round, read a real sitemap whose
    lastmod values come from ``date_of(page, read_at)`` and judge the last interval."""
    trust = trust or PublishedDateTrust()
    start = timegm((2024, 1, 1, 0, 0, 0))
    site = [Page(rng, rng.uniform(0.05, 1.0), start) for _ in range(pages)]
    fetches = [[start] for _ in site]
    for r in range(1, rounds + 1):
        now = start + r * 3 * DAY
        for i in range(pages):
            fetches[i].append(now + i * 60.0)
        read_at = now + DAY + 5 * 3600.0   # not midnight UTC, which a day's date would be
        rows = []
        for i, page in enumerate(site):
            lastmod = datetime.fromtimestamp(date_of(page, read_at), tz=timezone.utc)
            rows.append(f"<url><loc>http://example.com/p{i}</loc>"
                        f"<lastmod>{lastmod.strftime(lastmod_format)}</lastmod></url>")
        body = ('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                + "".join(rows) + "</urlset>").encode()
        parsed = parse_sitemap(body, "http://example.com/sitemap.xml")
        assert not parsed.errors
        for i, entry in enumerate(parsed.entries):
            t0, t1 = fetches[i][-2], fetches[i][-1]
            trust.observe(previous_fetch=t0, fetch=t1, changed=site[i].changed(t0, t1),
                          published=entry.lastmod, read_at=read_at)
    return trust


def test_honest_source_is_trusted() -> None:
    trust = run_source(lambda page, at: page.last_change(at), random.Random(1))
    verdict = trust.verdict()
    assert verdict.trusted, verdict.reason
    assert verdict.bad == 0 and verdict.judged >= 20 and verdict.changes > 0


def test_frozen_dates_are_distrusted_even_when_pages_rarely_change() -> None:
    # lastmod never moves: it "agrees" with every no-change interval, misses every change.
    trust = run_source(lambda page, at: page.changes[0] - DAY, random.Random(2))
    verdict = trust.verdict()
    assert not verdict.trusted
    assert verdict.missed > 0 and verdict.missed == verdict.changes


def test_dates_stamped_at_generation_are_distrusted() -> None:
    trust = run_source(lambda page, at: at, random.Random(3))
    verdict = trust.verdict()
    assert not verdict.trusted and verdict.bad == verdict.judged
    assert "disagree" in verdict.reason


def test_dates_that_move_without_content_change_are_distrusted() -> None:
    # A generator that bumps lastmod to a recent time at every rebuild.
    trust = run_source(lambda page, at: at - 0.5 * DAY - 3600, random.Random(4))
    assert not trust.trusted


def _agree(trust: PublishedDateTrust, rounds: int) -> None:
    """``rounds`` agreeing intervals of 10 s, every other one with a change dated inside."""
    for k in range(rounds):
        changed = k % 2 == 0
        trust.observe(previous_fetch=k * 10.0, fetch=k * 10.0 + 10, changed=changed,
                      published=k * 10.0 + 5 if changed else 1.0, read_at=1000.0)


def test_future_dates_distrust_at_once_and_trust_comes_back() -> None:
    trust = PublishedDateTrust(window=10, min_observations=3)
    _agree(trust, 5)
    assert trust.trusted
    assert trust.observe_listing(5000.0, read_at=1000.0) is Outcome.FUTURE
    assert trust.observe_listing(900.0, read_at=1000.0) is None
    assert not trust.trusted and "future" in trust.verdict().reason
    _agree(trust, 10)
    assert trust.trusted


def test_unchanged_pages_alone_do_not_earn_trust() -> None:
    # A date that never moves agrees with every unchanged page: trust needs a dated change.
    trust = PublishedDateTrust(window=10, min_observations=3)
    for k in range(8):
        trust.observe(previous_fetch=k * 10.0, fetch=k * 10.0 + 10, changed=False,
                      published=1.0, read_at=1000.0)
    assert not trust.trusted and "no content change dated" in trust.verdict().reason
    trust.observe(previous_fetch=100.0, fetch=110.0, changed=True, published=105.0,
                  read_at=1000.0)
    assert trust.trusted


def test_noisy_but_mostly_honest_source() -> None:
    def run(lie_share: float, seed: int) -> bool:
        rng = random.Random(seed)

        def date_of(page: Page, at: float) -> float:
            if rng.random() >= lie_share:
                return page.last_change(at)
            # A lie flips the truth about the last fetch interval (about at-4d .. at-1d).
            return at - 10 * DAY if page.changed(at - 4 * DAY, at - DAY) else at - 2.5 * DAY
        return run_source(date_of, rng, pages=25, rounds=4,
                          trust=PublishedDateTrust(window=100)).trusted
    assert run(0.05, 5)
    assert not run(0.6, 6)


def test_trust_needs_evidence_and_ignores_undecidable() -> None:
    trust = PublishedDateTrust(min_observations=3)
    assert not trust.trusted and "0 judged" in trust.verdict().reason
    assert trust.observe(previous_fetch=0.0, fetch=10.0, changed=True, published=None,
                         read_at=20.0) is Outcome.UNDECIDABLE
    for _ in range(2):
        trust.observe(previous_fetch=0.0, fetch=10.0, changed=True, published=5.0,
                      read_at=20.0)
    assert not trust.trusted and trust.verdict().judged == 2
    trust.observe(previous_fetch=0.0, fetch=10.0, changed=True, published=5.0, read_at=20.0)
    assert trust.trusted


def test_settings_are_checked() -> None:
    for bad in ({"window": 0}, {"min_observations": 0}, {"min_observations": 60},
                {"max_disagreement": 1.0}, {"tolerance_s": -1.0}):
        with pytest.raises(ValueError):
            PublishedDateTrust(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PublishedDateTrusts(window=0)
    with pytest.raises(ValueError, match="finite"):
        PublishedDateTrust().observe_listing(float("inf"), 0.0)


def test_one_trust_per_source() -> None:
    trusts = PublishedDateTrusts(min_observations=1)
    assert not trusts.trusted("a.example.com")
    trusts.source("a.example.com").observe(previous_fetch=0.0, fetch=10.0, changed=True,
                                           published=5.0, read_at=20.0)
    trusts.source("b.example.com").observe(previous_fetch=0.0, fetch=10.0, changed=False,
                                           published=5.0, read_at=20.0)
    assert trusts.trusted("a.example.com") and not trusts.trusted("b.example.com")
    assert len(trusts) == 2


def test_change_date() -> None:
    assert change_date(100.0, 200.0, True) == 100.0
    assert change_date(None, 200.0, True) == 200.0
    assert change_date(None, 200.0, False) is None
    assert change_date(None, None, True) is None


def test_publication_kind_dispatches_on_the_root_tag() -> None:
    assert publication_kind("{http://www.sitemaps.org/schemas/sitemap/0.9}urlset") == "sitemap"
    assert publication_kind("sitemapindex") == "sitemap"
    assert publication_kind("rss") == "feed"
    assert publication_kind("{http://www.w3.org/2005/Atom}feed") == "feed"
    assert publication_kind("{http://www.w3.org/1999/02/22-rdf-syntax-ns#}RDF") == "feed"
    assert publication_kind("{http://example.com/other}feed") is None
    assert publication_kind("html") is None
