"""Seeds added with ``xyro seed`` bound a scope derived from the seeds, and reach a running
daemon (DESIGN.md §2; :mod:`xyro.service.seeding`, :mod:`metadata.seeds`).

With ``seeds: []`` and no ``scope.allowed_domains`` the scope is "the hosts of the seeds";
it used to be built from the configuration alone, so the seeds of ``xyro seed`` left it
empty (every host in scope), and a configured seed added later made it refuse, for good,
the queued URLs of the stored ones. Three hosts on the loopback: 127.0.0.1 and 127.0.0.3
are seeded, 127.0.0.2 is only linked to. Checked from the servers' own request logs.
"""

from __future__ import annotations

import logging
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from metadata import MetadataError, MetadataStore
from xyro.app import App
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.service.crawl_run import SEED_POLL_S, run_crawl


class Host:
    """A threaded HTTP server on ``ip``: ``/`` links to ``links``, ``/a.html`` to nothing."""

    def __init__(self, ip: str, links: tuple[str, ...] = ()) -> None:
        self.requests: list[str] = []
        log = self.requests
        body = ("<html><body>" + "".join(f'<a href="{u}">x</a>' for u in (*links, "/a.html"))
                + "</body></html>").encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                log.append(self.path)
                page = body if self.path == "/" else b"<html><body>leaf</body></html>"
                found = self.path in ("/", "/a.html")
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page) if found else 0))
                self.end_headers()
                if found:
                    self.wfile.write(page)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((ip, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{ip}:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def pages(self) -> list[str]:
        return [p for p in self.requests if p != "/robots.txt"]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def hosts() -> Iterator[tuple[Host, Host, Host]]:
    outside = Host("127.0.0.2")
    seeded = Host("127.0.0.1", links=(f"{outside.url}/",))
    later = Host("127.0.0.3", links=(f"{outside.url}/",))
    yield seeded, outside, later
    for host in (seeded, outside, later):
        host.close()


def _config(tmp_path: Path, seeds: list[str]) -> Path:
    """One time unit of an hour: no refresh of a fetched page within a test."""
    config = tmp_path / "xyro.yaml"
    config.write_text(
        f"seeds: {seeds!r}\n"
        "scope: {allow_private_addresses: true}\n"
        "crawler: {workers: 2, politeness: {delay_s: 0.005}}\n"
        "refresh: {time_unit_s: 3600, bandwidth_pages_per_unit: 500}\n"
        f"storage: {{database: '{tmp_path / 'xyro.db'}', warehouse_dir: '{tmp_path / 'w'}'}}\n")
    return config


def _app(config: Path) -> App:
    return App(load_config(config, {}, []), WallClock())


def _command(config: Path) -> list[str]:
    return [sys.executable, "-m", "xyro", "-c", str(config)]


def _xyro(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_command(config), *args], capture_output=True, text=True,
                          timeout=60)


def _init(config: Path) -> App:
    app = _app(config)
    app.open_store(create=True).close()  # `xyro init`
    return app


def test_cli_seeds_bound_a_scope_derived_from_no_configured_seed(
        hosts: tuple[Host, Host, Host], tmp_path: Path) -> None:
    seeded, outside, _later = hosts
    config = _config(tmp_path, [])
    _init(config)
    before = time.time()
    added = _xyro(config, "seed", "--priority", "2", f"{seeded.url}/")
    assert added.returncode == 0 and added.stdout.startswith("queued 1 URL"), added.stderr
    with sqlite3.connect(tmp_path / "xyro.db") as conn:   # v_frontier's oldest_enqueued
        (enqueued,) = conn.execute("SELECT enqueued_at FROM frontier").fetchone()
    assert before - 1 <= enqueued <= time.time(), enqueued
    summary = run_crawl(_app(config), max_seconds=60)
    assert summary.stop_reason == "frontier exhausted"
    assert sorted(seeded.pages()) == ["/", "/a.html"]
    assert outside.requests == [], "a host no seed names was crawled"
    with sqlite3.connect(tmp_path / "xyro.db") as conn:
        assert conn.execute("SELECT type FROM urls WHERE url = ?",
                            (f"{outside.url}/",)).fetchone() == ("refused",)
        assert conn.execute("SELECT url, priority FROM seeds").fetchall() == [
            (f"{seeded.url}/", 2)]
    status = _xyro(config, "status")
    assert "seeds        1 added with `xyro seed` (table seeds)" in status.stdout, status.stdout


def test_a_configured_seed_added_later_keeps_the_stored_seeds_in_scope(
        hosts: tuple[Host, Host, Host], tmp_path: Path) -> None:
    seeded, outside, later = hosts
    first = _config(tmp_path, [])
    _init(first)
    assert _xyro(first, "seed", f"{seeded.url}/").returncode == 0
    # The operator then configures another seed before the first crawl.
    summary = run_crawl(_app(_config(tmp_path, [f"{later.url}/"])), max_seconds=60)
    assert summary.stop_reason == "frontier exhausted"
    assert sorted(seeded.pages()) == ["/", "/a.html"], "the stored seed's queue was refused"
    assert sorted(later.pages()) == ["/", "/a.html"]
    assert outside.requests == []


def test_seeds_added_while_the_daemon_runs_are_crawled_without_a_restart(
        hosts: tuple[Host, Host, Host], tmp_path: Path) -> None:
    seeded, outside, later = hosts
    config = _config(tmp_path, [f"{seeded.url}/"])
    daemon = subprocess.Popen([*_command(config), "run"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        _wait_for(lambda: "/a.html" in seeded.pages(), 60, "the daemon's first pages")
        added = _xyro(config, "seed", f"{later.url}/")
        assert added.returncode == 0, added.stderr
        assert f"running crawler (process {daemon.pid})" in added.stdout, added.stdout
        _wait_for(lambda: "/a.html" in later.pages(), 30, "the new seed's pages")
        # A URL seeded again is queued again, as with no crawler running: fetched anew.
        assert _xyro(config, "seed", f"{seeded.url}/").returncode == 0
        _wait_for(lambda: seeded.pages().count("/") == 2, 30, "the seed fetched again")
        daemon.send_signal(signal.SIGTERM)
        _out, err = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0 and "Traceback" not in err, err
    assert err.count("1 seeds added with `xyro seed` queued") == 2, err
    assert outside.requests == []
    with sqlite3.connect(tmp_path / "xyro.db") as conn:
        rows = conn.execute("SELECT url, count(*) FROM urls GROUP BY url HAVING count(*) > 1")
        assert rows.fetchall() == [], "a URL got two rows"
        assert conn.execute("SELECT type FROM urls WHERE url = ?",
                            (f"{later.url}/",)).fetchone() == ("html",)


def test_a_locked_database_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    holder = sqlite3.connect(path, isolation_level=None)
    with MetadataStore.open(path) as store:
        store.seeds()  # opens this thread's connection, whose wait we shorten
        store._conn().execute("PRAGMA busy_timeout = 50")
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(MetadataError, match=r"cannot store seeds in .*x\.db.*locked"):
                store.add_seeds(["http://a.example/"], 1, 0.0)
        finally:
            holder.execute("ROLLBACK")
        assert store.add_seeds(["http://a.example/"], 1, 0.0) == 1
    holder.close()


def test_a_url_seeded_again_comes_again_at_the_more_urgent_priority(tmp_path: Path) -> None:
    with MetadataStore.open(tmp_path / "x.db") as store:
        assert store.add_seeds(["http://a/", "http://b/"], 3, 1.0) == 2
        first = store.seeds()
        assert store.add_seeds(["http://b/", "http://c/", "http://c/"], 1, 2.0) == 1
        assert store.add_seeds(["http://a/"], 4, 3.0) == 0
        rows = store.seeds()
        assert [(s.url, s.priority) for s in rows] == [
            ("http://b/", 1), ("http://c/", 1), ("http://a/", 3)]
        assert rows[0].id < rows[1].id < rows[2].id
        # A crawler that read up to the first two rows reads the seeded-again ones.
        assert [s.url for s in store.seeds(after_id=first[-1].id)] == [
            "http://b/", "http://c/", "http://a/"]


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def moved_site(routed_site: Any) -> Callable[[Callable[[int], str]], Any]:
    """``moved_site(target)``: a site on 127.0.0.1 answering every page with a 301 to
    ``target(its port)``; ``.seed`` is its root URL. Closed after the test."""
    def make(target: Callable[[int], str]) -> Any:
        site = routed_site(lambda path: (301, {"Location": target(port)}, b""))
        port = int(site.base.rsplit(":", 1)[1])
        site.seed = site.base + "/"
        return site
    return make


def _with_scope(config: Path, keys: str) -> None:
    """Add ``keys`` (YAML flow mapping entries) to the scope of ``config``."""
    config.write_text(config.read_text().replace(
        "scope: {allow_private_addresses: true}",
        f"scope: {{allow_private_addresses: true, {keys}}}"))


def test_a_seed_redirected_out_of_a_configured_scope_is_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, moved_site: Any) -> None:
    """127.0.0.1 moves to localhost (as www.example.org to example.org): a configured scope
    is not widened, and the operator reads why the crawl did nothing."""
    moved = moved_site(lambda port: f"http://localhost:{port}/")
    config = _config(tmp_path, [moved.seed])
    _with_scope(config, "allowed_domains: ['127.0.0.1']")
    _init(config)
    with caplog.at_level(logging.WARNING, logger="xyro.crawl.redirects"):
        run_crawl(_app(config), max_seconds=30)
    said = [r.getMessage() for r in caplog.records if "redirects to" in r.getMessage()]
    assert len(said) == 1 and moved.seed in said[0] and "http://localhost:" in said[0]
    assert "scope.allowed_domains" in said[0], said


def test_where_a_seed_redirects_the_derived_scope_follows_across_a_restart(
        hosts: tuple[Host, Host, Host], tmp_path: Path, moved_site: Any) -> None:
    """The seed on 127.0.0.1 moved to 127.0.0.2 (as example.org to www.example.org): the
    target's host joins the scope derived from the seeds, as a seed stored in the database,
    so a crawl stopped before the new host's pages resumes them (a scope rebuilt from the
    configuration alone would hold them back as refused). 127.0.0.3, linked from there,
    stays out."""
    seeded, target, later = hosts   # here: target links to nothing but /a.html
    away = Host("127.0.0.2", links=(f"{later.url}/",))
    moved = moved_site(lambda port: f"{away.url}/")
    try:
        config = _config(tmp_path, [moved.seed])
        _init(config)
        # The seed's 301 and the target's page, then a stop (the operator's restart).
        first = run_crawl(_app(config), max_pages=2, max_seconds=60)
        assert first.stop_reason == "page budget reached", first.stop_reason
        assert away.pages() == ["/"]
        second = run_crawl(_app(config), max_seconds=60)
        assert second.stop_reason == "frontier exhausted", second.stop_reason
    finally:
        away.close()
    assert sorted(away.pages()) == ["/", "/a.html"]
    assert later.requests == [] and seeded.requests == [] and target.requests == []
    with sqlite3.connect(tmp_path / "xyro.db") as conn:
        assert conn.execute("SELECT url, redirected_from FROM seeds").fetchall() == [
            (f"{away.url}/", moved.seed)]
    status = _xyro(config, "status")
    assert "seeds        0 added with `xyro seed`, 1 found where a seed redirected " \
        "(table seeds)" in status.stdout, status.stdout


def test_a_running_daemon_fetches_a_seed_s_redirect_target_once(
        hosts: tuple[Host, Host, Host], tmp_path: Path, moved_site: Any) -> None:
    """The daemon reads the seeds stored while it runs (`xyro seed`'s, queued even if
    known); the one it stored itself for a seed's redirect is already queued, and is not
    fetched a second time."""
    _seeded, _target, later = hosts
    away = Host("127.0.0.2", links=(f"{later.url}/",))
    moved = moved_site(lambda port: f"{away.url}/")
    config = _config(tmp_path, [moved.seed])
    daemon = subprocess.Popen([*_command(config), "run"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: "/a.html" in away.pages(), 60, "the redirect target's pages")
        time.sleep(2 * SEED_POLL_S)   # two looks at the seeds table
        daemon.send_signal(signal.SIGTERM)
        _out, err = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
        away.close()
    assert daemon.returncode == 0 and "Traceback" not in err, err
    assert f"seed {moved.seed} redirects to {away.url}/: that host joins the scope" in err
    assert sorted(away.pages()) == ["/", "/a.html"]
    assert later.requests == []


def test_a_seed_s_redirect_target_refused_before_is_fetched_once_the_seed_moves(
        hosts: tuple[Host, Host, Host], tmp_path: Path, moved_site: Any) -> None:
    """127.0.0.2/ was linked, and refused, before a new seed redirected to it: the scope
    that now holds its host queues it again (a known URL is otherwise skipped for good)."""
    seeded, outside, _later = hosts
    moved = moved_site(lambda port: f"{outside.url}/")
    _init(_config(tmp_path, [f"{seeded.url}/"]))
    run_crawl(_app(_config(tmp_path, [f"{seeded.url}/"])), max_seconds=60)
    assert outside.requests == []   # refused: out of the seeds' hosts
    summary = run_crawl(_app(_config(tmp_path, [f"{seeded.url}/", moved.seed])),
                        max_seconds=60)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert sorted(outside.pages()) == ["/", "/a.html"]


def test_a_seed_redirected_to_a_url_the_admission_refuses_widens_nothing(
        hosts: tuple[Host, Host, Host], tmp_path: Path, moved_site: Any) -> None:
    _seeded, outside, _later = hosts
    moved = moved_site(lambda port: f"{outside.url}/report.pdf")   # crawler.skip_suffixes
    config = _config(tmp_path, [moved.seed])
    _init(config)
    run_crawl(_app(config), max_seconds=60)
    assert outside.requests == []
    with sqlite3.connect(tmp_path / "xyro.db") as conn:
        assert conn.execute("SELECT count(*) FROM seeds").fetchone() == (0,)


def test_a_redirect_keeps_the_depth_of_the_url_it_replaces(
        hosts: tuple[Host, Host, Host], tmp_path: Path, moved_site: Any) -> None:
    """With scope.max_depth 0 a seed's own redirect (http to https, to www.) is still the
    seed: a redirect is no link."""
    _seeded, outside, _later = hosts
    moved = moved_site(lambda port: f"{outside.url}/")
    config = _config(tmp_path, [moved.seed])
    _with_scope(config, "max_depth: 0")
    _init(config)
    run_crawl(_app(config), max_seconds=60)
    assert outside.pages() == ["/"]   # the target, at depth 0; its links are at depth 1
