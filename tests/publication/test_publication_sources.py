"""Which publication sources a crawl keeps (paper 003 §3, DESIGN.md §6): every source is
re-read at the seeds' level each ``publication.refresh_s``, counted against G, so the sources
must stay a site's own few sitemaps and feeds. Nested sitemap indexes (which sitemaps.org
forbids), a host answering every sitemap with an index of more, and an index listing plain
pages grew them without bound."""

from __future__ import annotations

import logging

import pytest

from xyro.crawl.admission import Source
from xyro.crawl.frontier import DISCOVERY, Frontier
from xyro.crawl.publishing import MAX_SOURCES_PER_HOST, Publication, PublicationChannel

T0 = 1_700_000_000.0
ROOT = "http://a.example/sitemap_index.xml"


def _index(*sitemaps: str) -> Publication:
    return Publication("sitemap", sitemaps=sitemaps)


def test_an_index_listed_by_an_index_is_not_followed(frontier: Frontier,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    channel = PublicationChannel()
    channel.offer(frontier, [ROOT])
    _, listed = channel.read(frontier, ROOT, 0, _index("http://a.example/s1.xml"), T0)
    assert listed is not None and [o.url for o in listed.queued] == ["http://a.example/s1.xml"]
    # s1.xml turns out to be an index in turn: its sitemaps are neither queued nor kept.
    with caplog.at_level(logging.INFO, logger="xyro.crawl.publishing"):
        _, nested = channel.read(frontier, "http://a.example/s1.xml", 1,
                                 _index("http://a.example/s1_0.xml"), T0)
    assert nested is None
    assert "http://a.example/s1_0.xml" not in channel
    assert "http://a.example/s1_0.xml" not in frontier.seen
    assert "is an index listed by a sitemap index" in caplog.text
    # The root index is still followed when read again (its sitemaps are known by now).
    _, again = channel.read(frontier, ROOT, 0, _index("http://a.example/s2.xml"), T0)
    assert again is not None and [o.url for o in again.queued] == ["http://a.example/s2.xml"]
    assert channel.snapshot()["sources"] == 3


def test_a_sitemap_both_announced_and_listed_is_followed_as_an_index(
        frontier: Frontier) -> None:
    # Named by the configuration (or robots.txt) too, it is a root: its index is read.
    channel = PublicationChannel()
    channel.offer(frontier, [ROOT])
    channel.read(frontier, ROOT, 0, _index("http://a.example/news_index.xml"), T0)
    channel.offer(frontier, ["http://a.example/news_index.xml"])
    _, listed = channel.read(frontier, "http://a.example/news_index.xml", 0,
                             _index("http://a.example/news1.xml"), T0)
    assert listed is not None and [o.url for o in listed.queued] == [
        "http://a.example/news1.xml"]


def test_sources_are_bounded_per_host_with_one_warning(frontier: Frontier,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    channel = PublicationChannel()
    channel.offer(frontier, [ROOT])
    many = tuple(f"http://a.example/s{i}.xml" for i in range(MAX_SOURCES_PER_HOST + 500))
    with caplog.at_level(logging.WARNING, logger="xyro.crawl.publishing"):
        _, listed = channel.read(frontier, ROOT, 0, _index(*many), T0)
        _, more = channel.read(frontier, ROOT, 0,
                               _index(*many, "http://a.example/late.xml"), T0)
    assert listed is not None and len(listed.queued) == MAX_SOURCES_PER_HOST - 1
    assert more is not None and not more.queued
    assert channel.snapshot()["sources"] == MAX_SOURCES_PER_HOST
    reread = channel.reread(frontier, T0)
    assert len(reread.queued) + reread.known == MAX_SOURCES_PER_HOST
    # Offers past the bound are not fetched either (sources skip the host budget).
    assert many[-1] not in frontier.seen and "http://a.example/late.xml" not in channel
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "a.example" in warnings[0].getMessage()
    # Other hosts have their own room.
    assert len(channel.offer(frontier, ["http://b.example/sitemap.xml"]).queued) == 1
    assert MAX_SOURCES_PER_HOST == 1_000


def test_a_known_url_an_index_lists_is_a_source_only_once_read_as_one(
        frontier: Frontier) -> None:
    """An index listing pages the crawl knew as plain pages made each a source for good,
    re-read at the seeds' level at every publication refresh. A known URL is now a source
    on trial: its next fetch keeps it if it is read as a sitemap or feed (the sitemaps an
    index lists are known URLs after a restart), and drops it if it answers as a page."""
    page, sitemap = "http://a.example/about.html", "http://a.example/posts.xml"
    frontier.submit(Source.DISCOVERY, [page, sitemap], DISCOVERY)
    channel = PublicationChannel()
    channel.offer(frontier, [ROOT])
    _, listed = channel.read(frontier, ROOT, 0, _index(page, sitemap, "http://a.example/new.xml"),
                             T0)
    assert listed is not None and [o.url for o in listed.queued] == ["http://a.example/new.xml"]
    assert page in channel and sitemap in channel   # on trial: the next re-read fetches them
    channel.read(frontier, sitemap, 1, Publication("sitemap", pages=(("http://a.example/p",
                                                                      None),)), T0)
    for url in (page, sitemap, "http://a.example/new.xml"):
        channel.answered(url, 200)
    assert page not in channel                   # answered as a page: no sitemap, no feed
    assert sitemap in channel and "http://a.example/new.xml" in channel
    channel.answered(sitemap, 200)                # confirmed: stays
    assert sitemap in channel
    # A 304 or an error says nothing of what it is: the trial goes on.
    channel.read(frontier, ROOT, 0, _index(page), T0)
    channel.answered(page, 304)
    channel.answered(page, 503)
    assert page in channel


def test_a_sources_redirect_target_is_a_source_announced_by_the_same_sites(
        frontier: Frontier) -> None:
    # http to https: the target is queued even though known (read once already), and may
    # list the URLs the named sitemap's announcers let it list (sitemaps.org cross submits).
    named, target = "http://cdn.example/a-sitemap.xml", "https://cdn.example/a-sitemap.xml"
    frontier.robots.store("http://a.example", 200, f"Sitemap: {named}\n".encode(), T0)
    channel = PublicationChannel()
    channel.offer_robots(frontier, "http://a.example")
    frontier.submit(Source.DISCOVERY, [target], DISCOVERY)    # seen before
    assert channel.moved(frontier, named, target, 0)
    assert target in channel and target in frontier
    assert channel.announced_by(target) == ("http://a.example/",)
    assert not channel.moved(frontier, named, target, 0)      # a re-read queues it now
    reread = channel.reread(frontier, T0)
    assert len(reread.queued) + reread.known == 2 and channel.snapshot()["sources"] == 2
    # A page that is no source redirects as any page does.
    assert not channel.moved(frontier, "http://a.example/page", "http://a.example/p2", 1)
    assert "http://a.example/p2" not in channel
