"""Sitemaps are parsed under the process's parse guard (DESIGN.md §7,
xyro.content.parse_guard): lxml swaps libxml2's process-global entity loader around every
chunk the sitemap pull parser is fed, so a sitemap parsed beside a DOCTYPE parse could hand
that parse libxml2's default loader ("Attempt to load network entity"). Deterministic: the
exclusive hold and its release are events; only the bounded join that shows the sitemap
parse still held back waits on time."""

from __future__ import annotations

import threading

from xyro.content.parse_guard import PARSES
from xyro.publication.sitemaps import SitemapParse, parse_sitemap

SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
# A few entries, read in milliseconds, over several pull-parser chunks (blanks between
# them): every feed of the parser waits its turn, not just the first.
SITEMAP = (f'<?xml version="1.0"?><urlset xmlns="{SM}">' + (" " * 100_000).join(
    f"<url><loc>http://g.test/p{i}</loc></url>" for i in range(3)) + "</urlset>").encode()
HELD_S = 0.3  # how long a parse that must wait is seen still waiting


def test_a_sitemap_parse_waits_for_an_exclusive_parse() -> None:
    entered, release = threading.Event(), threading.Event()

    def exclusive() -> None:
        with PARSES.exclusive():
            entered.set()
            release.wait(10)

    holder = threading.Thread(target=exclusive, daemon=True)
    holder.start()
    assert entered.wait(10)
    parsed: list[SitemapParse] = []
    sitemap = threading.Thread(
        target=lambda: parsed.append(parse_sitemap(SITEMAP, "http://g.test/sitemap.xml")),
        daemon=True)
    try:
        sitemap.start()
        sitemap.join(HELD_S)
        assert sitemap.is_alive() and parsed == []  # held back while the DOCTYPE parse runs
    finally:
        release.set()
    for thread in (holder, sitemap):
        thread.join(10)
        assert not thread.is_alive()
    assert [e.url for e in parsed[0].entries] == [f"http://g.test/p{i}" for i in range(3)]


def test_a_sitemap_parse_inside_an_exclusive_parse_of_its_thread_does_not_wait() -> None:
    """The guard is reentrant for its writer: a sitemap read while the thread holds the
    exclusive hold parses at once (it never waits for itself)."""
    with PARSES.exclusive():
        parsed = parse_sitemap(SITEMAP, "http://g.test/sitemap.xml")
    assert len(parsed.entries) == 3
