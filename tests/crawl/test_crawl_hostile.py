"""Every hostile page of the synthetic web ends as the right ERROR while the crawl goes on.

One crawl of a web holding every hostile case, on an accelerated clock (×100) so that
Retry-After pauses and robots.txt retry periods pass in seconds; fetch deadlines stay in
real time (2 s), which is what bounds the slow-drip page and the silent host.
"""

from __future__ import annotations

import json

import pytest

from xyro.clock import AcceleratedClock, WallClock
from xyro.service.crawl_run import run_crawl
from xyro.synthweb.spec import HOSTILE_KINDS, WebSpec
from xyro.synthweb.web import SyntheticWeb

SPEC = WebSpec(seed=5, n_hosts=8, n_pages=240, hostile=HOSTILE_KINDS, drip_interval=0.5,
               busy_seconds=300.0)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory, app_for_module, rows_of_module):
    tmp_path = tmp_path_factory.mktemp("hostile")
    clock = AcceleratedClock(WallClock().now(), 100.0)
    with SyntheticWeb(SPEC, clock) as web:
        app = app_for_module(tmp_path, web, clock, delay_s=1.0, workers=12, extra=[
            "crawler.limits.deadline_s=2", "crawler.limits.read_timeout_s=1",
            "crawler.limits.connect_timeout_s=1", "crawler.limits.dns_timeout_s=1",
            "crawler.limits.max_body_bytes=2000000", "crawler.limits.max_decoded_bytes=4000000",
            "loader.max_document_bytes=4000000",
            # The silent and refused hosts' robots.txt is retried before their pages fail
            # (xyro.crawl.retry_policy.PrerequisiteRetries): 4 tries, a few seconds here.
            "crawler.politeness.robots_unreachable_retry_s=30",
            # The silent and refused hosts are no seeds: put every host of the web in scope.
            f"scope.allowed_domains={json.dumps([h.address for h in web.model.hosts])}"])
        summary = run_crawl(app, max_seconds=2400.0)
        rows = rows_of_module(tmp_path / "xyro.db")
        yield web, rows, summary


def _row(crawled, name: str):
    web, rows, _ = crawled
    url = next(u for u, case in web.hostile_urls().items() if case.name == name)
    assert url in rows, f"{name}: {url} was never discovered"
    return rows[url]


@pytest.mark.parametrize("name,kind", [
    ("gzip_bomb", "too_large"), ("big_body", "too_large"), ("slow_drip", "timeout"),
    ("silent_host", "timeout"), ("refused_port", "connect"), ("redirect_loop", "redirect"),
    ("redirect_chain", "redirect"), ("gone", "http_status"),
])
def test_hostile_page_is_an_error_of_the_right_kind(crawled, name: str, kind: str) -> None:
    row = _row(crawled, name)
    assert (row["type"], row["error_kind"]) == ("error", kind), dict(row)


@pytest.mark.parametrize("name,page_type", [
    ("malformed_html", "html"), ("bad_utf8", "html"), ("bogus_charset", "html"),
    ("xml_as_text", "xml"), ("html_as_xml", "html"), ("busy_503", "html"),
])
def test_recoverable_page_gets_its_true_type(crawled, name: str, page_type: str) -> None:
    assert _row(crawled, name)["type"] == page_type


def test_redirect_chain_stops_after_five_hops(crawled) -> None:
    web, rows, _ = crawled
    chain = sorted(r.target for r in web.log.requests() if r.target.startswith("/h/chain/"))
    assert "/h/chain/6" in chain and "/h/chain/7" not in chain, chain
    sixth = next(u for u in rows if u.endswith("/h/chain/6"))
    assert "more than 5 redirects" in rows[sixth]["error_detail"]


def test_calendar_trap_costs_a_bounded_number_of_fetches(crawled) -> None:
    web, _, _ = crawled
    calendar = [r for r in web.log.requests() if r.target.startswith("/calendar/")]
    assert 0 < len(calendar) <= 40


def test_busy_page_was_retried_after_retry_after(crawled) -> None:
    web, _, _ = crawled
    busy = sorted((r.clock, r.status) for r in web.log.requests() if r.target == "/h/busy.html")
    assert busy[0][1] == 503 and busy[-1][1] == 200
    assert all(b[0] - a[0] >= 1.0 for a, b in zip(busy, busy[1:]))


def test_robots_500_host_gets_only_robots_requests(crawled) -> None:
    web, _, _ = crawled
    hosts = [h for h, case in web.hostile_hosts().items() if case.name == "robots_500"]
    assert hosts
    for host in hosts:
        targets = {r.target for r in web.log.requests(host=host)}
        assert targets == {"/robots.txt"}, targets


def test_malformed_robots_txt_still_protects_its_private_area(crawled) -> None:
    web, _, _ = crawled
    hosts = [h for h, case in web.hostile_hosts().items() if case.name == "robots_malformed"]
    for host in hosts:
        assert not [r for r in web.log.requests(host=host) if r.target.startswith("/private/")]


def test_the_crawl_went_on(crawled) -> None:
    web, rows, summary = crawled
    normal = [u for u in web.graph() if web.hostile_case(u) is None and not web.is_disallowed(u)]
    fetched = [u for u in normal if u in rows and rows[u]["type"] in ("html", "xml")]
    assert len(fetched) >= 0.6 * len(normal), (len(fetched), len(normal), summary.stats)
