"""Pages that break parsers: each ends in an HtmlExtraction (an error or a best-effort result)
within a time bound, never an exception or a hang. Also the MD5 signature."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xyro.content.html_links import HtmlExtraction, extract_links
from xyro.content.signature import MD5_BYTES, md5_signature, signature_changed

PAGE = "http://example.org/p.html"


def timed(body: bytes, limit_s: float, **kw: object) -> HtmlExtraction:
    start = time.perf_counter()
    result = extract_links(body, PAGE, **kw)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    assert elapsed < limit_s, f"extraction took {elapsed:.2f} s (bound {limit_s} s)"
    assert isinstance(result, HtmlExtraction)
    return result


@pytest.mark.parametrize("body", [b"", b"   \r\n\t ", b"\xef\xbb\xbf", b"\xff\xfe", b"\xef\xbb\xbf  \n"])
def test_empty_documents_are_errors(body: bytes) -> None:
    result = timed(body, 1.0)
    assert result.error == "parse: empty document" and result.links == ()


def test_garbage_bytes_are_a_binary_error() -> None:
    body = random.Random(7).randbytes(200_000)
    result = timed(body, 2.0)
    assert result.error is not None and result.error.startswith("parse: binary content")


def test_binary_file_served_as_html_is_an_error() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x06\x00\x00\x00" * 50
    result = timed(png, 1.0)
    assert result.error is not None and result.error.startswith("parse: binary content")


def test_plain_text_without_markup_is_an_error() -> None:
    result = timed(b"just some words, no markup at all\n" * 100, 1.0)
    assert result.error == "parse: no HTML markup (plain text, no '<' at all)"


def test_nul_bytes_inside_a_page_give_a_normal_result() -> None:
    body = b"<html><body>" + b"some text\x00 and more text, a paragraph of it. " * 20
    body += b'<a href="/a\x00b">x</a><a href="/c">c</a></body></html>'
    result = timed(body, 1.0)
    assert result.error is None
    assert [u.rsplit("/", 1)[1] for u in result.urls] == ["a\ufffdb", "c"]


def test_dense_nul_bytes_are_a_binary_error() -> None:
    body = b"<html><body>" + b"text\x00more " * 200
    result = timed(body, 1.0)
    assert result.error is not None and result.error.startswith("parse: binary content")


def test_nul_bytes_at_start_then_html() -> None:
    result = timed(b"\x00\x00<a href='/y'>y</a>", 1.0)
    assert result.error is None and result.urls == ["http://example.org/y"]


def test_invalid_utf8_everywhere_gives_a_normal_result() -> None:
    body = b"<html><title>\xc3\x28\xa0\xa1</title><body>\xf0\x28\x8c\xbc<a href='/ok'>\xe2\x82</a>"
    result = timed(body, 1.0, content_type_charset="utf-8")
    assert result.error is None and result.urls == ["http://example.org/ok"]


def test_utf16_declared_but_odd_length_body() -> None:
    body = "<a href='/z'>z</a>".encode("utf-16-le") + b"\x00\xd8\x41"  # lone surrogate, odd tail
    result = timed(body, 1.0, content_type_charset="utf-16-le")
    assert result.error is None and result.urls == ["http://example.org/z"]


@pytest.mark.parametrize("charset", ["x" * 10_000, "utf-8\x00", "../../etc/passwd", "utf-7", "\u00e9t\u00e9"])
def test_bogus_charset_names(charset: str) -> None:
    result = timed(b"<a href='/q'>q</a>", 1.0, content_type_charset=charset)
    assert result.error is None and result.urls == ["http://example.org/q"]


def test_ten_megabyte_single_line_page() -> None:
    body = b"<html><body><p>" + b"x" * 10_000_000 + b"<a href='/after'>a</a></body></html>"
    assert b"\n" not in body
    result = timed(body, 5.0)
    assert result.error is None and result.urls == ["http://example.org/after"]


def test_ten_megabyte_attribute() -> None:
    body = b"<a href='/" + b"y" * 10_000_000 + b"'>a</a><a href='/after'>b</a>"
    result = timed(body, 5.0)
    assert result.error is None and len(result.links) == 2 and result.urls[1] == "http://example.org/after"


def test_ten_megabytes_of_anchors_hits_the_cap_quickly() -> None:
    body = b"<html><body>" + b"<a href='/l'>l</a>" * 600_000
    result = timed(body, 10.0)
    assert result.truncated and len(result.links) == 65534


def test_million_fragment_links_are_bounded() -> None:
    body = b"<body>" + b"<a href='#f'>f</a>" * 300_000 + b"<a href='/late'>x</a>"
    result = timed(body, 10.0)
    assert result.truncated and result.links == ()


@pytest.mark.parametrize("tag", [b"div", b"b", b"font", b"span"])
def test_deeply_nested_tags_give_a_partial_result_with_an_error(tag: bytes) -> None:
    body = b"<html><body><a href='/before'>b</a>" + b"<" + tag + b">" * 1 + (b"<" + tag + b">") * 100_000
    body += b"<a href='/deep'>d</a>" + (b"</" + tag + b">") * 100_000
    result = timed(body, 5.0)
    assert result.error is not None and result.error.startswith("parse: stopped early")
    assert "depth" in result.error.lower()
    assert result.urls[0] == "http://example.org/before"


def test_moderately_deep_nesting_is_fine() -> None:
    body = b"<div>" * 1500 + b"<a href='/deep'>d</a>" + b"</div>" * 1500
    result = timed(body, 2.0)
    assert result.error is None and result.urls == ["http://example.org/deep"]


@pytest.mark.parametrize(
    "body",
    [
        b"<a href='/x'",  # unterminated tag
        b"<a href='/x>text</a><a href=\"/y\">",  # unterminated quote
        b"<!-- never closed <a href='/x'>",
        b"<![CDATA[ <a href='/x'> ]]>",
        b"<script><a href='/in-script'></script><a href='/ok'>",
        b"<table><a href='/t'><tr><td><a href='/u'></td></table>",
        b"<?xml version='1.0' encoding='ebcdic'?><a href='/e'>e</a>",
        b"<!DOCTYPE html [<!ENTITY x SYSTEM 'file:///etc/passwd'>]><a href='/&x;'>x</a>",
        b"<a href='/&#0;&#xD800;&#x110000;&nosuch;'>refs</a>",
        b"<svg><a href='/svg'>s</a><title>svg title</title></svg><math><a href='/m'>m</a></math>",
        b"</html></body><a href='/after-end'>",
        b"<<<<>>>><a href=/unquoted?a=1&b=2>u</a>",
    ],
)
def test_malformed_markup_never_raises(body: bytes) -> None:
    result = timed(body, 1.0)
    assert result.error is None or result.error.startswith("parse: ")


def test_entities_are_not_resolved_from_files() -> None:
    body = b"<!DOCTYPE html [<!ENTITY x SYSTEM 'file:///etc/passwd'>]><a href='/&x;'>x</a>"
    result = timed(body, 1.0)
    assert all("root:" not in url for url in result.urls)


@given(st.binary(max_size=3000))
@settings(max_examples=300, deadline=None)
def test_any_bytes_give_a_result(body: bytes) -> None:
    result = extract_links(body, PAGE)
    assert result.error is None or result.error.startswith("parse: ")


@given(st.lists(st.sampled_from(list("<>/=\"' ahrefsc#:.?\x00\t\n&;!-") + ["<a href=", "<base href="]),
                max_size=200).map("".join),
       st.sampled_from([None, "utf-8", "latin-1", "utf-16", "bogus"]))
@settings(max_examples=300, deadline=None)
def test_markup_soup_gives_a_result(text: str, charset: str | None) -> None:
    result = extract_links(text.encode("utf-8"), PAGE, content_type_charset=charset)
    assert result.error is None or result.error.startswith("parse: ")
    assert all(link.url.startswith(("http://", "https://")) for link in result.links)


@pytest.mark.parametrize("url", ["not a url", "", "http://[::1", "ftp://x/y", "http://h\u00e9.example/\u00e9"])
def test_odd_page_urls_do_not_raise(url: str) -> None:
    result = extract_links(b"<a href='x'>x</a><a href='http://o.example/'>o</a>", url)
    assert result.urls[-1] == "http://o.example/"


# --- MD5 signature ---------------------------------------------------------------------------

def test_md5_signature_is_the_md5_of_the_raw_body() -> None:
    assert md5_signature(b"") == bytes.fromhex("d41d8cd98f00b204e9800998ecf8427e")
    assert md5_signature(b"abc") == bytes.fromhex("900150983cd24fb0d6963f7d28e17f72")
    assert len(md5_signature(b"x" * 1000)) == MD5_BYTES


@pytest.mark.parametrize(
    ("new", "stored", "changed"),
    [(b"a", None, True), (b"a", md5_signature(b"a"), False), (b"a ", md5_signature(b"a"), True)],
)
def test_signature_changed(new: bytes, stored: bytes | None, changed: bool) -> None:
    assert signature_changed(new, stored) is changed
