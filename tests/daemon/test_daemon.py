"""``xyro run`` as systemd runs it: a real subprocess, a real notify socket, real signals."""

from __future__ import annotations

import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from metadata import MetadataStore
from xyro.clock import WallClock
from xyro.service.sdnotify import Notifier
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

SPEC = WebSpec(seed=9, n_hosts=4, n_pages=120, hostile=frozenset(), crawl_delay_share=0.0)


def _config(path: Path, seeds: list[str], db: Path) -> None:
    path.write_text(
        f"seeds: {json.dumps(seeds)}\n"
        "scope: {allow_private_addresses: true}\n"
        "crawler: {workers: 4, politeness: {delay_s: 0.02}}\n"
        "ranking: {schedule_s: 1}\n"
        "refresh: {time_unit_s: 2}\n"
        f"storage: {{database: '{db}', warehouse_dir: '{db.parent / 'w'}'}}\n")


def _receive(sock: socket.socket, until: float, want: str | None = None) -> list[str]:
    """Datagrams until ``until`` (monotonic), or until one containing ``want`` arrived."""
    messages: list[str] = []
    sock.settimeout(0.1)
    while time.monotonic() < until:
        try:
            messages.append(sock.recv(4096).decode())
        except TimeoutError:
            continue
        if want is not None and want in messages[-1]:
            break
    return messages


def _until(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``done`` until it holds: the test waits for what the daemon did, not for a fixed
    time that a loaded machine (or numba compiling the kernel cold) may overrun."""
    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, f"{what}: not within {timeout_s} s"
        time.sleep(0.05)


def _ranked(db: Path) -> bool:
    """A rank job and a plan job have finished, and some page has an importance."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)  # read-only: never creates it
    except sqlite3.OperationalError:
        return False
    try:
        jobs = {name for (name,) in conn.execute(
            "SELECT name FROM job_runs WHERE finished IS NOT NULL")}
        ranked = conn.execute("SELECT count(*) FROM urls WHERE importance IS NOT NULL")
        return {"rank", "plan"} <= jobs and ranked.fetchone()[0] > 0
    except sqlite3.OperationalError:  # the daemon has not created its tables yet
        return False
    finally:
        conn.close()


def _hosts_fetched(web: SyntheticWeb) -> int:
    return len({r.host for r in web.log.requests() if r.target != "/robots.txt"})


def test_daemon_notifies_reloads_ranks_and_stops_cleanly(tmp_path: Path) -> None:
    notify_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify_path))
    db = tmp_path / "xyro.db"
    with SyntheticWeb(SPEC, WallClock()) as web:
        config = tmp_path / "xyro.yaml"
        _config(config, web.seeds[:1], db)
        proc = subprocess.Popen([sys.executable, "-m", "xyro", "-c", str(config), "run"],
                                env={"NOTIFY_SOCKET": str(notify_path), "PATH": "/usr/bin:/bin"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = _receive(sock, time.monotonic() + 60.0, want="READY=1")
            assert any("READY=1" in m for m in first), first
            _until(lambda: _ranked(db), 60.0, "a rank job, a plan job and ranked pages")
            first += _receive(sock, time.monotonic() + 0.3)
            _config(config, web.seeds, db)  # the operator adds seeds, then reloads
            proc.send_signal(signal.SIGHUP)
            later = _receive(sock, time.monotonic() + 60.0, want="RELOADING=1")
            _until(lambda: _hosts_fetched(web) == len(web.seeds), 60.0,
                   "a page of every reloaded seed's host")
            later += _receive(sock, time.monotonic() + 0.3)
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        final = _receive(sock, time.monotonic() + 0.3)
    sock.close()
    assert proc.returncode == 0, err
    assert "RELOADING=1" in "".join(later) and "STATUS=" in "".join(first + later)
    assert "STOPPING=1" in "".join(later + final)
    # Seeds already found through cross-host links count as known, not new.
    assert re.search(r"reloaded: \d+ new seeds queued", err), err
    assert "Traceback" not in err
    conn = sqlite3.connect(db)
    jobs = {name for (name,) in conn.execute("SELECT name FROM job_runs")}
    ranked = conn.execute("SELECT count(*) FROM urls WHERE importance IS NOT NULL").fetchone()[0]
    conn.close()
    assert {"rank", "plan", "daemon"} <= jobs
    assert ranked > 0
    with MetadataStore.open(db) as store:
        assert json.loads(store.get_state("crawl.last_run"))["pages"] > 0


def test_notifier_is_a_no_op_outside_systemd() -> None:
    assert Notifier(address="").ready("x") is False


def test_notifier_sends_to_an_abstract_socket() -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"xyro-test-{time.monotonic_ns()}"
    sock.bind("\0" + name)
    assert Notifier(address="@" + name).notify(status="hello", ready=1)
    assert sock.recv(100) == b"STATUS=hello\nREADY=1"
    sock.close()


def test_a_second_reload_offers_only_what_it_adds(tmp_path: Path,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """Each SIGHUP compares with the last reload for seeds and sitemaps (a seed added by the
    first is not offered again by the second), and with the start for restart-only keys."""
    from xyro.app import App
    from xyro.config_load import load_config
    from xyro.service.daemon import Daemon

    base = [f"storage.database={tmp_path / 'x.db'}", "seeds=[\"http://a.example/\"]"]
    daemon = Daemon(App(load_config(None, {}, base)), Notifier(""))
    offered: list[list[str]] = []
    daemon._add_seeds = (  # type: ignore[method-assign]
        lambda seeds: offered.append(list(seeds)) or 0)
    more = [*base[:1], "seeds=[\"http://a.example/\", \"http://b.example/\"]",
            "crawler.workers=3"]
    daemon._apply(load_config(None, {}, more))
    daemon._apply(load_config(None, {}, more))
    assert offered == [["http://b.example/"], []]
    err = capfd.readouterr().err.splitlines()
    restarts = [line for line in err if "restart to apply" in line]
    assert len(restarts) == 2 and all(line.endswith("apply: crawler") for line in restarts)


def test_a_reload_names_the_log_intervals_for_a_restart(tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """The log's level applies at once; its intervals are those of jobs built at the start:
    a reload that changes them says so rather than seem to apply them."""
    from xyro.app import App
    from xyro.config_load import load_config
    from xyro.service.daemon import Daemon

    base = [f"storage.database={tmp_path / 'x.db'}"]
    daemon = Daemon(App(load_config(None, {}, base)), Notifier(""))
    daemon._add_seeds = lambda seeds: 0  # type: ignore[method-assign]
    daemon._apply(load_config(None, {}, [*base, "log.level=debug",
                                         "log.summary_interval_s=600"]))
    err = capfd.readouterr().err.splitlines()
    reloaded = [line for line in err if "reloaded:" in line]
    assert len(reloaded) == 1 and reloaded[0].endswith(
        "log level debug; restart to apply: log.summary_interval_s"), reloaded


def test_a_stop_during_the_start_skips_the_first_plan(tmp_path: Path) -> None:
    """A SIGTERM while a large frontier is restored: the daemon exits without the full
    planner scan the start would otherwise run (systemd's stop timeout is counting)."""
    from xyro.app import App
    from xyro.config_load import load_config
    from xyro.service.daemon import Daemon

    db = tmp_path / "x.db"
    daemon = Daemon(App(load_config(None, {}, [
        f"storage.database={db}", f"storage.warehouse_dir={tmp_path / 'w'}",
        "seeds=[\"http://a.example/\"]"])), Notifier(""))
    daemon.stop.set()   # as the signal handler does
    assert daemon.run() == "stop requested"
    conn = sqlite3.connect(db)
    try:
        jobs = [name for (name,) in conn.execute("SELECT name FROM job_runs")]
    finally:
        conn.close()
    assert jobs == ["daemon"], jobs
