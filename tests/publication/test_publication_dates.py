"""Listed dates become change dates only while their source's dates agree with signatures."""

from __future__ import annotations

import random

import pytest

from xyro.publication.published import PublishedDates

DAY = 86400.0


def _history(rng: random.Random, rate_per_day: float, until: float) -> list[float]:
    """Change times of a Poisson page on [0, until)."""
    t, out = 0.0, []
    while True:
        t += rng.expovariate(rate_per_day / DAY)
        if t >= until:
            return out
        out.append(t)


def _last_change(changes: list[float], t: float) -> float:
    return max((c for c in changes if c <= t), default=0.0)


def _crawl(dates: PublishedDates, honest: bool, seed: int) -> list[float | None]:
    """20 pages of one host; each day the sitemap is read, then every page is fetched."""
    rng = random.Random(seed)
    pages = {f"http://{'h' if honest else 'l'}.example/{i}": _history(rng, 0.5, 40 * DAY)
             for i in range(20)}
    source = "h.example" if honest else "l.example"
    answers: list[float | None] = []
    previous: dict[str, float] = {}
    for day in range(1, 40):
        read_at = day * DAY + 7 * 3600.0   # not midnight UTC, which a day's date would be
        listing = [(url, _last_change(ch, read_at) if honest else read_at)
                   for url, ch in pages.items()]
        dates.listed(source, listing, read_at)
        fetch = read_at + 3600.0
        for url, changes in pages.items():
            before = previous.get(url)
            changed = None if before is None else (
                _last_change(changes, fetch) > before)
            answers.append(dates.change_date(url, before, fetch, changed, None))
            previous[url] = fetch
    return answers


def test_an_honest_source_is_trusted_and_its_dates_become_change_dates() -> None:
    dates = PublishedDates()
    answers = _crawl(dates, honest=True, seed=1)
    assert dates.verdict("h.example").trusted, dates.verdict("h.example")
    assert sum(a is not None for a in answers[-20:]) == 20
    assert dates.counts()["agree"] > 100


def test_a_source_stamping_the_generation_time_is_never_trusted() -> None:
    dates = PublishedDates()
    answers = _crawl(dates, honest=False, seed=2)
    verdict = dates.verdict("l.example")
    assert not verdict.trusted and "disagree" in verdict.reason
    assert all(a is None for a in answers)
    assert dates.counts()["stamped"] > 100


def test_the_servers_own_last_modified_wins() -> None:
    dates = PublishedDates()
    dates.listed("a.example", [("http://a.example/x", 5_000.0)], read_at=10_000.0)
    assert dates.change_date("http://a.example/x", None, 20_000.0, None, 4_000.0) == 4_000.0
    assert dates.change_date("http://a.example/unlisted", 1.0, 2.0, True, None) is None


def test_future_dates_are_held_against_the_source_and_memory_is_bounded() -> None:
    dates = PublishedDates(max_urls=10)
    kept = dates.listed("f.example", [(f"http://f.example/{i}", 1e12 if i == 0 else 10.0 * i)
                                      for i in range(50)], read_at=1_000.0)
    assert kept == 49 and dates.counts()["listed_urls"] == 10
    assert dates.counts()["future"] == 1
    assert "future" in dates.verdict("f.example").reason
    with pytest.raises(ValueError, match="max_urls"):
        PublishedDates(max_urls=0)


def test_an_interval_undecided_at_its_fetch_is_judged_at_the_next_listing() -> None:
    # Listed at 500 with date 100; the page changed in (400, 600]: when fetched at 600 the
    # change may lie after the read, so undecidable. Listed again at 700, still dated 100:
    # the date missed a change it had time to show.
    url = "http://a.example/p"
    frozen = PublishedDates()
    frozen.listed("feed", [(url, 100.0)], 500.0)
    frozen.change_date(url, 400.0, 600.0, True, None)
    assert frozen.counts() == {"listed_urls": 1, "undecidable": 1}
    frozen.listed("feed", [(url, 100.0)], 700.0)
    assert frozen.counts()["missed"] == 1 and frozen.verdict("feed").missed == 1
    frozen.listed("feed", [(url, 100.0)], 800.0)  # judged once, not again
    assert frozen.counts()["missed"] == 1
    honest = PublishedDates()
    honest.listed("map", [(url, 100.0)], 500.0)
    honest.change_date(url, 400.0, 600.0, True, None)
    honest.listed("map", [(url, 550.0)], 700.0)  # the change, dated inside the interval
    assert honest.counts()["agree"] == 1 and "missed" not in honest.counts()
    # A listing read before the fetch decides nothing yet.
    early = PublishedDates()
    early.listed("map", [(url, 100.0)], 500.0)
    early.change_date(url, 400.0, 600.0, True, None)
    early.listed("map", [(url, 100.0)], 590.0)
    assert "missed" not in early.counts()
