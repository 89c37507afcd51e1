"""Sitemaps and feeds wired into the crawl (paper 003 §3, DESIGN.md §2, §6): sources from
robots.txt and the config enter the frontier, bodies are recognised in the worker, listed
pages and dates go on, and a trusted listed date becomes the observation's change date."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata.crawl_queries import NEVER_FETCHED, prior_fetch
from xyro.clock import ManualClock
from xyro.config_load import ConfigError, load_config
from xyro.content.page import PageOutcome
from xyro.crawl.admission import Admission, Source
from xyro.crawl.frontier import DISCOVERY, URGENT, Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.publication.published import PublishedDates
from xyro.publication.trust import PublishedDateTrusts
from xyro.crawl.publishing import (PublicationChannel, publication_of, read_publication,
                                   sniff_publication)
from xyro.net.robots import RobotsCache
from xyro.net.urls import Scope, TrapGuard
from xyro.records import FetchResult

T0 = 1_700_000_000.0
SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
URLSET = (f'<?xml version="1.0"?>\n<!-- generated -->\n<urlset xmlns="{SM}">'
          '<url><loc>http://a.example/p1</loc><lastmod>2023-11-01T00:00:00Z</lastmod></url>'
          '<url><loc>http://a.example/p2</loc></url></urlset>').encode()
INDEX = (f'<sitemapindex xmlns="{SM}"><sitemap><loc>http://a.example/s2.xml</loc></sitemap>'
         '</sitemapindex>').encode()
RSS = (b'<?xml version="1.0"?><rss version="2.0"><channel><item><link>http://a.example/n1'
       b'</link><pubDate>Wed, 01 Nov 2023 00:00:00 GMT</pubDate></item></channel></rss>')
ATOM = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="/e1"/>'
        b'<updated>2023-11-01T00:00:00Z</updated></entry></feed>')
RDF = (b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
       b'xmlns="http://purl.org/rss/1.0/"><item rdf:about="http://a.example/r1"/></rdf:RDF>')


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def _frontier(clock: ManualClock, scope: Scope | None = None) -> Frontier:
    admission = Admission(scope or Scope(), TrapGuard(clock), frozenset({".gz", ".jpg"}))
    return Frontier(HostScheduler(0.0, clock),
                    RobotsCache("XyroBot", clock, ttl_s=3600, unreachable_retry_s=600,
                                max_crawl_delay_s=30), clock, admission=admission)


# -- the worker-side recognition --------------------------------------------------------------

@pytest.mark.parametrize("body, kind", [
    (URLSET, "sitemap"), (INDEX, "sitemap"), (RSS, "feed"), (ATOM, "feed"), (RDF, "feed"),
    (b"\xef\xbb\xbf<!DOCTYPE x [<!ENTITY a 'b'>]>\n<urlset/>", "sitemap"),
    (b"<html><body>urlset</body></html>", None), (b'<?xml version="1.0"?><catalog/>', None),
    (b"http://a.example/p1\n", None), (b"", None),
])
def test_sniff_looks_at_the_first_element_only(body: bytes, kind: str | None) -> None:
    assert sniff_publication(body) == kind


@pytest.mark.parametrize("body, kind", [
    (b"<?xml version='1.0'?>" + b" \n" * 400 + b"<!-- " + b"x" * 2000 + b" -->", None),
    (b" " * 1100 + b"<rss/>", None),  # the first element lies past the sniffed bytes
    (b"<!DOCTYPE rss SYSTEM 'r.dtd'>\n<!-- c --><?pi x?>\t<rss/>", "feed"),
    (b"<!DOCTYPE feed [<!ENTITY a 'b'>\n<!ENTITY c 'd'>]>  <atom:feed xmlns:atom='x'/>",
     "feed"),
    (b"<!-- never closed", None), (b"<!DOCTYPE x [ <!ENTITY a 'b'>", None),
])
def test_sniff_is_linear_and_reads_the_prolog(body: bytes, kind: str | None) -> None:
    # 800 blanks then a comment running past the sniffed bytes: the regular expression this
    # replaced backtracked exponentially (20 blanks took 5 s, holding the GIL)
    started = time.perf_counter()
    assert sniff_publication(body) == kind
    assert time.perf_counter() - started < 2.0  # the old one: hours


def test_read_publication_gives_pages_dates_and_index_entries() -> None:
    urlset = read_publication(URLSET, "http://a.example/sitemap.xml", "sitemap")
    assert urlset is not None and urlset.sitemaps == ()
    assert urlset.pages == (("http://a.example/p1", 1698796800.0), ("http://a.example/p2", None))
    index = read_publication(INDEX, "http://a.example/sitemap.xml", "sitemap")
    assert index is not None and index.sitemaps == ("http://a.example/s2.xml",)
    atom = read_publication(ATOM, "http://a.example/feed", "feed")
    assert atom is not None and atom.pages == (("http://a.example/e1", 1698796800.0),)
    # A root the sniff took for a feed but in no feed namespace: not a publication.
    assert read_publication(b'<feed xmlns="urn:other"/>', "http://a.example/f", "feed") is None


def test_the_worker_parses_xml_bodies_that_are_publications() -> None:
    def done(body: bytes, page_type: PageType = PageType.XML, not_modified: bool = False):
        result = FetchResult("http://a.example/sitemap.xml", "http://a.example/sitemap.xml",
                             200, body=body, not_modified=not_modified)
        return publication_of(_item().url, result, PageOutcome(page_type))

    assert done(URLSET) is not None and done(URLSET).kind == "sitemap"
    assert done(RSS) is not None and done(RSS).kind == "feed"
    assert done(b"<catalog/>") is None
    assert done(URLSET, PageType.HTML) is None          # only what the crawl took for XML
    assert done(b"", not_modified=True) is None         # a 304 has no body to read


def _item():
    from xyro.crawl.frontier_queues import FrontierItem
    return FrontierItem("http://a.example/sitemap.xml", URGENT, 2, "a.example",
                        "http://a.example")


# -- sources into the frontier ------------------------------------------------------------

def test_robots_sitemap_lines_enter_as_publication_sources(clock: ManualClock) -> None:
    frontier = _frontier(clock)
    channel = PublicationChannel()
    frontier.robots.store("http://a.example", 200,
                          b"User-agent: *\nDisallow:\nSitemap: http://a.example/sitemap.xml\n"
                          b"Sitemap: http://a.example/news.xml.gz\n", T0)
    sub = channel.offer_robots(frontier, "http://a.example")
    assert sub.source is Source.PUBLICATION
    # The suffix list does not apply to sitemaps (.gz), and they come at the seeds' level.
    assert {(o.url, o.priority, o.depth) for o in sub.queued} == {
        ("http://a.example/sitemap.xml", URGENT, 0), ("http://a.example/news.xml.gz", URGENT, 0)}
    assert "http://a.example/sitemap.xml" in channel
    # Read again (robots.txt refetched): the seen-set skips them.
    assert channel.offer_robots(frontier, "http://a.example").known == 2


def test_a_sitemap_announced_by_robots_txt_may_list_that_sites_urls(
        clock: ManualClock) -> None:
    """sitemaps.org cross submits: a.example's robots.txt names a sitemap kept on
    b.example, which lists a.example's pages; an unannounced one may not."""
    frontier = _frontier(clock)
    channel = PublicationChannel()
    frontier.robots.store("http://a.example", 200,
                          b"User-agent: *\nSitemap: http://b.example/a-sitemap.xml\n", T0)
    channel.offer_robots(frontier, "http://a.example")
    listing = (f'<urlset xmlns="{SM}"><url><loc>http://a.example/p1</loc></url>'
               '<url><loc>http://c.example/p2</loc></url></urlset>').encode()
    announced = channel.announced_by("http://b.example/a-sitemap.xml")
    assert announced == ("http://a.example/",)
    read = read_publication(listing, "http://b.example/a-sitemap.xml", "sitemap", announced)
    assert read is not None and read.pages == (("http://a.example/p1", None),)
    assert read.errors == 1  # c.example is neither b.example nor an announcer
    plain = read_publication(listing, "http://b.example/other.xml", "sitemap",
                             channel.announced_by("http://b.example/other.xml"))
    assert plain is not None and plain.pages == ()


def test_sources_outside_the_scope_are_refused_and_not_remembered(clock: ManualClock) -> None:
    frontier = _frontier(clock, Scope(denied_domains=["b.example"]))
    channel = PublicationChannel()
    sub = channel.offer(frontier, ["http://b.example/sitemap.xml", "http://a.example/s.xml"])
    assert [o.url for o, _ in sub.refused] == ["http://b.example/sitemap.xml"]
    assert "http://b.example/sitemap.xml" not in channel
    assert "http://a.example/s.xml" in channel


def test_reread_queues_known_sources_again_from_now(clock: ManualClock) -> None:
    frontier = _frontier(clock)
    channel = PublicationChannel()
    channel.offer(frontier, ["http://a.example/sitemap.xml"])
    item = frontier.pop(T0)
    assert item is not None and item.kind == "robots"
    frontier.robots.store(item.origin, 404, None, T0)
    frontier.done(item, now=T0)
    item = frontier.pop(T0)
    assert item is not None and item.url == "http://a.example/sitemap.xml"
    frontier.done(item, now=T0)
    frontier.complete(item, FetchRecord(item.url, T0, PageType.XML))
    assert len(frontier) == 0
    # Known to the seen-set: offered again it is skipped; the schedule's re-read queues it.
    assert channel.offer(frontier, [item.url]).known == 1 and len(frontier) == 0
    clock.advance(86400.0)
    sub = channel.reread(frontier, clock.now())
    assert [(o.url, o.priority) for o in sub.queued] == [(item.url, URGENT)]
    assert item.url in frontier


def test_a_read_sitemap_queues_its_pages_and_lists_their_dates(clock: ManualClock) -> None:
    frontier = _frontier(clock)
    channel = PublicationChannel()
    urlset = read_publication(URLSET, "http://a.example/sitemap.xml", "sitemap")
    index = read_publication(INDEX, "http://a.example/sitemap.xml", "sitemap")
    assert urlset is not None and index is not None
    pages, none = channel.read(frontier, "a.example", 2, urlset, T0)
    assert none is None and pages.source is Source.SITEMAP
    assert {(o.url, o.priority, o.depth) for o in pages.queued} == {
        ("http://a.example/p1", DISCOVERY, 3), ("http://a.example/p2", DISCOVERY, 3)}
    assert channel.dates.counts()["listed_urls"] == 1   # p2 had no date
    _, sitemaps = channel.read(frontier, "a.example", 0, index, T0)
    assert sitemaps is not None and [o.url for o in sitemaps.queued] == [
        "http://a.example/s2.xml"]
    assert "http://a.example/s2.xml" in channel
    assert channel.snapshot() == {"sources": 1, "read": 2, "listed_urls": 1,
                                  "trusted_sources": 0}


# -- dates to the estimator ------------------------------------------------------------------

def _trusted_channel(url: str, published: float, now: float) -> PublicationChannel:
    """A channel whose source a.example is trusted (5 agreeing intervals, two of them with a
    change dated inside) and lists ``url``."""
    channel = PublicationChannel(PublishedDates(PublishedDateTrusts(min_observations=5)))
    others = [f"http://a.example/o{i}" for i in range(5)]
    channel.dates.listed("a.example", [(u, 100.0 if i > 1 else 400.0)
                                       for i, u in enumerate(others)], 500.0)
    for i, u in enumerate(others):  # changed at 400 (two pages) or before 200: AGREE
        channel.change_date(u, 200.0, 600.0, i <= 1, None)
    assert channel.dates.trusted_sources() == 1
    channel.dates.listed("a.example", [(url, published)], now - 10.0)
    return channel


def test_a_trusted_listed_date_replaces_a_stamped_last_modified() -> None:
    url, now = "http://a.example/page", 10_000.0
    channel = _trusted_channel(url, 9_000.0, now)
    # The server's Last-Modified is the time of the response: not a change date.
    assert channel.change_date(url, 8_000.0, now, True, now - 1.0) == 9_000.0
    # A genuine Last-Modified of the server wins.
    assert channel.change_date(url, 8_000.0, now, True, 8_500.0) == 8_500.0
    # Unlisted pages keep whatever the server said.
    assert channel.change_date("http://a.example/x", 1.0, now, True, now) == now
    assert channel.change_date("http://a.example/x", 1.0, now, True, None) is None


def test_an_untrusted_listing_leaves_the_server_date() -> None:
    channel = PublicationChannel()
    channel.dates.listed("a.example", [("http://a.example/p", 9_000.0)], 9_990.0)
    assert channel.change_date("http://a.example/p", 8_000.0, 10_000.0, True, 9_999.0) == 9_999.0
    assert channel.change_date("http://a.example/p", 8_000.0, 10_000.0, True, None) is None


def test_a_first_fetch_takes_a_listed_date_only_from_a_trusted_source() -> None:
    # A feed that stamps every entry with one old date, not yet judged: recorded, it would
    # make the page look unchanged for a year after a single read.
    url, now = "http://a.example/p", 10_000.0
    channel = PublicationChannel()
    channel.dates.listed("a.example", [(url, 1_000.0)], now - 10.0)
    assert channel.change_date(url, None, now, None, now - 1.0) == now - 1.0
    assert channel.change_date(url, None, now, None, None) is None
    trusted = _trusted_channel(url, 9_000.0, now)
    assert trusted.change_date(url, None, now, None, now - 1.0) == 9_000.0


def test_prior_fetch_reads_access_time_and_signature(tmp_path: Path) -> None:
    url = "http://a.example/p"
    with MetadataStore.open(tmp_path / "x.db") as store:
        with store.writer(now=lambda: T0) as writer:
            writer.submit(FetchRecord(url, T0, PageType.HTML, 200, signature=b"s" * 16,
                                      etag='"e"', last_modified=T0 - 5))
        conn = store.read_connection()
        try:
            prior = prior_fetch(conn, url)
            assert prior.last_access == T0 and prior.signature == b"s" * 16
            assert (prior.etag, prior.last_modified, prior.page_type) == ('"e"', T0 - 5,
                                                                         PageType.HTML)
            assert prior_fetch(conn, "http://a.example/never") == NEVER_FETCHED
        finally:
            conn.close()


# -- configuration -----------------------------------------------------------------------------

def test_publication_config_keys() -> None:
    cfg = load_config(None, {}, ["publication.refresh_s=3600", "publication.trust_window=10",
                                 "publication.trust_min_observations=3"])
    assert cfg.publication.refresh_s == 3600.0 and cfg.publication.trust_window == 10
    assert load_config(None, {}).publication.refresh_s == 86400.0
    for bad in ("publication.refresh_s=0", "publication.trust_max_disagreement=1",
                "publication.trust_tolerance_s=-1", "publication.trust_min_observations=99"):
        with pytest.raises(ConfigError, match="publication"):
            load_config(None, {}, [bad])


def test_a_source_gone_for_good_is_no_longer_reread(clock: ManualClock) -> None:
    # A robots.txt ``Sitemap:`` line naming no real file: marked dead by the store after
    # three 404s, it was still queued at every re-read.
    frontier = _frontier(clock)
    channel = PublicationChannel(dead_after=3)
    gone, moving = "http://a.example/missing.xml", "http://a.example/s.xml"
    channel.offer(frontier, [gone, moving])
    for status in (404, 410, 200, 404, 404):   # a success starts the count again
        channel.answered(gone, status)
        channel.answered(moving, 404 if status == 200 else 200)
    assert gone in channel and moving in channel
    channel.answered(gone, 404)
    assert gone not in channel and moving in channel
    channel.answered(gone, 200)                 # no longer a source: nothing to count
    assert gone not in channel
    reread = channel.reread(frontier, T0)
    assert len(reread.queued) + reread.known == 1
    assert gone not in {o.url for o in reread.queued}
