"""Sitemaps as a producer of the frontier and their dates as change dates (paper 003 §3,
DESIGN.md §2 and §6), crawled over the synthetic web.

1. With ``scope.max_depth: 1`` a page two links away from its host's home page is out of
   reach by links; announced by the ``Sitemap:`` line of robots.txt, every listed page is
   fetched anyway (listed pages are one level below the sitemap, which sits at the seeds').
2. Where HTTP Last-Modified is useless everywhere (every page stamped "now"), honest
   sitemaps earn their host's trust and their dates make the planner's rate estimates
   better than the signature-only estimates on hosts whose sitemaps lie. Both medians of
   the relative error are written to ``publication_medians.json`` in the test's tmp folder
   and shown in the assertion message.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any

from metadata import MetadataStore
from xyro.app import App, build_crawler
from xyro.crawl.admission import Source
from xyro.crawl.crawler import Crawler
from xyro.clock import AcceleratedClock, WallClock
from xyro.crawl.frontier import REFRESH
from xyro.jobs.plan_job import RefreshPlanner
from xyro.jobs.plan_settings import PlannerSettings
from xyro.service.crawl_run import queue_seeds, restore_frontier, run_crawl
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

DAY = 86400.0


def _listed(web: SyntheticWeb) -> dict[str, int]:
    """Every URL a sitemap lists (pages of sitemap hosts outside the disallowed areas)."""
    return {web.url_of(h.index, web.model.pages[p].path): h.index
            for h in web.model.normal_hosts if h.sitemap
            for p in h.pages if not web.model.pages[p].disallowed}


def test_every_listed_page_is_fetched_even_out_of_link_reach(tmp_path: Path, app_for,
                                                             rows_of) -> None:
    spec = WebSpec(seed=11, n_hosts=4, n_pages=160, hostile=frozenset(), sitemap_share=1.0,
                   robots_missing_share=0.0, crawl_delay_share=0.0)
    clock = AcceleratedClock(WallClock().now(), 50.0)
    with SyntheticWeb(spec, clock) as web:
        app = app_for(tmp_path, web, clock, delay_s=0.0, extra=["scope.max_depth=1"])
        summary = run_crawl(app, max_seconds=3600.0)
        listed, near = _listed(web), _within_one_link(web)
        sitemaps = {i: web.url_of(i, "/sitemap.xml") for i in set(listed.values())}
    assert listed, "the web has sitemap hosts"
    rows = rows_of(tmp_path / "xyro.db")
    missing = [u for u in listed if u not in rows or rows[u]["first_access"] is None]
    assert not missing, f"{len(missing)} listed pages never fetched, e.g. {missing[:3]}"
    # The sitemaps themselves are recorded like any XML document.
    for sitemap_url in sitemaps.values():
        sitemap = rows[sitemap_url]
        assert sitemap["type"] == "xml" and sitemap["depth"] == 0
    # Some listed pages lie two or more links from every home page: only the sitemap led
    # there (with max_depth 1, links alone stop one link from the seeds).
    beyond = [u for u in listed if u not in near]
    assert beyond, "the web should have pages out of link reach"
    pub = summary.stats["publication"]
    assert pub["read"] >= len(set(listed.values())) and pub["listed_urls"] >= len(listed)  # feeds too
    assert pub["sources"] == len(set(listed.values()))


def _within_one_link(web: SyntheticWeb) -> set[str]:
    """URLs of the home pages (the seeds) and of the pages they link to."""
    model = web.model
    homes = {h.pages[0] for h in model.normal_hosts}
    src, dst = model.edges()
    near = homes | {int(d) for s, d in zip(src.tolist(), dst.tolist()) if s in homes}
    return {web.url_of(model.pages[p].host, model.pages[p].path) for p in near}


def _crawl_daily(crawler: Crawler, store: MetadataStore, app: App, web: SyntheticWeb,
                 clock: Any, rounds: int) -> list[str]:
    """The whole web once from its seeds, then ``rounds`` days: each re-reads the sitemaps
    first (urgent), then refreshes every listed page (feeds included). Returns those URLs."""
    restore_frontier(store, crawler, True)
    queue_seeds(crawler.frontier, app.config.seeds)
    crawler.run()
    pages = list(_listed(web))
    for _ in range(rounds):
        clock.advance(DAY)
        crawler.publication.reread(crawler.frontier, clock.now())
        crawler.frontier.submit(Source.REFRESH, pages, REFRESH)
        crawler.run()
    return pages


def _rates(db: Path) -> dict[str, float]:
    conn = sqlite3.connect(db)
    try:
        return {u: r for u, r in conn.execute("SELECT url, rate FROM urls WHERE rate IS NOT NULL")}
    finally:
        conn.close()


def test_honest_sitemap_dates_beat_signatures_alone(tmp_path: Path, app_for,
                                                    stepped_clock) -> None:
    spec = WebSpec(seed=21, n_hosts=8, n_pages=320, hostile=frozenset(), sitemap_share=1.0,
                   sitemap_honest_share=0.5, reliable_lm_share=0.0, robots_missing_share=0.0, xml_share=0.0,
                   disallow_share=0.0, crawl_delay_share=0.0, static_share=0.0,
                   change_rate_mean=1.0 / DAY, change_rate_shape=2.0)
    clock = stepped_clock(1.7e9)
    rounds = 8
    with SyntheticWeb(spec, clock) as web:
        # The web's pages are born at arbitrary ages; after ten days of changes, a page's
        # last change is that of a Poisson process in its steady state (what a crawler meets).
        clock.advance(10 * DAY)
        app = app_for(tmp_path, web, clock, delay_s=0.0, extra=["refresh.time_unit_s=86400"])
        with app.open_store() as store:
            parts = build_crawler(app, store)
            crawler = parts.crawler
            try:
                _crawl_daily(crawler, store, app, web, clock, rounds)
                snap = crawler.snapshot()["publication"]
            finally:
                parts.close()
            _plan(app, store)
        rates = _rates(tmp_path / "xyro.db")
        errors: dict[bool, list[float]] = {True: [], False: []}
        for host in web.model.normal_hosts:
            for p in host.pages:
                url = web.url_of(host.index, web.model.pages[p].path)
                true = web.model.pages[p].rate
                if url in rates and true > 0:
                    errors[host.sitemap_honest].append(abs(rates[url] - true) / true)
    honest, lying = statistics.median(errors[True]), statistics.median(errors[False])
    figures = {"median_relative_error_honest_sitemaps": honest,
               "median_relative_error_lying_sitemaps": lying,
               "pages": {"honest": len(errors[True]), "lying": len(errors[False])},
               "rounds": rounds, "publication": snap}
    (tmp_path / "publication_medians.json").write_text(json.dumps(figures, indent=1))
    print("publication medians:", json.dumps(figures))
    honest_hosts = sum(h.sitemap_honest for h in web.model.normal_hosts if h.sitemap)
    assert snap["trusted_sources"] == honest_hosts, figures  # one sitemap each
    assert honest < lying, figures


def _plan(app: App, store: MetadataStore) -> None:
    """One unit of the refresh planner: rates estimated and written (DESIGN.md §6)."""
    conn = store.read_connection()
    try:
        with store.writer(now=app.clock.now) as writer:
            RefreshPlanner(conn, writer.submit, app.clock,
                           PlannerSettings.from_config(app.config.refresh)).run_unit()
    finally:
        conn.close()


def test_a_feed_does_not_borrow_the_trust_of_its_hosts_sitemap(tmp_path: Path, app_for,
                                                              stepped_clock) -> None:
    """Trust is kept per sitemap or feed, and a date that never moves does not earn it: every
    host here has an honest sitemap, and its Atom feeds date every entry 2026-01-01
    (synthweb.content). Keyed by host, the sitemap's trust made the feed's date a page's
    change date (166 observations on the old code), and a page looked unchanged since
    January; now that date is never recorded."""
    spec = WebSpec(seed=23, n_hosts=4, n_pages=240, hostile=frozenset(), sitemap_share=1.0,
                   sitemap_honest_share=1.0, reliable_lm_share=0.0, robots_missing_share=0.0,
                   xml_share=0.5, disallow_share=0.0, crawl_delay_share=0.0,
                   static_share=0.0, change_rate_mean=1.0 / DAY, change_rate_shape=2.0)
    frozen = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    clock = stepped_clock(1.8e9)  # 2027: the feeds' date lies in the past
    with SyntheticWeb(spec, clock) as web:
        clock.advance(10 * DAY)
        app = app_for(tmp_path, web, clock, delay_s=0.0, extra=["refresh.time_unit_s=86400"])
        atom = [web.url_of(p.host, p.path) for p in web.model.pages if p.kind == "atom"]
        with app.open_store() as store:
            parts = build_crawler(app, store)
            crawler = parts.crawler
            try:
                pages = _crawl_daily(crawler, store, app, web, clock, 4)
                snap = crawler.snapshot()["publication"]
                by_feed = sum(1 for url in pages
                              if (listing := crawler.publication.dates.listing(url))
                              and listing.published == frozen)
            finally:
                parts.close()
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        recorded = conn.execute("SELECT count(*) FROM observations WHERE last_modified = ?",
                                (frozen,)).fetchone()[0]
    finally:
        conn.close()
    assert atom and by_feed > 0, "the web should have Atom feeds listing pages"
    assert snap["trusted_sources"] >= 1, snap
    assert recorded == 0, f"{recorded} observations took the feed's frozen date ({snap})"
