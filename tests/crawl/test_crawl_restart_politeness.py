"""A restart keeps each host's delay (DESIGN.md §7): the first request of a new process,
robots.txt included, comes no sooner after the last request of the one before than the
delay allows, so a crash loop under systemd's Restart= cannot hammer a host. Real HTTP
server on 127.0.0.1 (its own request times), real crawls, real SQLite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

DELAY_S = 1.0


def _chain(path: str) -> tuple[int, dict[str, str], bytes]:
    """/p{i} links to /p{i+1}."""
    return 200, {}, f'<html><a href="/p{int(path[2:]) + 1}">next</a></html>'.encode()


def _gaps(arrivals: list[tuple[float, str]]) -> list[float]:
    starts = [t for t, _ in arrivals]
    return [later - earlier for earlier, later in zip(starts, starts[1:])]


def test_a_restart_waits_the_delay_since_the_last_request(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(_chain)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                        f"crawler.politeness.delay_s={DELAY_S}")
    for _ in range(3):   # three processes in a row, as a crash loop starts them
        run_crawl(app, max_pages=1)
    assert [path for _, path in site.arrivals] == [
        "/robots.txt", "/p0", "/robots.txt", "/p1", "/robots.txt", "/p2"], site.arrivals
    gaps = _gaps(site.arrivals)
    assert min(gaps) >= DELAY_S - 0.05, gaps


def test_a_restart_waits_the_delay_since_a_last_request_for_robots_txt(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    # A process stopped before the host's first page was due (`xyro crawl --seconds` from
    # cron, a crash loop): its last request was robots.txt, and the next one waits from it.
    delay_s = 2.5   # the first page is not due before the first process stops
    site = routed_site(_chain, robots="User-agent: *\nAllow: /\n")
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                        f"crawler.politeness.delay_s={delay_s}")
    run_crawl(app, max_seconds=1.0)
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        (last_fetch,), = conn.execute("SELECT last_fetch FROM hosts")
    finally:
        conn.close()
    assert last_fetch is not None, "the robots.txt request is the host's last request"
    run_crawl(app, max_pages=1)
    assert [path for _, path in site.arrivals] == ["/robots.txt", "/robots.txt", "/p0"]
    gaps = _gaps(site.arrivals)
    assert min(gaps) >= delay_s - 0.05, gaps


def test_a_restart_waits_the_crawl_delay_since_the_last_request(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    # The host's Crawl-delay (1.5 s, above delay_s) is stored with it: the new process's
    # robots.txt request waits for it too, before robots.txt says it again.
    site = routed_site(_chain, robots="User-agent: *\nCrawl-delay: 1.5\n")
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                        "crawler.politeness.delay_s=0.1")
    for _ in range(2):
        run_crawl(app, max_pages=1)
    assert [path for _, path in site.arrivals] == ["/robots.txt", "/p0", "/robots.txt", "/p1"]
    gaps = _gaps(site.arrivals)
    assert min(gaps) >= 1.5 - 0.05, gaps


def test_a_restart_keeps_a_pause_the_host_asked_for(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    # A 503 with Retry-After: 2 (a site in maintenance), then a restart at once (a crawl run
    # from cron, a crash loop): the new process's first request, robots.txt included, waits
    # for the end of the pause, not just the delay.
    answered: list[str] = []

    def maintenance_once(path: str) -> tuple[int, dict[str, str], bytes]:
        answered.append(path)
        if len(answered) == 1:
            return 503, {"Retry-After": "2"}, b"<html>back soon</html>"
        return _chain(path)

    site = routed_site(maintenance_once)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                        "crawler.politeness.delay_s=0.1")
    run_crawl(app, max_seconds=0.5)
    run_crawl(app, max_pages=1)
    assert [path for _, path in site.arrivals] == [
        "/robots.txt", "/p0", "/robots.txt", "/p0"], site.arrivals
    paused_at = site.arrivals[1][0]
    assert site.arrivals[2][0] - paused_at >= 2.0 - 0.05, site.arrivals


def test_a_restart_after_a_kill_waits_the_delay_since_the_request_in_flight(
        tmp_path: Path, local_app_for: Any, routed_site: Any, kill_point: Any) -> None:
    # SIGKILL (an OOM kill) while /p1 is in flight leaves no record of that request; its
    # start is recorded when it is dispatched, so the restart (systemd's Restart=) does not
    # ask the host again before its delay.
    import threading

    from xyro.app import build_crawler
    from xyro.service.crawl_run import queue_seeds

    delay_s = 3.0   # longer than a restart takes, so that only the record makes it wait
    in_flight = threading.Event()

    def slow_chain(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/p1" and not in_flight.is_set():
            in_flight.set()
            threading.Event().wait(3.0)   # still answering when the process dies
        return _chain(path)

    site = routed_site(slow_chain)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/p0'])}",
                        f"crawler.politeness.delay_s={delay_s}")
    stop = threading.Event()
    with app.open_store() as store:
        parts = build_crawler(app, store)
        kill = kill_point(parts, stop, lambda op: False)
        queue_seeds(parts.crawler.frontier, app.config.seeds)

        def kill_when_in_flight() -> None:
            in_flight.wait(30)
            kill.kill()
        threading.Thread(target=kill_when_in_flight, daemon=True).start()
        parts.crawler.run(max_seconds=30, stop=stop)
        parts.close()
    run_crawl(app, max_pages=1)   # the restart: /p1 again, its record was never made
    assert site.requests == ["/p0", "/p1", "/p1"], site.requests
    # The restart's first request, robots.txt included, waits the delay from the killed one.
    killed = [t for t, path in site.arrivals].index(site.times[1])
    gap = site.arrivals[killed + 1][0] - site.arrivals[killed][0]
    assert gap >= delay_s - 0.05, (gap, site.arrivals)
