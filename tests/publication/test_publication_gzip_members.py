"""A gzipped sitemap or feed of many gzip members (DESIGN.md §7): a body of empty members
(20 bytes each, decoding to nothing) costs time linear in the members, not a copy of all
the rest of the body per member; the members' contents, a cap and corrupt data are treated
as for any gzip body."""

from __future__ import annotations

import gzip
import time

import pytest

from xyro.publication.feeds import FeedError, parse_feed
from xyro.publication.sitemaps import SitemapError, decoded_body, gunzip_capped, parse_sitemap

MB = 1 << 20
EMPTY_MEMBER = gzip.compress(b"", mtime=0)
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
BASE = "http://example.com/sitemap.xml.gz"
SITEMAP = (f'<?xml version="1.0"?><urlset xmlns="{NS}"><url><loc>http://example.com/a</loc>'
           f'</url></urlset>').encode()


def _empty_members(mib: int) -> bytes:
    return EMPTY_MEMBER * (mib * MB // len(EMPTY_MEMBER))


def test_many_empty_members_cost_linear_time() -> None:
    # 3 MiB is 157,000 members: well under a second when each costs about its own length,
    # about ten seconds when each costs a copy of everything after it.
    body = _empty_members(3) + gzip.compress(SITEMAP, mtime=0)
    started = time.process_time()
    parsed = parse_sitemap(body, BASE, location="host")
    assert time.process_time() - started < 3.0
    assert [entry.url for entry in parsed.entries] == ["http://example.com/a"]


def test_members_are_joined_in_order_and_trailing_padding_is_ignored() -> None:
    parts = [b"<urlset>", b"", b"x" * 70_000, b"", b"</urlset>"]
    body = b"".join(gzip.compress(p, mtime=0) for p in parts) + b"\0" * 10
    assert gunzip_capped(body, 1 * MB) == b"".join(parts)


@pytest.mark.parametrize("tail, words", [
    (b"\x1f\x8b\x08\x00", "truncated"),
    (b"\x1f\x8b\x08\x00garbage-garbage-garbage", "not valid gzip"),
])
def test_a_bad_member_after_many_good_ones_is_a_clear_error(tail: bytes, words: str) -> None:
    with pytest.raises(SitemapError, match=words):
        gunzip_capped(_empty_members(1) + tail, MB, "sitemap x")


def test_the_cap_counts_the_output_of_all_members() -> None:
    body = gzip.compress(b"a" * 600, mtime=0) * 2
    assert decoded_body(body, 1200, "sitemap x") == b"a" * 1200
    with pytest.raises(SitemapError, match="more than 1199 bytes"):
        decoded_body(body, 1199, "sitemap x")


def test_a_feed_of_many_members_is_linear_too() -> None:
    feed = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><item>'
            b'<link>http://example.com/p</link></item></channel></rss>')
    body = _empty_members(3) + gzip.compress(feed, mtime=0)
    started = time.process_time()
    parsed = parse_feed(body, "http://example.com/feed.xml.gz")
    assert time.process_time() - started < 3.0
    assert [entry.url for entry in parsed.entries] == ["http://example.com/p"]
    with pytest.raises(FeedError, match="not valid gzip"):
        parse_feed(EMPTY_MEMBER + b"\x1f\x8b\x08\x00 junk junk junk", "http://example.com/f")
