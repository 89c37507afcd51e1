"""Politeness (DESIGN.md §7), checked from the synthetic web's own request log.

Each rule is also run switched off, to show the check would catch a crawler without it.
Request starts are compared on the clock the rules are stated in, at the instants the
requests reached the server (the kernel's receive stamps, ``RequestRecord.arrival``), with
no tolerance beyond the error bound measured with each stamp. The handler threads' own
stamps are no measure of it: under load they lag the arrivals by up to a tenth of a second,
by different amounts, which once made requests sent 0.6 s apart look 0.484 s apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xyro.app import CrawlParts
from xyro.clock import WallClock
from xyro.service.crawl_run import run_crawl
from xyro.service.demo import audit, start_gap_violations
from xyro.synthweb.log import RequestRecord
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

DELAY_S = 0.3
CRAWL_DELAY_S = 0.6

SPEC = WebSpec(seed=11, n_hosts=6, n_pages=150, hostile=frozenset(), disallow_share=1.0,
               disallowed_page_share=0.2, crawl_delay_share=0.34,
               crawl_delays=(CRAWL_DELAY_S,), robots_missing_share=0.0)


def _crawl(tmp_path: Path, make_app, *, enforce: bool, obey_robots: bool = True,
           pages: int = 60) -> tuple[SyntheticWeb, object]:
    clock = WallClock()
    with SyntheticWeb(SPEC, clock) as web:
        app = make_app(tmp_path, web, clock, delay_s=DELAY_S, workers=6)

        def ignore_robots(parts: CrawlParts) -> None:
            # Pretend every host answered robots.txt 404 (allow all) before the crawl.
            now = clock.now()
            for seed in web.seeds:
                parts.crawler.frontier.robots.store(seed.rstrip("/"), 404, b"", now)

        run_crawl(app, max_pages=pages, max_seconds=60, enforce_politeness=enforce,
                  customize=None if obey_robots else ignore_robots)
        return web, audit(web, DELAY_S)


def test_spacing_and_robots_hold_from_the_server_log(tmp_path: Path, app_for) -> None:
    web, result = _crawl(tmp_path, app_for, enforce=True)
    assert result.requests >= 60
    assert web.crawl_delays(), "the web must have Crawl-delay hosts for this test to mean much"
    assert result.disallowed_fetched == ()
    assert result.politeness_violations == ()
    # robots.txt came first on every host that was visited at all.
    firsts: dict[tuple[str, int], str] = {}
    for r in sorted(web.log.requests(), key=lambda r: r.arrived):
        firsts.setdefault((r.host, r.port), r.target)
    assert set(firsts.values()) == {"/robots.txt"}
    # One request in flight per host: no two requests to a host overlap in real time. No
    # tolerance: a small reply's end is stamped before its one write, so a crawler waiting
    # for it cannot have the next request handled before that stamp.
    by_host: dict[tuple[str, int], list] = {}
    for r in web.log.requests():
        by_host.setdefault((r.host, r.port), []).append((r.start, r.end))
    for spans in by_host.values():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))


def test_spacing_check_fails_when_the_rule_is_off(tmp_path: Path, app_for) -> None:
    _web, result = _crawl(tmp_path, app_for, enforce=False)
    assert len(result.politeness_violations) > 10


def test_robots_check_fails_when_robots_txt_is_ignored(tmp_path: Path, app_for) -> None:
    _web, result = _crawl(tmp_path, app_for, enforce=True, obey_robots=False, pages=150)
    assert result.disallowed_fetched, "ignoring robots.txt must show in the server's log"


@pytest.mark.parametrize("gaps,expected", [([0.0, 0.3, 0.6], 0), ([0.0, 0.1, 0.6], 1)])
def test_gap_audit_counts_short_gaps(gaps: list[float], expected: int) -> None:
    recs = [RequestRecord(t, t, t, "127.0.0.2", 80, "GET", "/", 200, 0, None, None, None)
            for t in gaps]
    assert len(start_gap_violations(recs, 0.3, {})) == expected


@pytest.mark.parametrize("handled,arrived,error,expected", [
    ([0.05, 0.30], [0.0, 0.30], 0.0, 0),      # the first handler ran late: not the crawler
    ([0.00, 0.30], [0.0, 0.25], 0.0, 1),      # the second request did arrive early
    ([0.00, 0.30], [0.0, 0.299], 0.001, 0),   # short by less than the stamps' error bounds
    ([0.00, 0.30], [0.0, 0.297], 0.001, 1),   # short by more than both bounds
])
def test_gap_audit_judges_arrivals_within_their_error_bounds(
        handled: list[float], arrived: list[float], error: float, expected: int) -> None:
    recs = [RequestRecord(h, h, h, "127.0.0.2", 80, "GET", "/", 200, 0, None, None, None,
                          arrival=a, arrival_error=error) for h, a in zip(handled, arrived)]
    assert len(start_gap_violations(recs, 0.3, {})) == expected
