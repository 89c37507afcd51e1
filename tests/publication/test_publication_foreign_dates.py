"""A listing dates only its own site's pages (paper 003 §3, DESIGN.md §6): a feed on another
site (a planet, an aggregator) lists a page with the date it aggregated it, not the date the
page changed. Such a feed replaced the listing of the page's own honest, trusted sitemap,
and once trusted on its own pages its date became the page's recorded change date. The pages
it lists are still found (discovery); only their dates are refused."""

from __future__ import annotations

from xyro.crawl.frontier import Frontier
from xyro.crawl.publishing import Publication, PublicationChannel
from xyro.publication.published import PublishedDates
from xyro.publication.trust import PublishedDateTrusts

T0 = 1_700_000_000.0
SITEMAP = "http://victim.example/sitemap.xml"
FEED = "http://planet.example/planet.rss"
PAGE = "http://victim.example/post"


def _trusted(channel: PublicationChannel, source: str, site: str) -> None:
    """``source`` earns trust on five pages of ``site`` (two changes dated inside the fetch
    interval, three pages unchanged since before it)."""
    pages = [f"{site}/o{i}" for i in range(5)]
    channel.dates.listed(source, [(u, 400.0 if i <= 1 else 100.0)
                                  for i, u in enumerate(pages)], 500.0)
    for i, url in enumerate(pages):
        channel.change_date(url, 200.0, 600.0, i <= 1, None)
    assert channel.dates.verdict(source).trusted


def _channel() -> PublicationChannel:
    return PublicationChannel(PublishedDates(PublishedDateTrusts(min_observations=5)))


def test_a_foreign_feed_keeps_the_pages_own_sitemap_date(frontier: Frontier) -> None:
    channel = _channel()
    _trusted(channel, SITEMAP, "http://victim.example")
    channel.read(frontier, SITEMAP, 0, Publication("sitemap", ((PAGE, 9_000.0),)), 9_500.0)
    new = "http://victim.example/new"
    pages, _ = channel.read(frontier, FEED, 0,
                            Publication("feed", ((PAGE, 9_550.0), (new, 9_550.0))), 9_600.0)
    assert [o.url for o in pages.queued] == [new]        # found all the same
    listing = channel.dates.listing(PAGE)
    assert listing is not None and (listing.source, listing.published) == (SITEMAP, 9_000.0)
    # The old code recorded no change date here (the feed's listing, untrusted, replaced it).
    assert channel.change_date(PAGE, None, 10_000.0, None, None) == 9_000.0
    assert channel.dates.listing(new) is None


def test_a_trusted_foreign_feed_never_dates_another_sites_page(frontier: Frontier) -> None:
    channel = _channel()
    _trusted(channel, FEED, "http://planet.example")
    channel.read(frontier, FEED, 0, Publication("feed", ((PAGE, 1_000.0),
                                                         ("http://planet.example/own",
                                                          9_000.0))), 9_500.0)
    assert channel.dates.listing(PAGE) is None
    assert channel.change_date(PAGE, None, 10_000.0, None, None) is None   # old: 1000.0
    assert channel.dates.listing("http://planet.example/own") is not None


def test_a_cross_submitted_sitemap_dates_the_announcers_pages_but_not_over_its_own(
        frontier: Frontier) -> None:
    """sitemaps.org cross submits: victim.example's robots.txt names a sitemap kept on
    cdn.example, whose dates of victim.example's pages count; the sitemap on victim.example
    itself still wins."""
    channel = _channel()
    cross = "http://cdn.example/victim-sitemap.xml"
    frontier.robots.store("http://victim.example", 200, f"Sitemap: {cross}\n".encode(), T0)
    channel.offer_robots(frontier, "http://victim.example")
    channel.read(frontier, cross, 0, Publication("sitemap", ((PAGE, 8_000.0),)), 8_500.0)
    assert channel.dates.listing(PAGE).source == cross
    channel.read(frontier, SITEMAP, 0, Publication("sitemap", ((PAGE, 9_000.0),)), 9_500.0)
    channel.read(frontier, cross, 0, Publication("sitemap", ((PAGE, 9_100.0),)), 9_600.0)
    listing = channel.dates.listing(PAGE)
    assert listing is not None and (listing.source, listing.published) == (SITEMAP, 9_000.0)
    # A feed on cdn.example was announced by no one: no date of victim.example's pages.
    channel.read(frontier, "http://cdn.example/feed", 0,
                 Publication("feed", (("http://victim.example/other", 9_000.0),)), 9_700.0)
    assert channel.dates.listing("http://victim.example/other") is None


def test_published_dates_keep_the_own_origins_listing() -> None:
    dates = PublishedDates()
    dates.listed(FEED, [(PAGE, 100.0)], 500.0)           # a foreign one first: kept for now
    dates.listed(SITEMAP, [(PAGE, 200.0)], 600.0)        # the page's own replaces it
    dates.listed(FEED, [(PAGE, 300.0)], 700.0)           # and is never replaced by a foreign one
    listing = dates.listing(PAGE)
    assert listing is not None and (listing.source, listing.published, listing.own) == (
        SITEMAP, 200.0, True)
    dates.listed("http://victim.example/feed.atom", [(PAGE, 400.0)], 800.0)   # own: replaces
    assert dates.listing(PAGE).published == 400.0
