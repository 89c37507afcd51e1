"""Unit tests of xyro/content/html_links.py: every feature of the extractor on small real documents."""

from __future__ import annotations

from urllib.parse import urljoin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xyro.content.html_links import (
    MAX_LINKS,
    HtmlExtraction,
    decode_html,
    extract_links,
    likely_xml,
    parse_meta_refresh,
    resolve_href,
)

PAGE = "http://example.org/dir/page.html?x=1"


def links(html: str | bytes, url: str = PAGE, **kw: object) -> list[tuple[str, str]]:
    body = html.encode("utf-8") if isinstance(html, str) else html
    result = extract_links(body, url, **kw)  # type: ignore[arg-type]
    assert result.error is None, result.error
    return [(link.url, link.kind) for link in result.links]


def test_all_kinds_in_document_order() -> None:
    html = """<html><head><title> The  page </title>
      <link rel="alternate" type="application/rss+xml" href="/feed.rss">
      <meta http-equiv="refresh" content="5; url=next.html"></head>
      <body><a href="a.html">a</a><map><area href="area.html"></map>
      <iframe src="inner.html"></iframe><frameset><frame src="f.html"></frameset>
      <a href="https://other.example/x">x</a></body></html>"""
    assert links(html) == [
        ("http://example.org/feed.rss", "alternate"),
        ("http://example.org/dir/next.html", "refresh"),
        ("http://example.org/dir/a.html", "a"),
        ("http://example.org/dir/area.html", "area"),
        ("http://example.org/dir/inner.html", "iframe"),
        ("http://example.org/dir/f.html", "frame"),
        ("https://other.example/x", "a"),
    ]
    assert extract_links(html.encode(), PAGE).title == "The page"


def test_frameset_document() -> None:
    html = '<html><frameset cols="50%,50%"><frame src="left.html"><frame src="/right.html"></frameset></html>'
    assert links(html) == [("http://example.org/dir/left.html", "frame"), ("http://example.org/right.html", "frame")]


def test_elements_without_the_attribute_and_other_tags_are_ignored() -> None:
    html = """<a name="top">anchor</a><area alt="x"><iframe srcdoc="<p>"></iframe>
      <img src="i.png"><script src="s.js"></script><link rel="stylesheet" href="s.css">
      <form action="f.cgi"></form><a src="wrong-attr.html">x</a>"""
    assert links(html) == []


@pytest.mark.parametrize(
    ("base", "href", "expected"),
    [
        ("http://h.example/a/b/c", "d", "http://h.example/a/b/d"),
        ("http://h.example/a/b/c", "./d", "http://h.example/a/b/d"),
        ("http://h.example/a/b/c", "../d", "http://h.example/a/d"),
        ("http://h.example/a/b/c", "../../../../d", "http://h.example/d"),
        ("http://h.example/a/b/c", "/d/./e/../f", "http://h.example/d/f"),
        ("http://h.example/a/b/c", "//o.example/p", "http://o.example/p"),
        ("https://h.example/a/b/c", "//o.example/p", "https://o.example/p"),
        ("http://h.example/a/b/c?q", "?y", "http://h.example/a/b/c?y"),
        ("http://h.example/a/b/c", "d?y#z", "http://h.example/a/b/d?y#z"),
        ("http://h.example/a/b/c", "..", "http://h.example/a/"),
        ("http://h.example/a/b/c", ".", "http://h.example/a/b/"),
        ("http://h.example/a/b/c", "g;x=1", "http://h.example/a/b/g;x=1"),
        ("http://h.example", "d", "http://h.example/d"),
        ("http://h.example/a/b/c", "http:d", "http://h.example/a/b/d"),
        ("http://h.example/a/b/c", "HTTPS://O.example/x", "HTTPS://O.example/x"),  # left to the canonicalizer
        ("http://h.example/a/b/c", "https://o.example/a/../b", "https://o.example/a/../b"),
        ("http://h.example:8080/a/", "b", "http://h.example:8080/a/b"),
        ("http://h.example/a/b/c", "a//b", "http://h.example/a/b/a//b"),  # RFC 3986 keeps "//"
    ],
)
def test_relative_url_forms(base: str, href: str, expected: str) -> None:
    assert resolve_href(base, href) == expected


@given(
    st.lists(st.sampled_from(["a", "b", ".", "..", "x.html"]), min_size=1, max_size=6),
    st.booleans(), st.sampled_from(["", "?q=1", "#f", "?a#b"]),
)
@settings(max_examples=300, deadline=None)
def test_resolution_agrees_with_urljoin(segments: list[str], absolute: bool, tail: str) -> None:
    href = ("/" if absolute else "") + "/".join(segments) + tail
    base = "http://h.example/p/q/r.html?z"
    assert resolve_href(base, href) == urljoin(base, href)


@pytest.mark.parametrize(
    "href",
    [" a.html ", "\n\ta.html\n", "a\n.ht\tml", "\x00 a.html \x1f", "\r\na.\rhtml"],
)
def test_whitespace_in_href_is_stripped_like_browsers(href: str) -> None:
    assert resolve_href(PAGE, href) == "http://example.org/dir/a.html"


@pytest.mark.parametrize(
    "href",
    ["", "   ", "#", "#top", " #x", "javascript:void(0)", " JavaScript:alert(1)", "java\nscript:x()",
     "mailto:a@b.example", "MAILTO:x", "data:text/html,hi", "tel:+331", "ftp://f.example/x",
     "file:///etc/passwd", "about:blank", "http://[::1"],
)
def test_not_followed_hrefs_are_skipped(href: str) -> None:
    result = extract_links(f'<a href="{href}">x</a><a href="ok.html">ok</a>'.encode(), PAGE)
    assert [link.url for link in result.links] == ["http://example.org/dir/ok.html"]
    assert result.skipped == 1


def test_fragment_is_kept_on_a_real_target_and_duplicates_stay() -> None:
    assert links('<a href="a.html#s">1</a><a href="a.html">2</a><a href="a.html">3</a>') == [
        ("http://example.org/dir/a.html#s", "a"), ("http://example.org/dir/a.html", "a"),
        ("http://example.org/dir/a.html", "a"),
    ]


# --- <base href> -------------------------------------------------------------------------

def test_base_href_applies_to_all_links_even_before_it() -> None:
    html = '<a href="early.html">e</a><base href="http://cdn.example/root/"><a href="x/y.html">y</a>'
    result = extract_links(html.encode(), PAGE)
    assert result.base_url == "http://cdn.example/root/"
    assert result.urls == ["http://cdn.example/root/early.html", "http://cdn.example/root/x/y.html"]


def test_relative_base_href_is_resolved_against_the_page() -> None:
    html = '<head><base href="../other/"></head><a href="z.html">z</a>'
    assert links(html) == [("http://example.org/other/z.html", "a")]


def test_first_base_wins_and_bad_bases_are_ignored() -> None:
    first = '<base href="/one/"><base href="/two/"><a href="z">z</a>'
    assert links(first) == [("http://example.org/one/z", "a")]
    for bad in ("javascript:alert(1)", "data:text/html,x", "", "#frag", "mailto:x@y"):
        html = f'<base href="{bad}"><a href="z">z</a>'
        assert links(html) == [("http://example.org/dir/z", "a")], bad


def test_base_without_href_is_skipped() -> None:
    assert links('<base target="_blank"><base href="/b/"><a href="z">z</a>') == [("http://example.org/b/z", "a")]


# --- meta refresh ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=next.html", "next.html"),
        ("0;URL='next.html'", "next.html"),
        ('5; Url="next.html"', "next.html"),
        ("0;url=next.html?a=1;b=2", "next.html?a=1;b=2"),
        ("  3 ,  url = next.html", "next.html"),
        ("0; next.html", "next.html"),
        ("1.5; url=next.html", "next.html"),
        ("0;url='next.html' trailing", "next.html"),
        ("0; url='unterminated.html", "unterminated.html"),
        ("0; urlish.html", "urlish.html"),
        ("0", None),
        ("0;", None),
        ("0; url=", None),
        ("", None),
        ("soon; url=x", None),
        ("0x; url=y", None),
    ],
)
def test_meta_refresh_forms(content: str, expected: str | None) -> None:
    assert parse_meta_refresh(content) == expected


def test_meta_refresh_in_page_and_case_of_http_equiv() -> None:
    html = '<meta HTTP-EQUIV="Refresh" content="0;URL=\'/moved/\'"><meta http-equiv="refresh" content="10">'
    assert links(html) == [("http://example.org/moved/", "refresh")]


# --- nofollow -------------------------------------------------------------------------------

def test_rel_nofollow_variants_are_dropped_by_default() -> None:
    html = """<a href="1" rel="nofollow">1</a><a href="2" rel="NoFollow noopener">2</a>
      <a href="3" rel=" external  nofollow ">3</a><area href="4" rel="nofollow">
      <a href="5" rel="nofollower">5</a><a href="6" rel="ugc">6</a><a href="7">7</a>"""
    result = extract_links(html.encode(), PAGE)
    assert result.urls == ["http://example.org/dir/5", "http://example.org/dir/6", "http://example.org/dir/7"]
    assert result.nofollow_dropped == 4
    kept = extract_links(html.encode(), PAGE, follow_nofollow=True)
    assert [(link.url[-1], link.nofollow) for link in kept.links] == [
        ("1", True), ("2", True), ("3", True), ("4", True), ("5", False), ("6", False), ("7", False)]
    assert kept.nofollow_dropped == 0


@pytest.mark.parametrize(
    ("content", "noindex", "nofollow"),
    [("nofollow", False, True), ("NOINDEX, NOFOLLOW", True, True), ("none", True, True),
     ("noindex", True, False), ("index,follow", False, False), ("noarchive nofollow", False, True)],
)
def test_meta_robots(content: str, noindex: bool, nofollow: bool) -> None:
    html = f'<meta name="Robots" content="{content}"><a href="a">a</a><iframe src="i"></iframe>'
    result = extract_links(html.encode(), PAGE)
    assert (result.meta_robots.noindex, result.meta_robots.nofollow) == (noindex, nofollow)
    assert len(result.links) == (0 if nofollow else 2)
    assert result.nofollow_dropped == (2 if nofollow else 0)
    assert len(extract_links(html.encode(), PAGE, follow_nofollow=True).links) == 2


def test_page_nofollow_keeps_the_meta_refresh_redirect() -> None:
    html = '<meta name="robots" content="nofollow"><meta http-equiv="refresh" content="0;url=/new"><a href="a">a</a>'
    result = extract_links(html.encode(), PAGE)
    assert [(link.url, link.kind, link.nofollow) for link in result.links] == [
        ("http://example.org/new", "refresh", False)]


def test_meta_robots_for_another_agent_is_ignored() -> None:
    assert len(links('<meta name="googlebot" content="nofollow"><a href="a">a</a>')) == 1


# --- link rel=alternate and likely_xml -------------------------------------------------------

def test_link_alternate_types() -> None:
    html = """<link rel="alternate" type="application/rss+xml" href="rss">
      <link rel="alternate" type="application/atom+xml" href="atom">
      <link rel="Alternate" type="text/xml" href="x">
      <link rel="alternate" hreflang="fr" href="/fr/page.html">
      <link rel="alternate" type="application/xhtml+xml" href="xhtml">
      <link rel="alternate stylesheet" href="alt.css"><link rel="alternate icon" href="i.ico">
      <link rel="stylesheet" href="s.css"><link rel="next" href="n.html"><link rel="canonical" href="c">
      <link rel="alternate">"""
    result = extract_links(html.encode(), PAGE)
    assert [(link.url.rsplit("/", 1)[1], link.kind, link.likely_xml) for link in result.links] == [
        ("rss", "alternate", True), ("atom", "alternate", True), ("x", "alternate", True),
        ("page.html", "alternate", False), ("xhtml", "alternate", False),
    ]


@pytest.mark.parametrize(
    ("url", "media_type", "expected"),
    [("http://h/a.xml", None, True), ("http://h/A.RSS?x=1", None, True), ("http://h/f.atom#x", None, True),
     ("http://h/f.rdf", None, True), ("http://h/x.html", None, False), ("http://h/xml", None, False),
     ("http://h/q?f=a.xml", None, False), ("http://h/feed", "application/rss+xml", True),
     ("http://h/feed", "application/atom+xml; charset=utf-8", True), ("http://h/d", "TEXT/XML", True),
     ("http://h/d", "application/xhtml+xml", False), ("http://h/d", "text/html", False)],
)
def test_likely_xml(url: str, media_type: str | None, expected: bool) -> None:
    assert likely_xml(url, media_type) is expected


def test_anchor_type_attribute_flags_xml() -> None:
    result = extract_links(b'<a href="/feed" type="application/atom+xml">f</a><a href="d.xml">d</a>', PAGE)
    assert [link.likely_xml for link in result.links] == [True, True]


# --- encodings --------------------------------------------------------------------------------

LATIN1_PAGE = '<title>caf\u00e9</title><a href="/caf\u00e9">x</a>'


def test_header_charset_decides() -> None:
    result = extract_links(LATIN1_PAGE.encode("latin-1"), PAGE, content_type_charset="ISO-8859-1")
    assert result.title == "caf\u00e9" and result.urls == ["http://example.org/caf\u00e9"]
    assert result.encoding == "cp1252"  # WHATWG: latin-1 labels mean windows-1252


def test_header_beats_meta() -> None:
    body = ('<meta charset="utf-8">' + LATIN1_PAGE).encode("latin-1")
    assert extract_links(body, PAGE, content_type_charset="latin-1").title == "caf\u00e9"


def test_bom_beats_header_and_meta() -> None:
    body = b"\xef\xbb\xbf" + ('<meta charset="latin-1">' + LATIN1_PAGE).encode("utf-8")
    result = extract_links(body, PAGE, content_type_charset="latin-1")
    assert result.encoding == "utf-8" and result.title == "caf\u00e9"


def test_utf16_bom() -> None:
    body = b"\xff\xfe" + LATIN1_PAGE.encode("utf-16-le")
    result = extract_links(body, PAGE)
    assert result.encoding == "utf-16-le" and result.urls == ["http://example.org/caf\u00e9"]


@pytest.mark.parametrize("meta", ['<meta charset="iso-8859-1">',
                                  '<meta http-equiv="Content-Type" content="text/html; charset=latin-1">'])
def test_meta_charset_without_header(meta: str) -> None:
    assert extract_links((meta + LATIN1_PAGE).encode("latin-1"), PAGE).title == "caf\u00e9"


def test_default_is_utf8_and_invalid_bytes_become_replacement_chars() -> None:
    result = extract_links(b'<title>a\xffb</title><a href="/x\xfe">x</a>', PAGE)
    assert result.encoding == "utf-8" and result.title == "a\ufffdb"
    assert result.urls == ["http://example.org/x\ufffd"]


@pytest.mark.parametrize("charset", ["bogus-charset", "base64", "rot13", "zlib", "", "utf-8; q", '"utf-8"'])
def test_unusable_header_charsets_fall_back(charset: str) -> None:
    result = extract_links("<a href='/é'>x</a>".encode("utf-8"), PAGE, content_type_charset=charset)
    assert result.error is None and result.urls == ["http://example.org/\u00e9"]


@pytest.mark.parametrize("declared", ["base64", "rot13", "no-such-charset"])
def test_unusable_meta_charsets_fall_back(declared: str) -> None:
    result = extract_links(f"<meta charset='{declared}'><a href='/é'>x</a>".encode("utf-8"), PAGE)
    assert result.error is None and result.urls == ["http://example.org/\u00e9"]


def test_decode_html_with_xml_declaration() -> None:
    body = b'<?xml version="1.0" encoding="iso-8859-1"?><html><a href="/\xe9">x</a></html>'
    assert decode_html(body, None)[0] == "cp1252"
    assert extract_links(body, PAGE).urls == ["http://example.org/\u00e9"]


# --- structure of the result -----------------------------------------------------------------

def test_result_is_frozen_and_typed() -> None:
    result = extract_links(b'<a href="a">a</a>', PAGE)
    assert isinstance(result, HtmlExtraction)
    with pytest.raises(AttributeError):
        result.error = "x"  # type: ignore[misc]
    assert result.links[0] == type(result.links[0])("http://example.org/dir/a", "a", False, False)


def test_uppercase_tags_and_attributes() -> None:
    assert links('<A HREF="up.html">x</A><IFRAME SRC="f.html"></IFRAME>') == [
        ("http://example.org/dir/up.html", "a"), ("http://example.org/dir/f.html", "iframe")]


def test_xhtml_namespace_document() -> None:
    html = ('<?xml version="1.0"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
            '<body><a href="x.html">x</a></body></html>')
    assert links(html) == [("http://example.org/dir/x.html", "a")]


def test_link_cap() -> None:
    body = b"<html><body>" + b'<a href="/p">x</a>' * (MAX_LINKS + 10)
    result = extract_links(body, PAGE)
    assert len(result.links) == MAX_LINKS and result.truncated and result.error is None


def test_no_cap_below_the_limit() -> None:
    result = extract_links(b'<a href="/p">x</a>' * 1000, PAGE)
    assert len(result.links) == 1000 and not result.truncated


@pytest.mark.parametrize("body, charset, expected", [
    (b"<html><meta charset='iso-8859-2'>", "koi8-r", "koi8-r"),
    (b"<html><meta charset='iso-8859-2'>", None, "iso8859-2"),
    (b"\xef\xbb\xbf<html><meta charset='iso-8859-2'>", "koi8-r", "utf-8"),
    (b"\xff\xfe<\x00h\x00", None, "utf-16-le"),
    (b"<html><meta http-equiv='Content-Type' content='text/html; charset=windows-1251'>",
     None, "cp1251"),
    (b"<html>plain</html>", "no-such-codec", "utf-8"),
    (b"<html>plain</html>", None, "utf-8"),
    ("<a href='/x'>x</a>".encode("utf-16-le"), "utf-16le", "utf-16-le"),  # the header holds
])
def test_decode_html_order_bom_header_declaration(body: bytes, charset: str | None,
                                                  expected: str) -> None:
    assert decode_html(body, charset)[0] == expected


def test_a_bare_utf16_header_charset_is_little_endian_unless_a_bom_says_otherwise() -> None:
    """WHATWG Encoding Standard: the label "utf-16" names UTF-16LE (Python's codec, and w3lib
    without a BOM, read it big-endian: the page became CJK text with no markup); a BOM still
    decides first."""
    result = extract_links(LATIN1_PAGE.encode("utf-16-le"), PAGE, content_type_charset="UTF-16")
    assert result.error is None and result.encoding == "utf-16-le"
    assert result.title == "caf\u00e9" and result.urls == ["http://example.org/caf\u00e9"]
    body = b"\xfe\xff" + LATIN1_PAGE.encode("utf-16-be")
    assert decode_html(body, "utf-16") == ("utf-16-be", LATIN1_PAGE)


@pytest.mark.parametrize("declaration", [
    '<meta charset="utf-16">', '<meta charset="UTF-16LE">', '<meta charset="utf-32">',
    '<meta http-equiv="Content-Type" content="text/html; charset=UTF-16">',
    '<?xml version="1.0" encoding="utf-16"?>'])
def test_a_declared_utf16_is_read_as_utf8(declaration: str) -> None:
    body = f"{declaration}<title>caf\u00e9</title><a href='/feed.xml'>f</a>".encode("utf-8")
    result = extract_links(body, PAGE)
    assert result.error is None and result.encoding == "utf-8"
    assert result.title == "caf\u00e9" and result.urls == ["http://example.org/feed.xml"]


@pytest.mark.parametrize("name", ["punycode", "unicode_escape", "raw_unicode_escape", "cp037",
                                  "hz", "idna"])
def test_python_codecs_that_are_no_web_encoding_are_ignored(name: str) -> None:
    body = b"<a href='/feed.xml'>f</a> <a href='/docs/\\u0041.xml'>a</a>"
    expected = ["http://example.org/feed.xml", "http://example.org/docs/\\u0041.xml"]
    by_header = extract_links(body, PAGE, content_type_charset=name)
    by_meta = extract_links(f"<meta charset='{name}'>".encode() + body, PAGE)
    for result in (by_header, by_meta):
        assert result.error is None and result.encoding == "utf-8"
        assert result.urls == expected
