"""Tags with many attributes (DESIGN.md §7): the HTML scan builds no tree, so its cost stays
linear in the page; a libxml2 tree costs the square of a tag's attributes (15 s for one tag
of 100,000). Also the bound that replaces the tree's depth limit."""

from __future__ import annotations

import time

from xyro.content.html_links import HtmlExtraction, extract_links

PAGE = "http://example.org/p.html"


def _timed(body: bytes, limit_s: float) -> HtmlExtraction:
    start = time.perf_counter()
    result = extract_links(body, PAGE)
    elapsed = time.perf_counter() - start
    assert elapsed < limit_s, f"extraction took {elapsed:.2f} s (bound {limit_s} s)"
    return result


def _tag(name: str, count: int, last: str) -> str:
    return f"<{name} " + " ".join(f'a{i}="v"' for i in range(count)) + f" {last}>t</{name}>"


def test_a_tag_of_100000_attributes_is_scanned_in_linear_time() -> None:
    body = f"<html><body>{_tag('a', 100_000, 'href=/x.xml')}<a href=/after>b</a>".encode()
    result = _timed(body, 3.0)
    assert result.error is None
    assert result.urls == ["http://example.org/x.xml", "http://example.org/after"]
    assert result.links[0].likely_xml


def test_many_tags_of_10000_attributes_are_scanned_in_linear_time() -> None:
    body = ("<html><head>" + _tag("meta", 10_000, "name=robots content=nofollow")
            + "</head><body>" + _tag("a", 10_000, "href=/x") * 50).encode()  # 4.6 MB
    result = _timed(body, 2.0)
    assert result.meta_robots.nofollow and result.nofollow_dropped == 50


def test_deep_nesting_with_unmatched_end_tags_stops_at_the_depth_limit() -> None:
    # libxml2 matches each end tag against every open element: 400,000 open and as many
    # unmatched end tags would take it about 10 minutes if the scan did not end the parse.
    body = b"<a href=/first>f</a>" + b"<div>" * 400_000 + b"</x>" * 400_000
    result = _timed(body, 3.0)
    assert result.error is not None and "depth" in result.error
    assert result.urls == ["http://example.org/first"]
