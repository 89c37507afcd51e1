"""Suffix filter, Content-Type + sniffing classification, HTML charset, body decoding."""

from __future__ import annotations

import zlib
from typing import Any

import brotli
import pytest

from xyro.net.body import BodyEncodingError, BodyTooLarge, Decoder, parse_content_encoding
from xyro.content.classify import classify, sniff
from xyro.net.filters import (
    DEFAULT_ACCEPT_CONTENT_TYPES, content_type_accepted, mime_type, suffix_skipped, url_path,
)
from xyro.records import ErrorKind, FetchResult


@pytest.mark.parametrize("url, skipped", [
    ("http://a.org/x.jpg", True), ("http://a.org/x.JPEG?size=2", True),
    ("http://a.org/dl/file.tgz", True), ("http://a.org/sitemap.xml.gz", False),
    ("http://a.org/logo.svg", False), ("http://a.org/v.mp4#t=3", True),
    ("http://a.org/setup.exe", True), ("http://a.org/f.woff2", True),
    ("http://a.org/doc.xml", False), ("http://a.org/page.html", False),
    ("http://a.org/catalog.dtd", False), ("http://a.org/", False),
    ("http://a.org/img.jpg/view", False), ("http://a.org/a.php?f=x.jpg", False),
    ("http://a.org/.png", False), ("http://[::1/x.png", True),
])
def test_suffix_filter(url: str, skipped: bool) -> None:
    assert suffix_skipped(url) is skipped


def test_suffix_filter_with_a_custom_set() -> None:
    assert suffix_skipped("http://a.org/x.xml", frozenset({".xml"}))
    assert not suffix_skipped("http://a.org/x.jpg", frozenset({".xml"}))


@pytest.mark.parametrize("url", [
    "http://a/b/c.XML?x=1#f", "http://a?b/c.jpg", "http://a#b/c.jpg", "https://a:80",
    "http://a/", "HTTP://A/B.PNG", "http://u:p@a/x/y.z", "http://[::1]/p.jpg", "http://a/b;p?q",
    "http://a//b//c", "http://a/%C3%A9t%C3%A9.png", "http://a/\u00e9t\u00e9.png",
    "http://a/b\tc.png", "https://a/b c/d.gif?e",
])
def test_the_path_is_cut_as_urlsplit_cuts_it(url: str) -> None:
    # The admission cuts every URL offered by hand (a fifth of urlsplit's cost): same path.
    from urllib.parse import urlsplit

    url = url.encode().decode("unicode_escape")
    assert url_path(url) == urlsplit(url).path.lower()


def _result(body: bytes, content_type: str | None, url: str = "http://a.org/doc") -> FetchResult:
    headers = {"content-type": content_type} if content_type else {}
    return FetchResult(url=url, final_url=url, status=200, headers=headers, body=body,
                       content_type=mime_type(content_type))


@pytest.mark.parametrize("body, content_type, url, kind", [
    (b"<html><body>x</body></html>", "text/html", "http://a.org/", "html"),
    (b"<div>fragment</div>", "text/html; charset=utf-8", "http://a.org/", "html"),
    (b"<?xml version='1.0'?><rss version='2.0'/>", "text/html", "http://a.org/f", "xml"),
    # A sitemap's or a feed's root needs no XML declaration to be XML when served as HTML.
    (b"<rss version='2.0'><channel/></rss>", "text/html", "http://a.org/f", "xml"),
    (b"\n<!-- feed -->\n<rdf:RDF xmlns:rdf='x'/>", "text/html", "http://a.org/f", "xml"),
    (b"<feed xmlns='http://www.w3.org/2005/Atom'/>", "text/html", "http://a.org/f", "xml"),
    (b"<urlset xmlns='x'/>", "text/html; charset=utf-8", "http://a.org/s", "xml"),
    (b"<sitemapindex/>", "text/html", "http://a.org/s", "xml"),
    (b"<!DOCTYPE rss SYSTEM 'rss-0.91.dtd'>\n<rss/>", "text/html", "http://a.org/f", "xml"),
    ("\ufeff<feed/>".encode("utf-16-le"), "text/html", "http://a.org/f", "xml"),
    (b"<body><rss/></body>", "text/html", "http://a.org/", "html"),
    (b"<feedback>x</feedback>", "text/html", "http://a.org/", "html"),
    (b'<?xml version="1.0"?>\n<!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"/>',
     "text/html", "http://a.org/", "html"),
    (b"<?xml version='1.0'?><catalog/>", "text/plain", "http://a.org/c.txt", "xml"),
    (b"\xef\xbb\xbf  \n<catalog><item/></catalog>", "text/plain", "http://a.org/c", "xml"),
    ("<?xml version='1.0' encoding='utf-16'?><a/>".encode("utf-16"), "text/plain",
     "http://a.org/u16", "xml"),
    (b"<!-- c --><?pi x?><!DOCTYPE catalog SYSTEM 'c.dtd'><catalog/>", None,
     "http://a.org/c", "xml"),
    (b"<!DOCTYPE html>\n<html><p>x</p></html>", "application/xml", "http://a.org/", "html"),
    (b"  <HTML><BODY>x</BODY></HTML>", "text/xml", "http://a.org/", "html"),
    (b"<feed xmlns='http://www.w3.org/2005/Atom'/>", "application/atom+xml", "http://a.org/",
     "xml"),
    (b"<!ELEMENT catalog (item*)>", "application/xml-dtd", "http://a.org/c", "dtd"),
    (b"<?xml version='1.0'?>\n<!-- cat -->\n<!ENTITY % x 'y'>", "text/plain",
     "http://a.org/catalog.dtd", "dtd"),
    (b"<!ATTLIST item id ID #REQUIRED>", "text/plain", "http://a.org/not-a-dtd", "other"),
    (b"just some text", "text/plain", "http://a.org/readme", "other"),
    (b"%PDF-1.4", "application/octet-stream", "http://a.org/x", "other"),
    (b'{"json": true}', "application/json", "http://a.org/x", "other"),
    (b"", None, "http://a.org/x", "other"),
])
def test_classify(body: bytes, content_type: str | None, url: str, kind: str) -> None:
    assert classify(_result(body, content_type, url)) == kind


def test_sniff_reports_the_xml_declaration() -> None:
    assert sniff(b"<?xml version='1.0'?>") == ("xml", True)
    assert sniff(b"<root/>") == ("xml", False)
    assert sniff(b"plain") == (None, False)


def test_content_type_filter() -> None:
    accepted = DEFAULT_ACCEPT_CONTENT_TYPES
    assert content_type_accepted("application/rss+xml", accepted)
    assert content_type_accepted(None, accepted)
    assert not content_type_accepted("image/png", accepted)
    assert not content_type_accepted("application/json", accepted)
    assert mime_type(" Text/HTML ; charset=x") == "text/html"
    assert mime_type(";") is None


def test_content_encoding_header_parsing() -> None:
    assert parse_content_encoding("gzip, identity, X-GZIP") == ["gzip", "gzip"]
    assert parse_content_encoding(None) == []
    assert parse_content_encoding("") == []
    # Not content codings: a plain body mislabelled, read as it is (as browsers do).
    assert parse_content_encoding("none") == parse_content_encoding("UTF-8") == []
    assert parse_content_encoding("binary, gzip") == ["gzip"]
    assert parse_content_encoding("zstd") == ["zstd"]   # registered: the decoder refuses it


def _feed_in_chunks(decoder: Decoder, data: bytes, size: int) -> bytes:
    for i in range(0, len(data), size):
        decoder.feed(data[i:i + size])
    return decoder.finish()


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_decoder_round_trips_every_encoding_in_any_chunking(chunk: int) -> None:
    text = b"<xml>" + bytes(range(256)) * 40 + b"</xml>"
    gz = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    cases = {
        "gzip": gz.compress(text) + gz.flush(),
        "deflate": zlib.compress(text),
        "br": brotli.compress(text),
    }
    cases_raw = raw.compress(text) + raw.flush()
    for name, data in cases.items():
        assert _feed_in_chunks(Decoder([name], 10**6), data, chunk) == text, name
    assert _feed_in_chunks(Decoder(["deflate"], 10**6), cases_raw, chunk) == text
    assert _feed_in_chunks(Decoder([], 10**6), text, chunk) == text


def test_multi_member_gzip_and_trailing_padding() -> None:
    def member(data: bytes) -> bytes:
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()

    body = member(b"first ") + member(b"second") + b"\x00" * 8
    assert _feed_in_chunks(Decoder(["gzip"], 100), body, 5) == b"first second"


def _member(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def test_every_gzip_member_is_decoded_wherever_the_reads_cut_the_stream() -> None:
    # a member ending exactly at a read, or with only the next member's 0x1f in that read
    body = _member(b"first ") + _member(b"second ") + _member(b"third")
    for chunk in range(1, len(body) + 1):
        assert _feed_in_chunks(Decoder(["gzip"], 100), body, chunk) == b"first second third"
    first = len(_member(b"first "))
    for cut in (first - 1, first, first + 1, first + 2):
        decoder = Decoder(["gzip"], 100)
        decoder.feed(body[:cut])
        decoder.feed(body[cut:])
        assert decoder.finish() == b"first second third", cut


def test_empty_gzip_members_do_not_end_the_body() -> None:
    body = _member(b"") + _member(b"") + _member(b"<a href='/x'>") + _member(b"") + _member(b"x")
    for chunk in (1, 7, len(body)):
        assert _feed_in_chunks(Decoder(["gzip"], 100), body, chunk) == b"<a href='/x'>x"


def test_bytes_after_the_last_gzip_member_are_padding() -> None:
    for tail in (b"\x1f", b"\x00", b"\x1f\x00junk", b"\n"):
        assert _feed_in_chunks(Decoder(["gzip"], 100), _member(b"doc") + tail, 3) == b"doc"


@pytest.mark.parametrize("name, pack", [
    ("gzip", _member), ("deflate", zlib.compress),
    ("deflate", lambda data: (lambda c: c.compress(data) + c.flush())(
        zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS))),
    ("br", brotli.compress),
])
def test_a_stream_the_body_ends_inside_is_an_encoding_error(name: str, pack: Any) -> None:
    # A connection closed early under a Content-Length counting only what was sent: the
    # part decoded must not pass for the whole document (its links, its version).
    text = b"".join(b"<a href='/p%d'>page %d</a>\n" % (i, i) for i in range(3000))
    packed = pack(text)
    assert _feed_in_chunks(Decoder([name], 10**6), packed, 4096) == text
    for cut in (1, len(packed) // 2, len(packed) - 1):
        with pytest.raises(BodyEncodingError, match=f"truncated {name} stream"):
            _feed_in_chunks(Decoder([name], 10**6), packed[:cut], 4096)
    assert _feed_in_chunks(Decoder([name], 10**6), b"", 4096) == b""   # no body at all


def test_a_second_gzip_member_cut_short_is_an_encoding_error() -> None:
    with pytest.raises(BodyEncodingError, match="truncated gzip stream"):
        _feed_in_chunks(Decoder(["gzip"], 10**6), _member(b"first") + _member(b"second")[:12], 5)
    with pytest.raises(BodyEncodingError, match="truncated gzip file stream"):
        _feed_in_chunks(Decoder([], 10**6, gzip_file=True), _member(b"<urlset/>")[:15], 5)


def test_decoder_cap_is_exact() -> None:
    data = zlib.compress(b"a" * 1000)
    assert len(_feed_in_chunks(Decoder(["deflate"], 1000), data, 64)) == 1000
    with pytest.raises(BodyTooLarge, match="cap 999"):
        _feed_in_chunks(Decoder(["deflate"], 999), data, 64)
    with pytest.raises(BodyTooLarge, match="cap 10"):
        Decoder([], 10).feed(b"x" * 11)


def test_decoder_refuses_unknown_and_corrupt_streams() -> None:
    with pytest.raises(BodyEncodingError, match="unsupported Content-Encoding 'compress'"):
        Decoder(["compress"], 100)
    with pytest.raises(BodyEncodingError, match="corrupt deflate"):
        _feed_in_chunks(Decoder(["deflate"], 100), b"\x78\x9c garbage garbage", 4)


def test_error_kinds_are_stable_lowercase_strings() -> None:
    assert [k.value for k in ErrorKind] == [
        "timeout", "too_large", "http_status", "robots", "parse", "dns", "connect",
        "redirect", "address", "content_type", "scope", "encoding", "trap", "truncated"]
    assert str(ErrorKind.TOO_LARGE) == "too_large"
