"""Sitemaps: urlset, index, gzip, text, dates, caps, hostile XML, the location rule."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from calendar import timegm

import pytest

from xyro.publication.sitemaps import (
    MAX_SITEMAP_URLS, SitemapEntry, SitemapError, gunzip_capped, parse_sitemap,
)

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
BASE = "http://example.com/catalog/sitemap.xml"


def urlset(*urls: str, extra_ns: str = "") -> bytes:
    body = "".join(urls)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}"{extra_ns}>\n'
            f"{body}\n</urlset>\n").encode()


def url(loc: str, **fields: str) -> str:
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in fields.items())
    return f"<url><loc>{loc}</loc>{inner}</url>\n"


def test_urlset_fields_are_read() -> None:
    body = urlset(
        url("http://example.com/catalog/a.html", lastmod="2005-01-01", changefreq="Monthly",
            priority="0.8"),
        url("http://EXAMPLE.com:80/catalog/b?y=2&amp;x=1", lastmod="2004-12-23T18:00:15+01:00"),
        url("http://example.com/catalog/c"))
    parsed = parse_sitemap(body, BASE)
    assert parsed.kind == "urlset"
    assert parsed.errors == ()
    assert parsed.entries == (
        SitemapEntry("http://example.com/catalog/a.html", timegm((2005, 1, 1, 0, 0, 0)),
                     "monthly", 0.8),
        SitemapEntry("http://example.com/catalog/b?x=1&y=2",
                     timegm((2004, 12, 23, 17, 0, 15)), None, None),
        SitemapEntry("http://example.com/catalog/c"))


def test_extension_namespaces_are_ignored() -> None:
    img = ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
    body = urlset("<url><image:image><image:loc>http://cdn.example.net/i.png</image:loc>"
                  "</image:image><loc>http://example.com/catalog/p</loc></url>", extra_ns=img)
    parsed = parse_sitemap(body, BASE)
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/p"]


def test_an_undeclared_extension_prefix_loses_no_entry() -> None:
    # Sloppy but common: image:image with no xmlns:image. The recovering parse keeps the
    # prefix in the tag name, which etree.QName refused with ValueError: every URL was lost.
    body = urlset("<url><loc>http://example.com/catalog/a</loc><image:image><image:loc>"
                  "http://example.com/i.png</image:loc></image:image></url>",
                  url("http://example.com/catalog/b"))
    parsed = parse_sitemap(body, BASE)
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/a",
                                               "http://example.com/catalog/b"]
    assert parsed.errors   # the broken XML is noted


def test_sitemap_without_namespace_and_relative_loc() -> None:
    body = b"<urlset><url><loc>item/1</loc></url><url><loc>/catalog/item/2</loc></url></urlset>"
    parsed = parse_sitemap(body, BASE)
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/item/1",
                                               "http://example.com/catalog/item/2"]


def test_sitemap_index() -> None:
    body = (f'<sitemapindex xmlns="{NS}">'
            "<sitemap><loc>http://example.com/maps/s1.xml.gz</loc>"
            "<lastmod>2004-10-01T18:23:17+00:00</lastmod></sitemap>"
            "<sitemap><loc>http://example.com/s2.xml</loc></sitemap>"
            "<sitemap><loc>http://other.example.org/s3.xml</loc></sitemap>"
            "</sitemapindex>").encode()
    parsed = parse_sitemap(body, "http://example.com/catalog/index.xml")
    assert parsed.kind == "index"
    # An index may point anywhere on its own host (not only under its directory).
    assert parsed.entries == (
        SitemapEntry("http://example.com/maps/s1.xml.gz", timegm((2004, 10, 1, 18, 23, 17))),
        SitemapEntry("http://example.com/s2.xml"))
    assert len(parsed.errors) == 1 and "other.example.org" in parsed.errors[0]
    assert "location rule" in parsed.errors[0]


def test_gzip_body_matches_plain_and_multi_member_gzip() -> None:
    body = urlset(*(url(f"http://example.com/catalog/{i}") for i in range(100)))
    plain = parse_sitemap(body, BASE)
    assert parse_sitemap(gzip.compress(body), BASE + ".gz") == plain
    half = len(body) // 2
    two_members = gzip.compress(body[:half]) + gzip.compress(body[half:])
    assert parse_sitemap(two_members, BASE + ".gz") == plain


@pytest.mark.parametrize("bad, what", [
    (b"\x1f\x8b\x08\x00garbage-garbage-garbage", "not valid gzip"),
    (gzip.compress(b"<urlset></urlset>" * 100, mtime=0)[:40], "truncated"),
])
def test_corrupt_gzip_is_a_clear_error(bad: bytes, what: str) -> None:
    with pytest.raises(SitemapError, match=what):
        parse_sitemap(bad, BASE)


def _bomb(decompressed_mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * 2**20
    return b"".join(packer.compress(block) for _ in range(decompressed_mib)) + packer.flush()


def test_gzip_bomb_stops_at_the_cap_with_bounded_memory() -> None:
    bomb = _bomb(256)  # 256 MiB of zeros in about 250 KB
    assert len(bomb) < 2**20
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(SitemapError, match=r"more than 52428800 bytes \(cap\)"):
            parse_sitemap(bomb, BASE + ".gz")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.process_time() - started < 10
    assert peak < 3 * 50 * 2**20, f"peak {peak / 2**20:.0f} MiB for a 50 MiB cap"


def test_gzip_cap_is_exact() -> None:
    data = b"x" * 1000
    assert gunzip_capped(gzip.compress(data), 1000) == data
    with pytest.raises(SitemapError, match="more than 999"):
        gunzip_capped(gzip.compress(data), 999)


def test_uncompressed_body_over_the_cap() -> None:
    with pytest.raises(SitemapError, match="over the cap of 100"):
        parse_sitemap(urlset(url("http://example.com/catalog/x" + "y" * 200)), BASE,
                      max_bytes=100)


def test_text_sitemap() -> None:
    body = ("\ufeffhttp://example.com/catalog/one\r\n\n"
            "  http://example.com/catalog/two?b=1&a=2  \n"
            "# a comment line\n"
            "catalog/relative\n"
            "javascript:alert(1)\n"
            "http://example.com/elsewhere\n").encode() + b"http://example.com/catalog/\xff\xfe\n"
    parsed = parse_sitemap(body, "http://example.com/catalog/sitemap.txt")
    assert parsed.kind == "urlset"
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/one",
                                               "http://example.com/catalog/two?a=2&b=1"]
    assert all(e.lastmod is None for e in parsed.entries)
    joined = "\n".join(parsed.errors)
    assert "line 5: 'catalog/relative' is not an absolute http(s) URL" in joined
    assert "line 6: 'javascript:alert(1)'" in joined
    assert "line 7: http://example.com/elsewhere is not under" in joined
    assert "line 8: not UTF-8" in joined


def test_bad_dates_priority_and_changefreq_become_none_with_notes() -> None:
    body = urlset(
        url("http://example.com/catalog/1", lastmod="2005-13-01"),
        url("http://example.com/catalog/2", lastmod="yesterday", changefreq="sometimes"),
        url("http://example.com/catalog/3", lastmod="2005-02-30T10:00Z", priority="1.5"),
        url("http://example.com/catalog/4", lastmod="", priority="high"),
        url("http://example.com/catalog/5", lastmod="2005-06-01T10:00:00.5-05:00"))
    parsed = parse_sitemap(body, BASE)
    assert [e.url for e in parsed.entries] == [f"http://example.com/catalog/{i}"
                                               for i in range(1, 6)]
    assert [e.lastmod for e in parsed.entries[:4]] == [None] * 4
    assert parsed.entries[4].lastmod == timegm((2005, 6, 1, 15, 0, 0)) + 0.5
    assert all(e.priority is None and e.changefreq is None for e in parsed.entries)
    joined = "\n".join(parsed.errors)
    for needle in ("'2005-13-01' is not a W3C datetime", "'yesterday'", "'sometimes'",
                   "'2005-02-30T10:00Z'", "'1.5' is not a number in [0, 1]", "'high'",
                   "<lastmod> '' is not"):
        assert needle in joined


def test_entries_without_usable_loc_are_skipped() -> None:
    body = urlset("<url><lastmod>2005-01-01</lastmod></url>",
                  url("javascript:alert(1)"), url("mailto:x@example.com"),
                  url("http://example.com/catalog/ok"))
    parsed = parse_sitemap(body, BASE)
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/ok"]
    assert len(parsed.errors) == 3


def test_url_cap_truncates_with_a_note() -> None:
    body = urlset(*(url(f"http://example.com/catalog/{i}") for i in range(MAX_SITEMAP_URLS + 7)))
    started = time.process_time()
    parsed = parse_sitemap(body, BASE)
    assert time.process_time() - started < 10
    assert len(parsed.entries) == MAX_SITEMAP_URLS
    assert parsed.entries[-1].url == f"http://example.com/catalog/{MAX_SITEMAP_URLS - 1}"
    assert parsed.errors == (f"more than {MAX_SITEMAP_URLS} entries; the rest are ignored",)
    small = parse_sitemap(body, BASE, max_urls=3)
    assert len(small.entries) == 3


def test_error_notes_are_capped() -> None:
    body = urlset(*(url(f"http://example.com/catalog/{i}", lastmod="bad") for i in range(500)))
    parsed = parse_sitemap(body, BASE)
    assert len(parsed.entries) == 500
    assert len(parsed.errors) == 101 and parsed.errors[-1] == "... and 400 more error(s)"


def test_bare_ampersands_are_repaired_with_a_note() -> None:
    body = urlset(url("http://example.com/catalog/q?a=1&b=2"))
    parsed = parse_sitemap(body, BASE)
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/q?a=1&b=2"]
    assert "bare '&' escaped" in parsed.errors[0]


@pytest.mark.parametrize("body, match", [
    (b"<html><body>Not found</body></html>", "root element is <html>"),
    (b"<<<>>> not xml", "not well-formed"),
    (b"   \n", "is empty"),
    (b'<rss version="2.0"><channel/></rss>', "not <urlset> or <sitemapindex>"),
])
def test_not_a_sitemap(body: bytes, match: str) -> None:
    with pytest.raises(SitemapError, match=match):
        parse_sitemap(body, BASE)


def test_non_http_base_url_is_refused() -> None:
    with pytest.raises(SitemapError, match="not an http"):
        parse_sitemap(urlset(), "file:///etc/sitemap.xml")


def test_truncated_xml_keeps_what_was_complete() -> None:
    body = urlset(url("http://example.com/catalog/1"), url("http://example.com/catalog/2"))
    parsed = parse_sitemap(body[:body.index(b"catalog/2")], BASE)
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/1"]
    assert "recovery mode" in parsed.errors[0]


def test_xxe_in_a_sitemap_is_not_resolved(trap_server: tuple[str, list[str]]) -> None:
    server, hits = trap_server
    body = (f'<?xml version="1.0"?>\n<!DOCTYPE urlset SYSTEM "{server}/external.dtd" [\n'
            '  <!ENTITY file SYSTEM "file:///etc/passwd">\n'
            f'  <!ENTITY remote SYSTEM "{server}/remote.xml">\n'
            f'  <!ENTITY % pe SYSTEM "{server}/param.dtd"> %pe;\n'
            ']>\n'
            f'<urlset xmlns="{NS}">\n'
            "<url><loc>&file;</loc></url>\n"
            "<url><loc>http://example.com/catalog/&remote;</loc></url>\n"
            "<url><loc>http://example.com/catalog/x</loc><lastmod>&file;</lastmod></url>\n"
            "<url><loc>http://example.com/catalog/&leak;</loc></url>\n"
            "</urlset>").encode()
    parsed = parse_sitemap(body, BASE)
    assert hits == []
    assert [e.url for e in parsed.entries] == ["http://example.com/catalog/x"]
    assert parsed.entries[0].lastmod is None
    dump = repr(parsed)
    assert "root:" not in dump and "LEAKED" not in dump


def test_billion_laughs_is_not_expanded() -> None:
    entities = ['<!ENTITY l0 "ha">'] + [
        f'<!ENTITY l{i} "{"".join(f"&l{i - 1};" for _ in range(10))}">' for i in range(1, 10)]
    body = (f'<?xml version="1.0"?>\n<!DOCTYPE urlset [{"".join(entities)}]>\n'
            f'<urlset xmlns="{NS}"><url><loc>http://example.com/catalog/&l9;</loc></url>'
            '<url><loc>http://example.com/catalog/fine</loc></url></urlset>').encode()
    started = time.process_time()
    parsed = parse_sitemap(body, BASE)
    assert time.process_time() - started < 2
    # libxml2 refuses the amplification outright; recovery keeps nothing expanded.
    assert set(e.url for e in parsed.entries) <= {"http://example.com/catalog/fine"}
    assert "haha" not in repr(parsed)
    assert parsed.errors and "amplification" in parsed.errors[0]


def test_deep_nesting_and_invalid_utf8_end_bounded() -> None:
    deep = urlset("<url>" + "<x>" * 100_000 + "</x>" * 100_000
                  + "<loc>http://example.com/catalog/d</loc></url>")
    started = time.process_time()
    try:
        parsed = parse_sitemap(deep, BASE)
    except SitemapError as exc:
        assert "well-formed" in str(exc)
    else:
        assert len(parsed.entries) <= 1
    assert time.process_time() - started < 10
    broken = urlset(url("http://example.com/catalog/ok")).replace(b"ok", b"o\xff\xfek")
    try:
        parsed = parse_sitemap(broken, BASE)
    except SitemapError as exc:
        assert "well-formed" in str(exc)
    else:
        assert all(e.url.startswith("http://example.com/catalog/") for e in parsed.entries)


@pytest.mark.parametrize("location, allowed", [
    ("directory", ["http://example.com/catalog/a", "http://example.com/catalog/sub/b"]),
    ("host", ["http://example.com/catalog/a", "http://example.com/catalog/sub/b",
              "http://example.com/images/c"]),
    ("any", ["http://example.com/catalog/a", "http://example.com/catalog/sub/b",
             "http://example.com/images/c", "https://example.com/catalog/d",
             "http://example.com:8080/catalog/e", "http://www.example.com/catalog/f"]),
])
def test_location_rule_modes(location: str, allowed: list[str]) -> None:
    candidates = ["http://example.com/catalog/a", "http://example.com/catalog/sub/b",
                  "http://example.com/images/c", "https://example.com/catalog/d",
                  "http://example.com:8080/catalog/e", "http://www.example.com/catalog/f"]
    parsed = parse_sitemap(urlset(*(url(u) for u in candidates)), BASE,
                           location=location)  # type: ignore[arg-type]
    assert [e.url for e in parsed.entries] == allowed
    assert len(parsed.errors) == len(candidates) - len(allowed)


def test_location_rule_extra_prefix_for_robots_announced_sitemaps() -> None:
    # A sitemap stored on a CDN, announced by www.example.com's robots.txt.
    body = urlset(url("http://www.example.com/a"), url("http://cdn.example.net/maps/b"),
                  url("http://evil.example.org/c"))
    parsed = parse_sitemap(body, "http://cdn.example.net/maps/sitemap.xml",
                           also_allowed=("http://www.example.com/",))
    assert [e.url for e in parsed.entries] == ["http://www.example.com/a",
                                               "http://cdn.example.net/maps/b"]


def test_location_directory_of_a_root_sitemap_is_the_whole_host() -> None:
    parsed = parse_sitemap(urlset(url("http://example.com/deep/page")),
                           "http://example.com/sitemap.xml?version=2")
    assert [e.url for e in parsed.entries] == ["http://example.com/deep/page"]


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        parse_sitemap("<urlset/>", BASE)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="location"):
        parse_sitemap(urlset(), BASE, location="anywhere")  # type: ignore[arg-type]
