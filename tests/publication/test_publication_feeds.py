"""Feeds: RSS 2.0, RSS 1.0 (RDF), Atom with xml:base, bad dates, hostile XML."""

from __future__ import annotations

import gzip
import zlib
from calendar import timegm

import pytest

from xyro.publication.feeds import FeedEntry, FeedError, parse_feed

FEED_URL = "http://news.example.com/feeds/main.xml"


def test_rss2_links_guids_and_dates() -> None:
    body = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel>
  <title>News</title><link>http://news.example.com/</link>
  <lastBuildDate>Tue, 10 Jun 2003 09:41:01 GMT</lastBuildDate>
  <pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate>
  <item><link>http://news.example.com/2003/06/03.html</link>
        <pubDate>Tue, 03 Jun 2003 09:39:21 GMT</pubDate></item>
  <item><guid>http://news.example.com/2003/05/30.html</guid>
        <pubDate>Fri, 30 May 2003 11:06:42 -0400</pubDate></item>
  <item><link>/2003/05/20.html</link><dc:date>2003-05-20T08:56:02Z</dc:date></item>
  <item><guid isPermaLink="false">tag:news.example.com,2003:1</guid></item>
  <item><link>javascript:alert(1)</link></item>
  <item><link>http://news.example.com/undated</link><pubDate>31 Feb 2003 99:99</pubDate></item>
</channel></rss>"""
    parsed = parse_feed(body, FEED_URL)
    assert parsed.kind == "rss"
    assert parsed.feed_updated == timegm((2003, 6, 10, 9, 41, 1))
    assert parsed.entries == (
        FeedEntry("http://news.example.com/2003/06/03.html", timegm((2003, 6, 3, 9, 39, 21))),
        FeedEntry("http://news.example.com/2003/05/30.html", timegm((2003, 5, 30, 15, 6, 42))),
        FeedEntry("http://news.example.com/2003/05/20.html", timegm((2003, 5, 20, 8, 56, 2))),
        FeedEntry("http://news.example.com/undated", None))
    joined = "\n".join(parsed.errors)
    assert "has no usable link; item skipped" in joined  # the non-permalink guid
    assert "'javascript:alert(1)' is not an http(s) URL" in joined
    assert "<pubDate> '31 Feb 2003 99:99' is not a valid date" in joined


@pytest.mark.parametrize("text, expected", [
    ("Sat, 07 Sep 2002 00:00:01 GMT", timegm((2002, 9, 7, 0, 0, 1))),
    ("Sat, 07 Sep 2002 00:00:01 +0200", timegm((2002, 9, 6, 22, 0, 1))),
    ("07 Sep 2002 00:00 EST", timegm((2002, 9, 7, 5, 0, 0))),
    ("Sat, 07 Sep 02 00:00:01 UT", timegm((2002, 9, 7, 0, 0, 1))),
    ("2002-09-07T00:00:01Z", timegm((2002, 9, 7, 0, 0, 1))),  # ISO in pubDate: common
])
def test_rss_pubdate_forms(text: str, expected: float) -> None:
    body = (f"<rss><channel><item><link>http://news.example.com/a</link><pubDate>{text}"
            "</pubDate></item></channel></rss>").encode()
    assert parse_feed(body, FEED_URL).entries[0].updated == expected


def test_rss1_rdf() -> None:
    body = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="http://www.xml.com/xml/news.rss">
    <title>XML.com</title><link>http://xml.com/pub</link>
    <dc:date>2000-09-01T12:00+01:00</dc:date>
  </channel>
  <item rdf:about="http://xml.com/pub/2000/08/09/xslt/xslt.html">
    <title>Processing Inclusions with XSLT</title>
    <link>http://xml.com/pub/2000/08/09/xslt/xslt.html</link>
    <dc:date>2000-08-09</dc:date>
  </item>
  <item rdf:about="http://xml.com/pub/2000/08/09/rdfdb/index.html">
    <title>Putting RDF to Work</title>
    <dc:date>not a date</dc:date>
  </item>
</rdf:RDF>"""
    parsed = parse_feed(body, "http://www.xml.com/xml/news.rss")
    assert parsed.kind == "rdf"
    assert parsed.feed_updated == timegm((2000, 9, 1, 11, 0, 0))
    assert parsed.entries == (
        FeedEntry("http://xml.com/pub/2000/08/09/xslt/xslt.html", timegm((2000, 8, 9, 0, 0, 0))),
        FeedEntry("http://xml.com/pub/2000/08/09/rdfdb/index.html", None))
    assert len(parsed.errors) == 1 and "'not a date'" in parsed.errors[0]


def test_an_xml_base_that_is_no_url_skips_only_its_item() -> None:
    body = b"""<rss version="2.0"><channel>
  <item xml:base="http://[oops/"><link>relative.html</link></item>
  <item><link>http://example.org/good.html</link></item>
</channel></rss>"""
    parsed = parse_feed(body, FEED_URL)
    assert [e.url for e in parsed.entries] == ["http://example.org/good.html"]
    assert any("xml:base that is not a URL; item skipped" in e for e in parsed.errors)


def test_atom_links_rel_and_nested_xml_base() -> None:
    body = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://example.org/blog/">
  <title>Example</title>
  <updated>2003-12-13T18:30:02Z</updated>
  <entry xml:base="2003/">
    <link rel="edit" href="/edit/1"/>
    <link href="12/13/atom03" xml:base="posts/"/>
    <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
    <updated>2003-12-13T18:30:02.25+01:00</updated>
  </entry>
  <entry>
    <link rel="self" href="http://example.org/self"/>
    <link rel="alternate" type="text/html" href="../other/page?b=2&amp;a=1"/>
    <published>2003-12-01T10:00:00Z</published>
  </entry>
  <entry xml:base="https://mirror.example.net/x/">
    <link rel="http://www.iana.org/assignments/relation/alternate" href="y"/>
    <updated>2003-12-13T18:30:02</updated>
  </entry>
  <entry><link rel="enclosure" href="http://example.org/a.mp3"/></entry>
  <entry><link href="file:///etc/passwd"/></entry>
</feed>"""
    parsed = parse_feed(body, FEED_URL)
    assert parsed.kind == "atom"
    assert parsed.feed_updated == timegm((2003, 12, 13, 18, 30, 2))
    assert parsed.entries == (
        FeedEntry("http://example.org/blog/2003/posts/12/13/atom03",
                  timegm((2003, 12, 13, 17, 30, 2)) + 0.25),
        FeedEntry("http://example.org/other/page?a=1&b=2", timegm((2003, 12, 1, 10, 0, 0))),
        FeedEntry("https://mirror.example.net/x/y", timegm((2003, 12, 13, 18, 30, 2))))
    joined = "\n".join(parsed.errors)
    assert "has no usable link" in joined and "'file:///etc/passwd' is not an http(s) URL" in joined


def test_atom_relative_link_without_xml_base_uses_the_feed_url() -> None:
    body = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="../p/1"/>'
            b"<updated>bad-date</updated><published>2004-01-01</published></entry></feed>")
    parsed = parse_feed(body, FEED_URL)
    assert parsed.entries == (FeedEntry("http://news.example.com/p/1",
                                        timegm((2004, 1, 1, 0, 0, 0))),)
    assert "'bad-date' is not a valid date" in parsed.errors[0]
    assert parsed.feed_updated is None


def test_gzipped_feed_and_gzip_bomb() -> None:
    body = b"<rss><channel><item><link>http://news.example.com/a</link></item></channel></rss>"
    assert parse_feed(gzip.compress(body), FEED_URL).entries == (
        FeedEntry("http://news.example.com/a"),)
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    bomb = b"".join(packer.compress(b"\0" * 2**20) for _ in range(64)) + packer.flush()
    with pytest.raises(FeedError, match="more than 8388608 bytes"):
        parse_feed(bomb, FEED_URL, max_bytes=8 * 2**20)


def test_entry_cap() -> None:
    items = "".join(f"<item><link>http://news.example.com/{i}</link></item>" for i in range(50))
    parsed = parse_feed(f"<rss><channel>{items}</channel></rss>".encode(), FEED_URL,
                        max_entries=10)
    assert len(parsed.entries) == 10
    assert parsed.errors == ("50 items; only the first 10 are read",)


def test_bare_ampersand_in_a_feed_is_repaired() -> None:
    body = b"<rss><channel><item><link>http://news.example.com/?a=1&b=2</link></item></channel></rss>"
    parsed = parse_feed(body, FEED_URL)
    assert parsed.entries == (FeedEntry("http://news.example.com/?a=1&b=2"),)
    assert "bare '&' escaped" in parsed.errors[0]


@pytest.mark.parametrize("body, match", [
    (b"<html><head><title>x</title></head></html>", "root element is <html>"),
    (b'<feed xmlns="http://example.com/not-atom"/>', "namespace http://example.com/not-atom"),
    (b"<rss version='2.0'></rss>", "has no <channel>"),
    (b"{\"json\": true}", "not well-formed XML"),
    (b"", "not well-formed XML"),
])
def test_not_a_feed(body: bytes, match: str) -> None:
    with pytest.raises(FeedError, match=match):
        parse_feed(body, FEED_URL)


def test_xxe_in_feeds_is_not_resolved(trap_server: tuple[str, list[str]]) -> None:
    server, hits = trap_server
    dtd = (f'<!DOCTYPE x SYSTEM "{server}/external.dtd" [\n'
           '  <!ENTITY file SYSTEM "file:///etc/passwd">\n'
           f'  <!ENTITY remote SYSTEM "{server}/remote.xml">\n'
           f'  <!ENTITY % pe SYSTEM "{server}/param.dtd"> %pe;\n]>\n')
    rss = (f'<?xml version="1.0"?>\n{dtd}<rss><channel>'
           "<lastBuildDate>&file;</lastBuildDate>"
           "<item><link>&file;</link></item>"
           "<item><link>http://news.example.com/&remote;</link></item>"
           "<item><guid>&leak;</guid></item>"
           "<item><link>http://news.example.com/ok</link><pubDate>&file;</pubDate></item>"
           "</channel></rss>").encode()
    atom = (f'<?xml version="1.0"?>\n{dtd}<feed xmlns="http://www.w3.org/2005/Atom" '
            'xml:base="&file;"><entry><link href="&file;"/></entry>'
            '<entry><link href="http://news.example.com/atom-ok"/></entry></feed>').encode()
    parsed_rss = parse_feed(rss, FEED_URL)
    assert parsed_rss.entries == (FeedEntry("http://news.example.com/ok"),)
    assert parsed_rss.feed_updated is None
    # An external entity in an attribute is a well-formedness error; recovery drops it.
    parsed_atom = parse_feed(atom, FEED_URL)
    assert parsed_atom.entries == (FeedEntry("http://news.example.com/atom-ok"),)
    assert "external entity" in parsed_atom.errors[0]
    assert hits == []
    assert "root:" not in repr(parsed_rss) and "LEAKED" not in repr(parsed_rss)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        parse_feed("<rss/>", FEED_URL)  # type: ignore[arg-type]
    with pytest.raises(FeedError, match="not an http"):
        parse_feed(b"<rss/>", "ftp://example.com/feed")


def test_an_undeclared_prefix_in_a_feed_loses_no_item() -> None:
    # dc:creator with no xmlns:dc: kept as the tag name "dc:creator" by the recovering parse,
    # which etree.QName refused (ValueError: the crawl's "internal error", the items lost).
    body = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
            b'<item><link>http://example.com/p1.xml</link><dc:creator>me</dc:creator></item>'
            b'</channel></rss>')
    feed = parse_feed(body, "http://example.com/feed.rss")
    assert [e.url for e in feed.entries] == ["http://example.com/p1.xml"]
