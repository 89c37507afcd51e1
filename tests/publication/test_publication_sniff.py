"""A fetched body recognised as a sitemap or a feed (paper 003 §3, DESIGN.md §2): whatever
its media type says (a feed served as text/html), in UTF-16 as in UTF-8 (by its BOM, as the
parsers read it), and cheaply however hostile its prolog (the sniff runs in a fetch worker,
under the GIL every other thread needs). Bounds on CPU use time.process_time()."""

from __future__ import annotations

import time

import pytest

from metadata import PageType
from xyro.content.page import analyse
from xyro.crawl.publishing import MAX_PROLOG_BYTES, publication_of, sniff_publication
from xyro.records import FetchResult

SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
ATOM = ('<?xml version="1.0" encoding="utf-16"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
        '<entry><link href="/e1"/><updated>2023-11-01T00:00:00Z</updated></entry></feed>')
URLSET = (f'<urlset xmlns="{SM}"><url><loc>http://a.example/p1</loc></url>'
          '<url><loc>http://a.example/p2</loc></url></urlset>')
RSS = ('<rss version="2.0"><channel><title>news</title>'
       '<item><link>http://a.example/story1.html</link></item>'
       '<item><link>http://a.example/story2.html</link></item></channel></rss>')
RDF = ('<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
       'xmlns="http://purl.org/rss/1.0/"><item rdf:about="http://a.example/r1"/></rdf:RDF>')


def _read(body: bytes, content_type: str, url: str = "http://a.example/listing"):
    """What the fetch worker makes of ``body``: the page's analysis, then its publication."""
    result = FetchResult(url, url, 200, headers={"content-type": content_type}, body=body,
                         content_type=content_type.split(";")[0])
    outcome = analyse(result, None, follow_nofollow=False, max_url_length=2048)
    return outcome.page_type, publication_of(url, result, outcome)


# -- a feed or a sitemap served as text/html ---------------------------------------------------

@pytest.mark.parametrize("body, pages", [
    (RSS, ("http://a.example/story1.html", "http://a.example/story2.html")),
    ("\n<!-- generated -->\n" + RSS, ("http://a.example/story1.html",
                                      "http://a.example/story2.html")),
    ('<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" '
     '"http://my.netscape.com/publish/formats/rss-0.91.dtd">\n' + RSS,
     ("http://a.example/story1.html", "http://a.example/story2.html")),
    (RDF, ("http://a.example/r1",)),
    (URLSET, ("http://a.example/p1", "http://a.example/p2")),
])
def test_a_publication_without_xml_declaration_served_as_html_is_read(
        body: str, pages: tuple[str, ...]) -> None:
    page_type, publication = _read(body.encode(), "text/html; charset=utf-8")
    assert page_type is PageType.XML
    assert publication is not None and tuple(u for u, _ in publication.pages) == pages


@pytest.mark.parametrize("body", [
    b"<html><body><a href='/rss'>rss</a></body></html>", b"<div>feed</div>",
    b"<!DOCTYPE html><html><body>urlset</body></html>", b"<body><rss/></body>",
])
def test_html_pages_served_as_html_stay_html(body: bytes) -> None:
    assert _read(body, "text/html") == (PageType.HTML, None)


# -- UTF-16 and UTF-32, by the BOM -------------------------------------------------------------

@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_feed_and_sitemap_are_read(codec: str) -> None:
    bom = "" if codec == "utf-16" else "\ufeff"  # Python's "utf-16" writes one itself
    page_type, feed = _read((bom + ATOM).encode(codec), "application/atom+xml")
    assert page_type is PageType.XML and feed is not None
    assert feed.kind == "feed" and feed.pages == (("http://a.example/e1", 1698796800.0),)
    page_type, sitemap = _read((bom + URLSET).encode(codec), "application/xml")
    assert page_type is PageType.XML and sitemap is not None and sitemap.kind == "sitemap"
    assert [u for u, _ in sitemap.pages] == ["http://a.example/p1", "http://a.example/p2"]


@pytest.mark.parametrize("body, kind", [
    ("\ufeff<!-- c -->\n<rss/>".encode("utf-16-le"), "feed"),
    ("\ufeff<?xml version='1.0'?><sitemapindex/>".encode("utf-16-be"), "sitemap"),
    ("\ufeff  <urlset/>".encode("utf-32-le"), "sitemap"),
    ("\ufeff<rdf:RDF/>".encode("utf-32-be"), "feed"),
    ("\ufeff<catalog/>".encode("utf-16-le"), None),
    ("<rss/>".encode("utf-16-le"), None),  # no BOM: not a prolog an XML parser reads so
])
def test_the_sniff_reads_the_bom(body: bytes, kind: str | None) -> None:
    assert sniff_publication(body) == kind


# -- the prolog's cost -------------------------------------------------------------------------

@pytest.mark.parametrize("body, kind", [
    # 20 MB of blanks (20 KB of gzip on the wire): the byte-by-byte loop took ~3 s of CPU.
    (b" " * 20_000_000 + f'<urlset xmlns="{SM}"/>'.encode(), None),
    # Millions of tiny parts, then unclosed ones: each read once.
    (b"<??>" * 1_000_000 + b"<rss/>", None),
    (b" <!---->" * 500_000 + b"<feed/>", None),
    (b"<!DOCTYPE a>" * 300_000 + b"<rss/>", None),
    (b"<!--" + b"-" * 20_000_000, None),
    (b"<!DOCTYPE a [" + b"<!ENTITY x 'y'>" * 1_000_000, None),
    # Within the cap, however the prolog is made, the root is found.
    (b" " * (MAX_PROLOG_BYTES - 64) + b"<urlset/>", "sitemap"),
    (b"<?xml version='1.0'?>" + b"<!-- x -->\n" * 80_000 + b"<rss/>", "feed"),
])
def test_the_sniff_reads_at_most_the_capped_prolog_in_linear_time(
        body: bytes, kind: str | None) -> None:
    started = time.process_time()
    assert sniff_publication(body) == kind
    assert time.process_time() - started < 0.5


def test_a_root_past_the_cap_or_cut_by_it_is_no_publication() -> None:
    assert sniff_publication(b" " * MAX_PROLOG_BYTES + b"<urlset/>") is None
    # "<rss" ends exactly at the cap: the name may go on past it ("<rssx").
    assert sniff_publication(b" " * (MAX_PROLOG_BYTES - 4) + b"<rss/>") is None
    assert sniff_publication(b" " * (MAX_PROLOG_BYTES - 5) + b"<rss/>") == "feed"
