"""Refused links are never fetched, by any path: the crawl, ``xyro plan --run``, ``xyro run``.

An in-scope site (127.0.0.1) links to a host the scope does not allow (127.0.0.2), to a
calendar whose next-month chain runs deeper than ``scope.max_depth``, to an ``/a/b/a/b/...``
loop, to a URL a deny pattern excludes and to a picture. The links stay in the link graph
(for ranking) but the store marks them ``refused``; the refresh planner's discovery share
once took every unread row, so the planner paths fetched them. Checked from the two servers'
own request logs (DESIGN.md §2: every producer passes the frontier's one admission).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from xyro.app import App
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.service.crawl_run import run_crawl

MAX_DEPTH = 16
#: The calendar's first month is linked from the seed (depth 1): month k is at depth k.
FIRST_YEAR = 2001
REPEATS = 3  # crawler.traps.max_repeated_segments (the default)


class Site:
    """A threaded HTTP server on ``host`` serving ``page(path)``, logging every request."""

    def __init__(self, host: str, page: Callable[[str], bytes | None]) -> None:
        self.requests: list[str] = []
        lock = threading.Lock()
        log = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                with lock:
                    log.append(self.path)
                body = page(self.path)
                self.send_response(404 if body is None else 200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def pages(self) -> list[str]:
        return [p for p in self.requests if p != "/robots.txt"]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _html(*links: str) -> bytes:
    return ("<html><body>" + "".join(f'<a href="{u}">{u}</a>' for u in links)
            + "</body></html>").encode()


def _month(k: int) -> str:
    """The k-th calendar page (k = 1 is January of FIRST_YEAR)."""
    year, month = divmod(k - 1, 12)
    return f"/cal/{FIRST_YEAR + year}/{month + 1:02d}.html"


@pytest.fixture(scope="module")
def web() -> Iterator[tuple[Site, Site]]:
    outside = Site("127.0.0.2", lambda path: _html("/more.html")
                   if path in ("/secret.html", "/more.html") else None)
    secret = f"{outside.url}/secret.html"

    def inside(path: str) -> bytes | None:
        if path == "/":
            return _html("/about.html", secret, _month(1), "/loop/a/b/", "/private/x.html",
                         "/pic.png")
        if path in ("/about.html", "/private/x.html"):
            return _html("/")
        if path.startswith("/cal/"):
            year, month = path[len("/cal/"):-len(".html")].split("/")
            k = (int(year) - FIRST_YEAR) * 12 + int(month)
            return _html(_month(k + 1))  # next month, for ever
        if path.startswith("/loop/"):
            return _html("a/b/")  # relative: /loop/a/b/ → /loop/a/b/a/b/ → ...
        return None

    site = Site("127.0.0.1", inside)
    yield site, outside
    site.close()
    outside.close()


def _config(tmp_path: Path, site: Site) -> Path:
    config = tmp_path / "xyro.yaml"
    config.write_text(
        f'seeds: ["{site.url}/"]\n'
        f"scope: {{allow_private_addresses: true, max_depth: {MAX_DEPTH}, "
        "deny_patterns: ['/private/']}\n"
        f"crawler: {{workers: 4, traps: {{max_repeated_segments: {REPEATS}}}, "
        "politeness: {delay_s: 0.005}}\n"
        # A short unit and a large discovery share: the planner takes every unread row.
        "refresh: {time_unit_s: 1, bandwidth_pages_per_unit: 500, discovery_share: 0.8}\n"
        "ranking: {schedule_s: 1}\n"
        f"storage: {{database: '{tmp_path / 'xyro.db'}', warehouse_dir: '{tmp_path / 'w'}'}}\n")
    return config


def _xyro(config: Path, *args: str, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xyro", "-c", str(config), *args],
                          capture_output=True, text=True, timeout=120, **kw)


def _refused_urls(site: Site, outside: Site) -> dict[str, str]:
    """Each refused URL → the word its refusal reason must contain."""
    loop = "/loop/" + "a/b/" * (REPEATS + 1)
    return {f"{outside.url}/secret.html": "outside the allowed domains",
            f"{site.url}{_month(MAX_DEPTH + 1)}": f"exceeds scope.max_depth {MAX_DEPTH}",
            f"{site.url}{loop}": "repeats more than",
            f"{site.url}/private/x.html": "deny pattern",
            f"{site.url}/pic.png": "skip_suffixes"}


def _store(db: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(url → type, url → detail of its 'refused' errors row)."""
    conn = sqlite3.connect(db)
    try:
        types = dict(conn.execute("SELECT url, type FROM urls"))
        reasons = dict(conn.execute("SELECT u.url, e.detail FROM errors e JOIN urls u "
                                    "ON u.id = e.url_id WHERE e.kind = 'refused'"))
        queued = [u for (u,) in conn.execute("SELECT u.url FROM frontier f JOIN urls u "
                                             "ON u.id = f.url_id")]
    finally:
        conn.close()
    types["<queued>"] = ",".join(queued)
    return types, reasons


def _never_fetched(site: Site, outside: Site) -> None:
    assert outside.requests == [], "the out-of-scope host was contacted"
    pages = site.pages()
    assert not [p for p in pages if p.startswith("/private/") or p.endswith(".png")], pages
    assert max(p.count("a/b/") for p in pages if p.startswith("/loop/")) == REPEATS
    months = [p for p in pages if p.startswith("/cal/")]
    assert _month(MAX_DEPTH) in months and _month(MAX_DEPTH + 1) not in months, months


@pytest.fixture(scope="module")
def crawled(web: tuple[Site, Site], tmp_path_factory: pytest.TempPathFactory):
    site, outside = web
    tmp_path = tmp_path_factory.mktemp("scope-hole")
    config = _config(tmp_path, site)
    assert _xyro(config, "init").returncode == 0
    summary = run_crawl(App(load_config(config, {}, []), WallClock()), max_seconds=120)
    assert summary.stop_reason == "frontier exhausted"
    return site, outside, config, tmp_path / "xyro.db"


def test_the_crawl_refuses_and_marks_them(crawled) -> None:
    site, outside, _config_path, db = crawled
    _never_fetched(site, outside)
    types, reasons = _store(db)
    for url, why in _refused_urls(site, outside).items():
        assert types.get(url) == "refused", (url, types.get(url))
        assert why in reasons[url], (url, reasons[url])
    # Link targets all the same: the seed's child list names them, for ranking.
    assert types[f"{site.url}/"] == "html" and types["<queued>"] == ""
    assert "unread" not in types.values()


def _stderr_until(proc: subprocess.Popen, text: str, count: int, timeout_s: float) -> str:
    """``proc``'s stderr read line by line until ``text`` was seen ``count`` times (or the
    process ended, or ``timeout_s`` real seconds passed: the caller's asserts then say so)."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if sum(text in x for x in lines) >= count:
                seen.set()
                return
        seen.set()
    threading.Thread(target=read, daemon=True).start()
    seen.wait(timeout_s)
    return "".join(lines)


def test_plan_run_and_the_daemon_never_fetch_them(crawled) -> None:
    site, outside, config, db = crawled
    before = len(site.requests)
    planned = _xyro(config, "plan", "--run", "--json")
    assert planned.returncode == 0, planned.stderr
    planned_queue = set(filter(None, _store(db)[0]["<queued>"].split(",")))
    done = _xyro(config, "crawl")
    assert done.returncode == 0, done.stderr
    daemon = subprocess.Popen([sys.executable, "-m", "xyro", "-c", str(config), "run"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # Several planner units (refresh.time_unit_s: 1) once the daemon runs: a start
        # slowed by a busy machine must not turn into a stop while starting.
        err = _stderr_until(daemon, "refresh unit planned", count=3, timeout_s=120.0)
        daemon.send_signal(signal.SIGTERM)
        err += daemon.communicate(timeout=60)[1]
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0, err
    assert "refresh unit planned" in err and "Traceback" not in err, err
    assert len(site.requests) > before, "the planner paths fetched nothing at all"
    _never_fetched(site, outside)
    assert not planned_queue & set(_refused_urls(site, outside)), planned_queue
    types, _ = _store(db)
    assert all(types.get(url) == "refused" for url in _refused_urls(site, outside))


def test_xyro_seed_goes_through_the_same_admission(web: tuple[Site, Site],
                                                   tmp_path: Path) -> None:
    site, _outside = web
    config = _config(tmp_path, site)
    assert _xyro(config, "init").returncode == 0
    refused = _xyro(config, "seed", f"{site.url}/about.html", f"{site.url}/private/y.html")
    assert refused.returncode == 2, refused.stderr
    assert "/private/y.html" in refused.stderr and "deny pattern" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    types, _ = _store(tmp_path / "xyro.db")
    assert types["<queued>"] == ""  # nothing queued, not even the good one
    queued = _xyro(config, "seed", f"{site.url}/about.html")
    assert queued.returncode == 0, queued.stderr
    assert _store(tmp_path / "xyro.db")[0]["<queued>"] == f"{site.url}/about.html"
