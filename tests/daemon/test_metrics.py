"""The Prometheus endpoint (config ``metrics``): real crawls scraped over HTTP on 127.0.0.1.

Everything stays on loopback; waits poll with a deadline instead of sleeping.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from metadata import MetadataStore
from xyro.app import App
from xyro.clock import AcceleratedClock, ManualClock, WallClock
from xyro.config_load import ConfigError, load_config
from xyro.crawl.hosts import HostScheduler
from xyro.crawl.stats import CrawlStats
from xyro.jobs.plan_job import UnitFigures
from xyro.service.crawl_run import run_crawl
from xyro.service.metrics import JobFigures, MetricsEndpoint
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

# Three hosts, a 0.05 s delay: the crawl takes a few seconds, long enough to scrape twice.
SPEC = WebSpec(seed=11, n_hosts=3, n_pages=240, hostile=frozenset(), crawl_delay_share=0.0)
METRICS_LINE = re.compile(r"metrics on (http://127\.0\.0\.1:(\d+)/metrics)")
FORBIDDEN_LABELS = {"url", "host", "uri", "path", "origin", "domain"}

Families = dict[str, Any]


# -- helpers ---------------------------------------------------------------------------------

def scrape(url: str) -> Families:
    """GET /metrics (no proxy, loopback only) and parse it as Prometheus does."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families: Families, name: str, **labels: str) -> float:
    """Sum of the family's samples named ``name`` whose labels include ``labels``."""
    family = families[re.sub(r"_(total|bucket|count|sum)$", "", name)]
    return sum(s.value for s in family.samples if s.name == name
               and all(s.labels.get(k) == v for k, v in labels.items()))


def pages(families: Families) -> float:
    """Pages fetched; 0 before the crawler is wired (the endpoint serves build info first)."""
    if "xyro_pages_fetched" not in families:
        return 0.0
    return value(families, "xyro_pages_fetched_total")


def check_labels(families: Families) -> None:
    """Bounded label sets only: never a URL or a host (DESIGN.md §8)."""
    for family in families.values():
        assert family.name.startswith("xyro_"), family.name
        for sample in family.samples:
            assert not FORBIDDEN_LABELS & set(sample.labels), sample
            assert not any("://" in v or "127.0.0." in v for v in sample.labels.values()), sample


def poll(what: Callable[[], Any], deadline_s: float, message: str) -> Any:
    """``what()`` until it returns something true, every 50 ms, for at most ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        result = what()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out after {deadline_s} s: {message}")


class StderrLines:
    """A child's stderr, read line by line on a thread, so the test can wait for a line."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def search(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        return next((m for line in list(self.lines) if (m := pattern.search(line))), None)

    def text(self) -> str:
        self._thread.join(timeout=5)
        return "".join(self.lines)


def listening(pid: int) -> list[tuple[str, int]]:
    """TCP addresses the process ``pid`` listens on."""
    return sorted((c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections("inet")
                  if c.status == psutil.CONN_LISTEN)


def write_config(path: Path, web: SyntheticWeb, db: Path, metrics: str) -> None:
    path.write_text(
        f"seeds: {json.dumps(web.seeds)}\n"
        "scope: {allow_private_addresses: true}\n"
        "crawler: {workers: 4, politeness: {delay_s: 0.05}}\n"
        "ranking: {schedule_s: 1}\n"
        f"storage: {{database: '{db}', warehouse_dir: '{db.parent / 'w'}'}}\n"
        f"{metrics}\n")


def start_daemon(config: Path, notify: Path | None = None) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", **({"NOTIFY_SOCKET": str(notify)} if notify else {})}
    return subprocess.Popen([sys.executable, "-m", "xyro", "-c", str(config), "run"], env=env,
                            cwd=config.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def stop_daemon(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


# -- the daemon, as systemd runs it -----------------------------------------------------------

def test_daemon_metrics_follow_the_crawl(tmp_path: Path) -> None:
    db = tmp_path / "xyro.db"
    with SyntheticWeb(SPEC, WallClock()) as web:
        config = tmp_path / "xyro.yaml"
        write_config(config, web, db, "metrics: {listen: '127.0.0.1:0'}")
        proc = start_daemon(config)
        err = StderrLines(proc.stderr)
        try:
            match = poll(lambda: err.search(METRICS_LINE) or proc.poll() is not None, 60,
                         "no 'metrics on' line")
            assert isinstance(match, re.Match), err.text()
            url, port = match.group(1), int(match.group(2))
            # Port 0 in the config: a free port, bound on exactly the configured address.
            assert port > 0 and listening(proc.pid) == [("127.0.0.1", port)]
            first = poll(lambda: (f := scrape(url)) and pages(f) > 0 and f, 60, "no page")
            second = poll(lambda: (f := scrape(url)) and pages(f) > pages(first) and f, 60,
                          "the pages counter did not move")
            for name in ("xyro_fetched_bytes_total", "xyro_fetch_duration_seconds_count"):
                assert value(second, name) >= value(first, name) > 0, name

            def settled() -> Families | None:
                f = scrape(url)
                idle = (value(f, "xyro_frontier_urls") == 0
                        and value(f, "xyro_fetches_in_flight") == 0
                        and value(f, "xyro_loader_pending_documents") == 0
                        and "xyro_loader_dtd_loads" in f
                        and value(f, "xyro_rank_job_runs_total", outcome="ok") >= 1
                        and value(f, "xyro_plan_job_runs_total") >= 1)
                return f if idle else None

            last = poll(settled, 90, "the crawl did not settle")
        finally:
            code = stop_daemon(proc)
    log = err.text()
    assert code == 0, log
    for families in (first, second, last):
        check_labels(families)
    assert set(value(last, "xyro_frontier_urls", priority=str(p)) for p in range(5)) == {0}
    assert {s.labels["priority"] for s in last["xyro_frontier_urls"].samples} == \
        {"0", "1", "2", "3", "4"}
    assert value(last, "xyro_pages_fetched_total", status="2xx") > 0
    assert value(last, "xyro_fetch_duration_seconds_bucket", le="+Inf") == \
        value(last, "xyro_fetch_duration_seconds_count")
    assert value(last, "xyro_writer_batch_size_count") > 0
    assert value(last, "xyro_rank_job_duration_seconds") > 0
    assert "xyro_hosts_waiting" in last and "xyro_build_info" in last
    # Nothing was in flight at the last scrape and nothing was queued after it, so the
    # counter equals what the crawl recorded when it stopped.
    with MetadataStore.open(db) as store:
        assert json.loads(store.get_state("crawl.last_run"))["pages"] == pages(last)
    # The server went away with the daemon.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_metrics_off_opens_no_socket(tmp_path: Path) -> None:
    notify = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify))
    sock.settimeout(60)
    with SyntheticWeb(SPEC, WallClock()) as web:
        config = tmp_path / "xyro.yaml"
        write_config(config, web, tmp_path / "xyro.db", "")  # the default: metrics off
        proc = start_daemon(config, notify)
        err = StderrLines(proc.stderr)
        try:
            poll(lambda: "READY=1" in sock.recv(4096).decode(), 60, "no READY=1")
            assert listening(proc.pid) == []
        finally:
            code = stop_daemon(proc)
            sock.close()
    log = err.text()
    assert code == 0, log
    assert "metrics on" not in log


# -- xyro crawl ------------------------------------------------------------------------------

def crawl_app(tmp_path: Path, web: SyntheticWeb, clock: AcceleratedClock) -> App:
    """An App crawling ``web`` into a new store, with metrics on a free loopback port."""
    app = App(load_config(None, {}, [
        f"seeds={json.dumps(web.seeds)}", "scope.allow_private_addresses=true",
        "crawler.politeness.delay_s=0.5", "crawler.workers=4",
        f"storage.database={tmp_path / 'xyro.db'}", f"storage.warehouse_dir={tmp_path / 'w'}",
        "metrics.listen=127.0.0.1:0"]), clock)
    with app.open_store(create=True):
        pass
    return app


def test_crawl_serves_metrics_while_it_runs_and_stops_serving(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = AcceleratedClock(1_800_000_000.0, 10.0)  # 0.5 s delay = 0.05 real seconds
    spec = WebSpec(seed=5, n_hosts=3, n_pages=300, hostile=frozenset(), crawl_delay_share=0.0)
    caplog.set_level(logging.INFO, logger="xyro.service.metrics")
    with SyntheticWeb(spec, clock) as web:
        app = crawl_app(tmp_path, web, clock)
        done: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: done.setdefault("summary", run_crawl(app, max_pages=150)))
        thread.start()
        try:
            match = poll(lambda: METRICS_LINE.search(caplog.text), 30, "no 'metrics on' line")
            url, port = match.group(1), int(match.group(2))
            first = poll(lambda: (f := scrape(url)) and pages(f) > 0 and f, 30, "no page")
            second = poll(lambda: (f := scrape(url)) and pages(f) > pages(first) and f, 30,
                          "the pages counter did not move")
        finally:
            thread.join(timeout=120)
    check_labels(first)
    check_labels(second)
    final = done["summary"].stats["pages"]
    assert pages(first) < pages(second) <= final
    with pytest.raises(OSError):  # shut down with the crawl
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# -- the configuration -----------------------------------------------------------------------

def test_cli_refuses_a_non_loopback_listen_address(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "xyro", "--set", "metrics.listen=0.0.0.0:0",
                           "run"], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("config error: metrics.listen (command line): 0.0.0.0 is "
                                  "not a loopback address"), proc.stderr
    assert "metrics.allow_non_loopback" in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "var").exists()  # refused before anything was created


@pytest.mark.parametrize("listen", ["0.0.0.0:9464", "[::]:9464", "192.0.2.1:9464",
                                    "[::ffff:127.0.0.1]:9464"])
def test_non_loopback_needs_the_operator_to_say_so(listen: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {"XYRO_METRICS__LISTEN": listen}, ())
    assert info.value.key == "metrics.listen" and info.value.exit_code == 2
    assert "metrics.allow_non_loopback" in info.value.reason
    allowed = load_config(None, {}, [f"metrics.listen={listen}",
                                     "metrics.allow_non_loopback=true"])
    assert allowed.metrics.listen == listen  # loaded only: the tests never bind it


@pytest.mark.parametrize(("listen", "address"), [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)), ("127.0.0.2:0", ("127.0.0.2", 0)),
    ("[::1]:9464", ("::1", 9464)), ("", None)])
def test_listen_values(listen: str, address: tuple[str, int] | None) -> None:
    assert load_config(None, {}, [f"metrics.listen={listen}"]).metrics.address == address
    assert load_config(None, {}, ()).metrics.address is None  # off by default


@pytest.mark.parametrize("listen", ["localhost:9464", "127.0.0.1", "::1:9464", "127.0.0.1:65536",
                                    "[127.0.0.1]:9464", "http://127.0.0.1:9464/"])
def test_bad_listen_values_name_the_key(listen: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, {}, [f"metrics.listen={listen}"])
    assert info.value.key == "metrics.listen" and "IP:PORT" in info.value.reason


def test_a_port_in_use_is_one_clear_error() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        cfg = load_config(None, {}, [f"metrics.listen=127.0.0.1:{taken.getsockname()[1]}"])
        with pytest.raises(ConfigError, match=r"metrics\.listen: cannot serve metrics on") as info:
            MetricsEndpoint(cfg.metrics).start()
        assert info.value.exit_code == 2   # a restart meets the same port
    finally:
        taken.close()


# -- the collector, on hand-made figures -----------------------------------------------------

def test_collector_buckets_jobs_and_labels() -> None:
    clock = ManualClock()
    stats = CrawlStats()
    stats.page("html", 100, None, False, 200, 0.005)   # on a bound: counts in le="0.005"
    stats.page("xml", 50, None, False, 200, 0.3)
    stats.page("error", 0, "timeout", False, None, 61.0)  # beyond the last bound: +Inf only
    stats.page("error", 0, "robots", False)             # refused: no fetch, no latency
    hosts = HostScheduler(5.0, clock)
    hosts.want("a.example")
    hosts.start(hosts.ready_host(), clock.now())
    hosts.finish("a.example", clock.now())  # next start allowed in 5 s
    crawler = SimpleNamespace(
        stats=stats, clock=clock, frontier=SimpleNamespace(hosts=hosts),
        snapshot=lambda: {"queued_by_priority": {0: 0, 1: 0, 2: 3, 3: 0, 4: 7},
                          "hosts_waiting": 1, "in_flight": 0, "seen_urls": 12,
                          "budget": {"unit": 9, "bandwidth": 50, "fetched": 12, "refresh": 9,
                                     "discovery": 2, "urgent": 1, "previous_fetched": 50,
                                     "previous_carried_over": 4}})
    writer = SimpleNamespace(stats={"ops_written": 30, "batches": 3, "busy_seconds": 0.3,
                                    "last_batch_seconds": 0.1, "queue_size": 0,
                                    "failed": False})
    jobs = JobFigures()
    jobs.planned(UnitFigures(unit=7, planned=40, due=9, discovery=2, deferred=1,
                             omega_g=0.5, omega_plan=0.6, seconds=0.01, ahead=3))
    jobs.ranked(1.5)
    jobs.failed("rank", "skipped")
    endpoint = MetricsEndpoint(load_config(None, {}, ()).metrics)
    endpoint.watch(crawler, writer, jobs)  # type: ignore[arg-type]
    assert endpoint.start().port is None  # off: nothing bound
    families = {f.name: f for f in text_string_to_metric_families(
        generate_latest(endpoint.registry).decode())}
    check_labels(families)
    assert value(families, "xyro_pages_fetched_total", type="error", status="none") == 2
    assert value(families, "xyro_fetch_errors_total", kind="timeout") == 1
    assert value(families, "xyro_fetched_bytes_total") == 150
    buckets = {s.labels["le"]: s.value for s in families["xyro_fetch_duration_seconds"].samples
               if s.name.endswith("_bucket")}
    assert (buckets["0.005"], buckets["0.25"], buckets["0.5"], buckets["60.0"],
            buckets["+Inf"]) == (1, 1, 2, 2, 3)
    assert value(families, "xyro_fetch_duration_seconds_sum") == pytest.approx(61.305)
    assert value(families, "xyro_frontier_urls", priority="4") == 7
    assert value(families, "xyro_unit_budget_pages") == 50
    assert value(families, "xyro_unit_fetched_pages", share="refresh") == 9
    assert value(families, "xyro_unit_carried_over_pages") == 4
    assert value(families, "xyro_hosts_waiting") == 1
    clock.advance(5.0)
    later = {f.name: f for f in text_string_to_metric_families(
        generate_latest(endpoint.registry).decode())}
    assert value(later, "xyro_hosts_waiting") == 0
    assert value(families, "xyro_writer_batch_size_sum") == 30
    assert value(families, "xyro_planner_due_pages") == 9
    assert value(families, "xyro_planner_deferred_pages") == 1
    assert value(families, "xyro_planner_ahead_pages") == 3
    assert value(families, "xyro_planner_predicted_obsolescence") == 0.5
    assert value(families, "xyro_rank_job_duration_seconds") == 1.5
    assert value(families, "xyro_rank_job_runs_total", outcome="ok") == 1
    assert value(families, "xyro_rank_job_runs_total", outcome="skipped") == 1
    assert not any(f.name.startswith("xyro_opic") for f in families.values())


def test_a_port_in_use_says_so() -> None:
    # EADDRINUSE is another process on the port, not systemd's SocketBindAllow=.
    from xyro.errors import XyroError
    from xyro.service.metrics import MetricsEndpoint

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = load_config(None, {}, [f"metrics.listen=127.0.0.1:{port}"]).metrics
        with pytest.raises(XyroError, match="another process listens there") as info:
            MetricsEndpoint(config).start()
    assert "SocketBindAllow" not in str(info.value)
