"""What a sitemap or feed parser noted is never dropped silently (paper 003 §3): the channel
logs it when it reads the listing, and the listing's page record carries it as an errors row
(:data:`NOTICE_KIND`). The crawl-level proof is test_publication_crawl_notes.py."""

from __future__ import annotations

import logging

import pytest

from metadata import PageType
from xyro.clock import ManualClock
from xyro.content.page import PageOutcome
from xyro.crawl.admission import Admission
from xyro.crawl.frontier import Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.publishing import (MAX_NOTICE_CHARS, NOTICE_KIND, Publication,
                                   PublicationChannel, read_publication)
from xyro.net.robots import RobotsCache
from xyro.net.urls import Scope, TrapGuard
from xyro.publication.feeds import MAX_FEED_ENTRIES

T0 = 1_700_000_000.0
SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
SOURCE = "http://a.example/sitemap.xml"
NOTED = (f'<urlset xmlns="{SM}"><url><loc>http://a.example/p1</loc><lastmod>soon</lastmod>'
         '</url><url><loc>http://b.example/p2</loc></url></urlset>').encode()


def _read(publication: Publication, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    clock = ManualClock(T0)
    frontier = Frontier(HostScheduler(0.0, clock),
                        RobotsCache("XyroBot", clock, ttl_s=3600, unreachable_retry_s=600,
                                    max_crawl_delay_s=30), clock,
                        admission=Admission(Scope(), TrapGuard(clock), frozenset()))
    with caplog.at_level(logging.INFO, logger="xyro.crawl.publishing"):
        PublicationChannel().read(frontier, SOURCE, 0, publication, T0)
    return [r for r in caplog.records if r.name == "xyro.crawl.publishing"]


def test_entry_notes_are_logged_and_carried_to_the_page_record(
        caplog: pytest.LogCaptureFixture) -> None:
    publication = read_publication(NOTED, SOURCE, "sitemap")
    assert publication is not None and publication.pages == (("http://a.example/p1", None),)
    assert publication.errors == 2 and publication.capped_at is None
    [line] = _read(publication, caplog)
    assert line.levelno == logging.INFO and SOURCE in line.getMessage()
    assert "'soon' is not a W3C datetime" in line.getMessage()
    assert "http://b.example/p2 is not on http://a.example/" in line.getMessage()
    outcome = publication.noted(PageOutcome(PageType.XML))
    assert outcome.page_type == PageType.XML and outcome.error_kind == NOTICE_KIND
    assert outcome.error_detail is not None and "sitemap parser notes (2)" in outcome.error_detail


def test_an_outcome_with_an_error_or_a_listing_without_notes_is_left_alone() -> None:
    publication = read_publication(NOTED, SOURCE, "sitemap")
    assert publication is not None
    failed = PageOutcome(PageType.ERROR, error_kind="parse", error_detail="broken")
    assert publication.noted(failed) is failed
    clean = Publication("sitemap", pages=(("http://a.example/p1", None),))
    plain = PageOutcome(PageType.XML)
    assert clean.notice() is None and clean.noted(plain) is plain


def test_a_notice_is_bounded_and_says_what_the_cap_cut_first() -> None:
    notes = tuple(f"line {i}: <loc> 'x' is not an http(s) URL; entry skipped"
                  for i in range(100)) + ("more than 3 entries; the rest are ignored",)
    publication = Publication("sitemap", pages=(("http://a.example/p", None),) * 2,
                              notes=notes, capped_at=3)
    notice = publication.notice()
    assert notice is not None and len(notice) == MAX_NOTICE_CHARS and notice.endswith("...")
    assert notice.startswith("sitemap lists more than 3 entries: 2 kept from the first 3 "
                             "read (the limit)")


def test_a_feed_over_its_entry_cap_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    items = "".join(f"<item><link>http://a.example/n{i}</link></item>"
                    for i in range(MAX_FEED_ENTRIES + 1))
    body = f'<rss version="2.0"><channel>{items}</channel></rss>'.encode()
    publication = read_publication(body, "http://a.example/feed.xml", "feed")
    assert publication is not None and publication.capped_at == MAX_FEED_ENTRIES
    assert publication.kept == MAX_FEED_ENTRIES
    [line] = _read(publication, caplog)
    assert line.levelno == logging.WARNING
    assert f"lists more than {MAX_FEED_ENTRIES} entries: {MAX_FEED_ENTRIES} kept" in (
        line.getMessage())
