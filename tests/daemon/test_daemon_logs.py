"""What ``xyro run`` and ``xyro crawl`` tell an operator on stderr (real subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ENV = {"PATH": "/usr/bin:/bin"}


def _closed_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(path: Path, db: Path, seeds: list[str], allow_private: bool) -> Path:
    path.write_text(
        f"seeds: {json.dumps(seeds)}\n"
        f"scope: {{allow_private_addresses: {str(allow_private).lower()}}}\n"
        "crawler: {workers: 2, politeness: {delay_s: 0}}\n"
        "ranking: {schedule_s: 3600}\n"
        "refresh: {time_unit_s: 3600}\n"
        "log: {summary_interval_s: 0.5, host_warning_interval_s: 600}\n"
        f"storage: {{database: '{db}', warehouse_dir: '{db.parent / 'w'}'}}\n")
    return path


def _run_until(config: Path, wanted: list[str], timeout_s: float = 60.0) -> str:
    """Run the daemon until every ``wanted`` text is on stderr, then SIGTERM it."""
    proc = subprocess.Popen([sys.executable, "-m", "xyro", "-c", str(config), "run"], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not all(w in "".join(err) for w in wanted):
            line = proc.stderr.readline()
            if not line:
                break
            err.append(line)
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "".join(err) + rest
    return "".join(err) + rest


def test_unreachable_seed_is_warned_about_per_host_and_its_urls_stay_queued(
        tmp_path: Path) -> None:
    port = _closed_port()
    config = _config(tmp_path / "x.yaml", tmp_path / "x.db",
                     [f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/other"], True)
    err = _run_until(config, ["host 127.0.0.1", "queued 2"])
    warnings = [line for line in err.splitlines() if f"host 127.0.0.1:{port}:" in line]
    assert len(warnings) == 1, err          # robots.txt refused once: one warning
    assert "WARNING" in warnings[0] and "connect error" in warnings[0]
    # Its robots.txt is retried for hours before its URLs fail (PrerequisiteRetries).
    assert "attempt 1; its queued URLs wait" in warnings[0], warnings[0]
    assert "idle: the frontier is empty" not in err and "connect=" not in err, err
    assert "Traceback" not in err


def test_queued_loopback_urls_are_named_at_start_when_private_addresses_are_refused(
        tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    config = _config(tmp_path / "x.yaml", db, [], False)
    urls = [f"http://127.0.0.{i}:8080/" for i in range(2, 5)]
    subprocess.run([sys.executable, "-m", "xyro", "-c", str(config), "init"], env=ENV,
                   check=True, capture_output=True)
    seeded = subprocess.run([sys.executable, "-m", "xyro", "-c", str(config), "seed", *urls,
                             "http://public.example/"], env=ENV, capture_output=True, text=True)
    assert seeded.returncode == 0, seeded.stderr
    err = _run_until(config, ["3 of 4 queued URLs are on private or loopback addresses",
                              "address error"])
    start = next(line for line in err.splitlines() if "queued URLs are on private" in line)
    assert "scope.allow_private_addresses is false" in start and "127.0.0." in start
    assert "scope.allow_private_addresses: true" in err   # the per-host warning's advice


def test_crawl_with_nothing_to_do_points_at_xyro_seed(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    config = _config(tmp_path / "x.yaml", db, [], False)
    subprocess.run([sys.executable, "-m", "xyro", "-c", str(config), "init"], env=ENV,
                   check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "xyro", "-c", str(config), "crawl"], env=ENV,
                          capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "xyro seed URL" in lines[0] and str(db) in lines[0], done.stderr


def _run_under_journald(args: list[str], journald: bool = True) -> tuple[int, str]:
    """Run ``args`` with stderr on a pipe that ``JOURNAL_STREAM`` names ("device:inode", as
    systemd sets it for journald's stream), or names another file when not ``journald`` (the
    variable inherited by a terminal's shell); (exit code, stderr)."""
    read_end, write_end = os.pipe()
    st = os.fstat(write_end)
    named = f"{st.st_dev}:{st.st_ino}" if journald else f"{st.st_dev}:{st.st_ino + 1}"
    proc = subprocess.Popen(args, env={**ENV, "JOURNAL_STREAM": named}, stderr=write_end,
                            stdout=subprocess.DEVNULL, cwd=Path(__file__).parents[2])
    os.close(write_end)
    with os.fdopen(read_end) as err:
        text = err.read()
    return proc.wait(60), text


def test_under_journald_every_line_of_a_traceback_carries_its_priority() -> None:
    # journald reads each stderr line apart: a line without "<N>" is stored as info, so a
    # crash's traceback was invisible to `journalctl -p err` but for nothing at all.
    code = ("import logging\n"
            "from xyro.service.logs import setup_logging\n"
            "setup_logging()\n"
            "try:\n    1 / 0\n"
            "except ZeroDivisionError:\n"
            "    logging.getLogger('xyro.test').exception('a job failed')\n"
            "raise RuntimeError('a bug nothing caught')\n")
    code_, err = _run_under_journald([sys.executable, "-c", code])
    lines = err.splitlines()
    assert code_ == 1 and lines, err
    job = [line for line in lines if line.startswith("<3>")]
    crash = [line for line in lines if line.startswith("<2>")]
    assert len(job) + len(crash) == len(lines), err
    assert job[0] == "<3>xyro.test: a job failed" and "ZeroDivisionError" in job[-1]
    assert crash[0] == ("<2>xyro: uncaught RuntimeError: a bug nothing caught; this is a bug, "
                        "please report it") and "RuntimeError" in crash[-1]
    # The variable inherited where stderr is not journald's (a terminal's shell): plain text.
    code_, err = _run_under_journald([sys.executable, "-c", code], journald=False)
    assert code_ == 1 and not any(line.startswith("<") for line in err.splitlines()), err
    assert " ERROR xyro.test: a job failed" in err


@pytest.mark.parametrize("form", ["journald", "json"])
def test_why_the_daemon_stops_is_a_record_in_the_log_form(tmp_path: Path, form: str) -> None:
    # Under journald a bare line is stored at info, out of `journalctl -p err`; in a JSON
    # log it breaks the shipper's parse. The refusal is one ERROR record of the log instead.
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")   # a newer Xyro's database, after a downgrade
    conn.close()
    config = _config(tmp_path / "x.yaml", db, [], False)
    sets = ["-s", "log.format=json"] if form == "json" else []
    code, err = _run_under_journald([sys.executable, "-m", "xyro", "-c", str(config), *sets,
                                     "run"], journald=form == "journald")
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    if form == "journald":
        assert last.startswith("<3>xyro: error: ") and "newer than this Xyro" in last, last
    else:
        record = json.loads(last)
        assert record["level"] == "error" and "newer than this Xyro" in record["msg"], last


@pytest.mark.parametrize("journald", [True, False])
def test_a_config_error_carries_the_error_priority_under_journald(tmp_path: Path,
                                                                  journald: bool) -> None:
    # The configuration is read before the log is set up: its error went out as a bare line,
    # which journald stores at info (out of `journalctl -p err`, the unit's failure hidden).
    config = tmp_path / "x.yaml"
    config.write_text("crawler:\n  wrokers: 8\n")
    for args in (["-c", str(config)], ["-c", str(tmp_path / "missing.yaml")],
                 ["-s", "crawler.workers=0"]):
        code, err = _run_under_journald([sys.executable, "-m", "xyro", *args, "run"],
                                        journald=journald)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith("<3>config error" if journald else "config error"), err
