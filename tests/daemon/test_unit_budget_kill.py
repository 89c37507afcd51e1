"""``xyro run`` killed with SIGKILL within a time unit, then restarted: the unit's stored
count covers every page record that survived, and its reservation every request sent, so
the web sees no more than G page requests in the unit, those the kill cut included
(DESIGN.md §6, xyro.crawl.unit_budget).

The daemon runs as a real subprocess on a config file; the web is a threaded HTTP server on
127.0.0.1 in the test process. The kill comes a second or so after the start, well before
the daemon's status job first writes the unit's row (every 10 s).
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from xyro.app import App
from xyro.clock import WallClock, unit_index
from xyro.config_load import load_config
from xyro.crawl.unit_budget import RESERVE_SHARE

PAGES = 400
G = 60
KILL_AT = 10           # page requests served, and a record committed, before the kill
PAGE_DELAY_S = 0.04    # one host, one request at a time: ~25 pages/s, G in 2.4 s
UNIT_S = 10_000_000.0  # one unit for the whole test, on the wall clock
READY = re.compile(r"daemon ready")


def _config(tmp_path: Path, site: Any) -> Path:
    config = tmp_path / "xyro.yaml"
    config.write_text(
        f"seeds: ['{site.base}/p0.html']\n"
        "scope: {allow_private_addresses: true}\n"
        "crawler: {workers: 4, politeness: {delay_s: 0}}\n"
        f"refresh: {{time_unit_s: {UNIT_S}, bandwidth_pages_per_unit: {G}, "
        "discovery_share: 1.0}\n"
        f"storage: {{database: '{tmp_path / 'xyro.db'}', warehouse_dir: '{tmp_path / 'w'}'}}\n")
    app = App(load_config(config, {}, []), WallClock())
    with app.open_store(create=True):  # as `xyro init` does, without its start-up time
        pass
    return config


def _xyro(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "xyro", "--config", str(config), *args]


def _start(config: Path) -> subprocess.Popen[str]:
    """``xyro run``, returned once it says it is ready (its signal handlers are in place)."""
    proc = subprocess.Popen(_xyro(config, "run"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if READY.search(line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep it drained
            return proc
    proc.wait(10)
    raise AssertionError(f"xyro run exited ({proc.returncode}) before it was ready")


def _stored(db: Path, unit: int) -> tuple[int, int | None]:
    """Page records of the store (one unit: all of them) and the unit's stored count."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        (records,) = conn.execute("SELECT coalesce(sum(accesses), 0) FROM urls").fetchone()
        row = conn.execute("SELECT fetched FROM fetch_units WHERE unit = ? AND unit_s = ?",
                           (unit, UNIT_S)).fetchone()
    finally:
        conn.close()
    return records, None if row is None else row[0]


def _committed(db: Path, unit: int, limit_s: float) -> None:
    """Wait until the store holds a page record."""
    deadline = time.monotonic() + limit_s
    while _stored(db, unit)[0] == 0:
        assert time.monotonic() < deadline, f"no page record committed in {limit_s} s"
        time.sleep(0.02)


def _quiet(site: Any, for_s: float, limit_s: float) -> None:
    """Wait until the web has served no page for ``for_s`` seconds."""
    deadline, last, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        if len(site.requests) != last:
            last, since = len(site.requests), time.monotonic()
        elif time.monotonic() - since >= for_s:
            return
        time.sleep(0.05)
    raise AssertionError(f"the daemon kept fetching for {limit_s} s "
                         f"({len(site.requests)} pages)")


def test_a_kill_within_the_unit_does_not_grant_its_fetches_again(tmp_path: Path,
                                                                  tree_site: Any) -> None:
    site = tree_site(PAGES, delay_s=PAGE_DELAY_S)
    config, db = _config(tmp_path, site), tmp_path / "xyro.db"
    unit = unit_index(time.time(), UNIT_S)
    proc = _start(config)
    try:
        assert site.reached(KILL_AT).wait(20), f"only {len(site.requests)} pages fetched"
        _committed(db, unit, 10.0)  # the writer commits every 0.5 s: wait for a first one
        assert len(site.requests) < G, "the unit's budget was spent before the kill"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    served = len(site.requests)
    records, fetched = _stored(db, unit)
    assert records > 0, "no page record committed before the kill"
    assert fetched is not None and fetched >= records, (fetched, records)

    proc = _start(config)
    try:
        _quiet(site, 0.7, 20.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    total, fetched = _stored(db, unit)
    assert unit_index(time.time(), UNIT_S) == unit
    assert fetched is not None and total <= fetched <= G, (total, fetched)
    # G was spent, but for what the kill cut (a fetch a worker, their requests sent and
    # counted, their records lost) and the rest of the last reservation.
    assert total >= G - 4 - round(RESERVE_SHARE * G), (total, fetched)
    # The web saw G page requests at most, those cut by the kill and fetched again included.
    assert len(site.requests) <= G, (len(site.requests), served, records)
