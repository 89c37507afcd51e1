"""A robots.txt fetch that reached the host but left nothing to read — a redirect to a URL
no crawl may fetch, to a suffix the skip list refuses, any end but an answer or an
unreachable host — is unavailable: allow all (RFC 9309 §2.3.1.2), with an errors row on the
robots.txt URL saying why (xyro/crawl/robots_answers.py). Such outcomes used to disallow the
origin for an hour, again and again, its URLs never fetched nor recorded. Real HTTP server on
127.0.0.1, real crawl, real SQLite; the other outcomes through the dispatcher's own code."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from metadata import FetchRecord
from xyro.clock import ManualClock
from xyro.crawl.frontier import Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.publishing import PublicationChannel
from xyro.crawl.retry_policy import PrerequisiteRetries
from xyro.crawl.robots_answers import ROBOTS_ANSWERS, UNREACHABLE, RobotsAnswers
from xyro.crawl.stats import CrawlStats
from xyro.net.robots import RobotsCache
from xyro.records import ErrorKind, FetchResult
from xyro.service.crawl_run import run_crawl

PAGE = b"<html><body><a href='/a.html'>a</a></body></html>"


class RedirectingRobots:
    """A site whose robots.txt answers 301 to ``location`` (raw UTF-8 bytes, as a server
    writes them) and whose pages link to /a.html; ``paths`` lists the requests."""

    def __init__(self, location: str) -> None:
        self.paths: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                site.paths.append(self.path)
                if self.path == "/robots.txt":
                    self.send_response(301)
                    self.send_header("Location", location.encode().decode("latin-1"))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def site_redirecting_robots_to() -> Iterator[Any]:
    sites: list[RedirectingRobots] = []

    def make(location: str) -> RedirectingRobots:
        sites.append(RedirectingRobots(location))
        return sites[-1]
    yield make
    for site in sites:
        site.server.shutdown()
        site.server.server_close()


@pytest.mark.parametrize("location, kind", [
    ("http://☃.net/robots.txt", "redirect"),           # no IDNA2008 name: no crawlable URL
    ("http://*.example/robots.txt", "redirect"),
    ("/robots.pdf", "content_type"),                    # the skip list refuses the suffix
])
def test_a_robots_txt_that_cannot_be_followed_is_unavailable_and_says_so(
        location: str, kind: str, tmp_path: Path, local_app_for: Any,
        site_redirecting_robots_to: Any) -> None:
    site = site_redirecting_robots_to(location)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}")
    summary = run_crawl(app, max_seconds=15)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert site.paths == ["/robots.txt", "/", "/a.html"]   # allow all, and asked once
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        rows = conn.execute(
            "SELECT u.url, u.type, u.accesses, e.kind, e.http_status, e.detail "
            "FROM errors e JOIN urls u ON u.id = e.url_id").fetchall()
        assert conn.execute("SELECT count(*) FROM frontier").fetchone() == (0,)
    finally:
        conn.close()
    assert len(rows) == 1, rows
    url, page_type, accesses, error_kind, status, detail = rows[0]
    assert (url, page_type, accesses, error_kind, status) == \
        (site.base + "/robots.txt", "error", 0, kind, 301)
    assert f"robots.txt of {site.base} is unavailable" in detail
    assert "allowed all" in detail


@pytest.mark.parametrize("kind", sorted(set(ErrorKind) - ROBOTS_ANSWERS - UNREACHABLE))
def test_every_end_but_an_answer_or_an_unreachable_host_is_unavailable(kind: ErrorKind) -> None:
    clock = ManualClock()
    ops: list[Any] = []
    robots = RobotsCache("XyroTest", clock)
    frontier = Frontier(HostScheduler(0.0, clock), robots, clock, record=ops.append)
    answers = RobotsAnswers(frontier, PublicationChannel(), CrawlStats(), None,
                            PrerequisiteRetries(3), lambda *unfetched: None, threading.Event())
    frontier.push("http://h.example/a", 2)
    item = frontier.pop()
    assert item is not None and item.kind == "robots"
    answers.done(item, FetchResult(item.url, item.url, status=301, error_kind=kind,
                                   error_detail=f"what the fetcher said ({kind})"), clock.now())
    assert robots.state("http://h.example").kind == "allowed" and robots.allowed(
        "http://h.example/a")
    page = frontier.pop()
    assert page is not None and (page.kind, page.url) == ("fetch", "http://h.example/a")
    records = [op for op in ops if isinstance(op, FetchRecord)]
    assert len(records) == 1 and records[0].url == "http://h.example/robots.txt"
    assert (records[0].error_kind, records[0].requested) == (kind.value, False)
    assert f"what the fetcher said ({kind})" in records[0].error_detail
