"""Politeness, checked from the synthetic web's own request log (issue 3, bar 1).

Each rule is also run switched off, to show the check would catch a crawler without it.
Request starts are compared on the clock the rules are stated in. The server stamps a
request when its handler thread runs, a few milliseconds after the crawler sent it, and
that lag varies under load; ``SERVER_LAG_S`` is the tolerance for it (far below the delay,
and far above what a rule-breaking crawler produces: gaps of ~0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xyro.app import CrawlParts
from xyro.clock import WallClock
from xyro.crawl_run import run_crawl
from xyro.demo import audit, start_gap_violations
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

DELAY_S = 0.3
CRAWL_DELAY_S = 0.6
SERVER_LAG_S = 0.08

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
        return web, audit(web, DELAY_S, SERVER_LAG_S)


def test_spacing_and_robots_hold_from_the_server_log(tmp_path: Path, app_for) -> None:
    web, result = _crawl(tmp_path, app_for, enforce=True)
    assert result.requests >= 60
    assert web.crawl_delays(), "the web must have Crawl-delay hosts for this test to mean much"
    assert result.disallowed_fetched == ()
    assert result.politeness_violations == ()
    # robots.txt came first on every host that was visited at all.
    firsts: dict[tuple[str, int], str] = {}
    for r in sorted(web.log.requests(), key=lambda r: r.start):
        firsts.setdefault((r.host, r.port), r.target)
    assert set(firsts.values()) == {"/robots.txt"}
    # One request in flight per host: no two requests to a host overlap in real time.
    by_host: dict[tuple[str, int], list] = {}
    for r in web.log.requests():
        by_host.setdefault((r.host, r.port), []).append((r.start, r.end))
    for spans in by_host.values():
        spans.sort()
        assert all(b[0] >= a[1] - 1e-3 for a, b in zip(spans, spans[1:]))


def test_spacing_check_fails_when_the_rule_is_off(tmp_path: Path, app_for) -> None:
    _web, result = _crawl(tmp_path, app_for, enforce=False)
    assert len(result.politeness_violations) > 10


def test_robots_check_fails_when_robots_txt_is_ignored(tmp_path: Path, app_for) -> None:
    _web, result = _crawl(tmp_path, app_for, enforce=True, obey_robots=False, pages=150)
    assert result.disallowed_fetched, "ignoring robots.txt must show in the server's log"


@pytest.mark.parametrize("gaps,expected", [([0.0, 0.3, 0.6], 0), ([0.0, 0.1, 0.6], 1)])
def test_gap_audit_counts_short_gaps(gaps: list[float], expected: int) -> None:
    from xyro.synthweb.log import RequestRecord

    recs = [RequestRecord(t, t, t, "127.0.0.2", 80, "GET", "/", 200, 0, None, None, None)
            for t in gaps]
    assert len(start_gap_violations(recs, 0.3, {})) == expected
