"""An origin whose robots.txt cannot be reached keeps its queued URLs: robots.txt is retried
with the host's back-off, and the URLs fail only after repeated failures over hours, as
Heritrix retries a failed prerequisite before failing the URIs that wait on it
(xyro.crawl.retry_policy.PrerequisiteRetries). Real HTTP servers and refused connections on
127.0.0.1, real SQLite store; an accelerated clock (×600) lets the retry periods pass in
fractions of a second."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from xyro.app import App
from xyro.clock import AcceleratedClock, Clock, WallClock
from xyro.config_load import load_config
from xyro.crawl.robots_answers import ORIGIN_UNREACHABLE
from xyro.records import FetchResult
from xyro.service.crawl_run import run_crawl

PAGES = [f"/p{i}.html" for i in range(5)]
RETRY_S = 60.0   # crawler.politeness.robots_unreachable_retry_s in these tests
ATTEMPTS = 4     # CrawlSettings.max_retries (3) retries after the first failure


class Site:
    """Pages on 127.0.0.1:``port``; ``/slow.html`` answers only once ``release`` is set;
    ``robots_headers`` are sent with robots.txt (a broken Content-Encoding, say)."""

    def __init__(self, port: int = 0) -> None:
        self.paths: list[str] = []
        self.robots_headers: dict[str, str] = {}
        self.slow_started = threading.Event()
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                site.paths.append(self.path)
                body, kind = b"<html><body>page</body></html>", "text/html"
                if self.path == "/robots.txt":
                    body, kind = b"User-agent: *\nAllow: /\n", "text/plain"
                elif self.path == "/slow.html":
                    site.slow_started.set()
                    site.release.wait(5.0)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", kind)
                    if self.path == "/robots.txt":
                        for name, value in site.robots_headers.items():
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sites() -> Iterator[Callable[[int], Site]]:
    """``sites(port)``: a Site serving on ``port`` (0: any), shut down after the test."""
    made: list[Site] = []

    def make(port: int = 0) -> Site:
        made.append(Site(port))
        return made[-1]
    yield make
    for site in made:
        site.close()


def _closed_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _app(tmp_path: Path, clock: Clock, seeds: list[str]) -> App:
    config = load_config(None, {}, [
        f"seeds={json.dumps(seeds)}", "scope.allow_private_addresses=true",
        "crawler.politeness.delay_s=0", "crawler.workers=4",
        f"crawler.politeness.robots_unreachable_retry_s={RETRY_S}",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}"])
    app = App(config, clock)
    with app.open_store(create=True):
        pass
    return app


def _watch_robots(clock: Clock, port: int, tries: list[tuple[float, str | None]],
                  after: Callable[[int], None]) -> Callable[[Any], None]:
    """A ``customize`` hook: the real robots.txt fetcher, each fetch of 127.0.0.1:``port``
    noted in ``tries`` (clock time, error kind) and followed by ``after(tries so far)``."""
    def customize(parts: Any) -> None:
        fetch = parts.crawler._items._fetch_robots

        def noted(url: str, **kwargs: Any) -> FetchResult:
            result = fetch(url, **kwargs)
            if f":{port}/" in url:
                kind = result.error_kind.value if result.error_kind is not None else None
                tries.append((clock.now(), kind))
                after(len(tries))
            return result
        parts.crawler._items._fetch_robots = noted
    return customize


def _store(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_urls_wait_for_a_refused_robots_txt_and_are_fetched_when_the_host_is_back(
        tmp_path: Path, sites: Callable[[int], Site]) -> None:
    clock = AcceleratedClock(WallClock().now(), 600.0)
    port = _closed_port()
    base = f"http://127.0.0.1:{port}"
    started: list[Site] = []
    tries: list[tuple[float, str | None]] = []

    def back_after_two_refusals(n: int) -> None:
        if n == 2:   # the server comes up between the 2nd and the 3rd robots.txt try
            started.append(sites(port))
    app = _app(tmp_path, clock, [base + p for p in PAGES])
    summary = run_crawl(app, max_seconds=4 * 3600,
                        customize=_watch_robots(clock, port, tries, back_after_two_refusals))

    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert [kind for _, kind in tries] == ["connect", "connect", None], tries
    assert tries[1][0] - tries[0][0] >= RETRY_S   # the host waited out its retry period
    assert sorted(p for p in started[0].paths if p != "/robots.txt") == sorted(PAGES)
    db = tmp_path / "xyro.db"
    assert _store(db, "SELECT count(*) FROM errors") == [(0,)]
    assert _store(db, "SELECT type, count(*) FROM urls GROUP BY type") == [("html", len(PAGES))]


def test_urls_of_an_origin_that_never_answers_fail_once_after_retries_over_hours(
        tmp_path: Path) -> None:
    clock = AcceleratedClock(WallClock().now(), 600.0)
    port = _closed_port()
    base = f"http://127.0.0.1:{port}"
    tries: list[tuple[float, str | None]] = []
    app = _app(tmp_path, clock, [base + p for p in PAGES])
    summary = run_crawl(app, max_seconds=24 * 3600,
                        customize=_watch_robots(clock, port, tries, lambda n: None))

    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    # No busy loop: ATTEMPTS tries, each at least a retry period after the last.
    assert [kind for _, kind in tries] == ["connect"] * ATTEMPTS, tries
    gaps = [b - a for (a, _), (b, _) in zip(tries, tries[1:])]
    assert all(g >= RETRY_S for g in gaps), gaps
    rows = _store(tmp_path / "xyro.db", "SELECT u.url, e.kind, e.detail FROM errors e "
                  "JOIN urls u ON u.id = e.url_id ORDER BY u.url")
    assert [url for url, _, _ in rows] == sorted(base + p for p in PAGES)  # each once
    for _, kind, detail in rows:
        assert kind == "connect"
        assert detail.startswith(ORIGIN_UNREACHABLE.format(base)), detail
        assert f"{ATTEMPTS} attempts over" in detail and "gave up" in detail, detail
    assert _store(tmp_path / "xyro.db", "SELECT count(*) FROM frontier") == [(0,)]
    # The host was tried (its robots.txt): the URLs are failed pages the refresh planner
    # retries later (urls.retry, counted from their last try), not lost for good.
    assert _store(tmp_path / "xyro.db", "SELECT count(*) FROM urls WHERE type = 'error' AND "
                  "retry = 1 AND last_access IS NOT NULL") == [(len(PAGES),)]


def test_a_robots_txt_with_a_broken_content_encoding_is_retried_then_fails_its_urls(
        tmp_path: Path, sites: Callable[[int], Site]) -> None:
    # An answer that cannot be read (plain text labelled gzip) is no robots.txt: the host
    # is kept out as when unreachable, and its URLs end as errors rows saying why, instead
    # of waiting, unrecorded, for as long as the crawl runs.
    clock = AcceleratedClock(WallClock().now(), 600.0)
    site = sites(0)
    site.robots_headers = {"Content-Encoding": "gzip"}
    port = int(site.base.rsplit(":", 1)[1])
    tries: list[tuple[float, str | None]] = []
    app = _app(tmp_path, clock, [site.base + p for p in PAGES])
    summary = run_crawl(app, max_seconds=2 * 3600,
                        customize=_watch_robots(clock, port, tries, lambda n: None))

    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert [kind for _, kind in tries] == ["encoding"] * ATTEMPTS, tries
    assert site.paths == ["/robots.txt"] * ATTEMPTS   # no page fetched without robots.txt
    rows = _store(tmp_path / "xyro.db", "SELECT e.kind, e.detail FROM errors e")
    assert len(rows) == len(PAGES), rows
    for kind, detail in rows:
        assert kind == "encoding"
        assert detail.startswith(ORIGIN_UNREACHABLE.format(site.base)), detail


def test_a_robots_txt_mislabelled_with_no_real_content_coding_is_read(
        tmp_path: Path, sites: Callable[[int], Site]) -> None:
    # "Content-Encoding: none" (or UTF-8) names no coding: the body is plain text, and the
    # host is crawled as its robots.txt says, not shut out as unreachable.
    clock = AcceleratedClock(WallClock().now(), 600.0)
    site = sites(0)
    site.robots_headers = {"Content-Encoding": "none"}
    app = _app(tmp_path, clock, [site.base + p for p in PAGES])
    summary = run_crawl(app, max_seconds=3600)

    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert sorted(p for p in site.paths if p != "/robots.txt") == sorted(PAGES)
    assert _store(tmp_path / "xyro.db", "SELECT count(*) FROM errors") == [(0,)]


def test_a_stop_during_a_failing_robots_txt_leaves_the_urls_queued_in_the_store(
        tmp_path: Path, sites: Callable[[int], Site]) -> None:
    clock = AcceleratedClock(WallClock().now(), 600.0)
    port = _closed_port()
    base = f"http://127.0.0.1:{port}"
    live = sites(0)   # its slow page is in flight when the stop comes: the loop goes on
    stop = threading.Event()
    tries: list[tuple[float, str | None]] = []

    def stop_on_last_try(n: int) -> None:
        if n == ATTEMPTS:   # the try that gives up on the origin: the operator's SIGTERM
            assert live.slow_started.wait(5.0)
            stop.set()
            threading.Timer(0.3, live.release.set).start()
    app = _app(tmp_path, clock, [base + p for p in PAGES] + [live.base + "/slow.html"])
    summary = run_crawl(app, max_seconds=24 * 3600, stop=stop,
                        customize=_watch_robots(clock, port, tries, stop_on_last_try))

    assert summary.stop_reason == "stop requested", summary.stop_reason
    assert len(tries) == ATTEMPTS, tries
    db = tmp_path / "xyro.db"
    assert _store(db, "SELECT count(*) FROM errors") == [(0,)]
    queued = _store(db, "SELECT u.url FROM frontier f JOIN urls u ON u.id = f.url_id")
    assert {base + p for p in PAGES} <= {url for url, in queued}

