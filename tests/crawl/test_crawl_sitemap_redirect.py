"""A sitemap whose URL redirects (a CMS's ``/sitemap.xml`` to ``/sitemap_index.xml``, http
to https) is re-read at its target (paper 003 §3, DESIGN.md §7: redirects go through the
frontier). The redirect's own offer skips a URL already seen, so the target was read once, at
the first crawl, and never again: pages the site listed later were never found. Real HTTP
server on 127.0.0.1, real crawl, real SQLite."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from xyro.app import build_crawler
from xyro.service.crawl_run import queue_sitemaps

SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
HTML = {"Content-Type": "text/html"}


def _crawl_reread_crawl(tmp_path: Path, local_app_for: Any, site: Any,
                        between: Any) -> tuple[list[str], list[str]]:
    """Crawl from the ``sitemaps`` key (``/sitemap.xml``), call ``between()``, re-read the
    publication sources and crawl again: the paths requested by each crawl."""
    app = local_app_for(tmp_path, f"sitemaps={json.dumps([site.base + '/sitemap.xml'])}")
    with app.open_store() as store:
        parts = build_crawler(app, store)
        try:
            crawler = parts.crawler
            assert queue_sitemaps(crawler, app.config.sitemaps) == 1
            first = crawler.run(None, 30, threading.Event(), None)
            assert first.stop_reason == "frontier exhausted", first.stop_reason
            done = len(site.requests)
            between()
            crawler.publication.reread(crawler.frontier, app.clock.now())
            second = crawler.run(None, 30, threading.Event(), None)
            assert second.stop_reason == "frontier exhausted", second.stop_reason
        finally:
            parts.close()
    return site.requests[:done], site.requests[done:]


def test_a_redirected_sitemap_is_read_again_at_its_target(tmp_path: Path, routed_site: Any,
                                                          local_app_for: Any) -> None:
    listed = ["/page1.html"]
    site: Any = None

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/sitemap.xml":
            return 301, {"Location": site.base + "/sitemap_index.xml"}, b""
        if path == "/sitemap_index.xml":
            body = f'<?xml version="1.0"?><urlset xmlns="{SM}">' + "".join(
                f"<url><loc>{site.base}{p}</loc></url>" for p in listed) + "</urlset>"
            return 200, {"Content-Type": "application/xml"}, body.encode()
        return 200, HTML, b"<html><body>a page</body></html>"

    site = routed_site(respond)
    first, second = _crawl_reread_crawl(tmp_path, local_app_for, site,
                                        lambda: listed.append("/page2.html"))
    assert first == ["/sitemap.xml", "/sitemap_index.xml", "/page1.html"], first
    # The old code fetched only ["/sitemap.xml"] here: its target was known, so skipped.
    assert sorted(second) == ["/page2.html", "/sitemap.xml", "/sitemap_index.xml"], second


def test_sitemaps_redirecting_to_each_other_are_read_a_bounded_number_of_times(
        tmp_path: Path, routed_site: Any, local_app_for: Any) -> None:
    # Each source's target is a source too: a re-read must not chase the loop without end.
    site: Any = None

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        other = {"/sitemap.xml": "/other.xml", "/other.xml": "/sitemap.xml"}.get(path)
        if other is not None:
            return 302, {"Location": site.base + other}, b""
        return 404, HTML, b"<html><body>no</body></html>"

    site = routed_site(respond)
    first, second = _crawl_reread_crawl(tmp_path, local_app_for, site, lambda: None)
    assert first == ["/sitemap.xml", "/other.xml"], first
    assert sorted(second) == ["/other.xml", "/sitemap.xml"], second
