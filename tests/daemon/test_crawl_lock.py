"""One crawler per database (:mod:`xyro.service.crawl_lock`): a second ``xyro crawl`` (or a
``xyro plan --run``) on the same database exits at once with one line naming the first, and a killed crawler's lock is
gone with it, so a restart after SIGKILL is never refused."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from xyro.clock import WallClock
from xyro.service.crawl_lock import CrawlerRunning, CrawlLock, crawler_alive, lock_path
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

SPEC = WebSpec(seed=5, n_hosts=3, n_pages=300, hostile=frozenset(), crawl_delay_share=0.0)


def test_second_lock_refused_naming_the_holder(tmp_path: Path) -> None:
    db = tmp_path / "xyro.db"
    assert crawler_alive(db) is False  # no lock file yet
    with CrawlLock(db):
        assert crawler_alive(db) is True
        with pytest.raises(CrawlerRunning, match=f"process {os.getpid()}.*{db}"):
            CrawlLock(db, wait_s=0.0).acquire()
    assert crawler_alive(db) is False
    with CrawlLock(db, wait_s=0.0):  # released: the next crawler takes it
        pass


def test_every_path_to_one_database_names_one_lock(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The lock was built from the path as written: a symlink to the database (or to its
    # folder) had a lock of its own, and two crawlers ran on one database.
    real = tmp_path / "lib" / "xyro.db"
    real.parent.mkdir()
    real.write_bytes(b"")
    (tmp_path / "xyro.db").symlink_to(real)
    (tmp_path / "state").symlink_to(real.parent)
    monkeypatch.chdir(tmp_path / "lib")
    with CrawlLock(real):
        for other in (tmp_path / "xyro.db", tmp_path / "state" / "xyro.db", Path("xyro.db")):
            assert lock_path(other) == lock_path(real) == real.parent / "xyro.db.lock"
            assert crawler_alive(other) is True
            with pytest.raises(CrawlerRunning, match=f"process {os.getpid()}"):
                CrawlLock(other, wait_s=0.0).acquire()


def test_a_pid_of_a_process_gone_is_not_named_as_the_holder(tmp_path: Path) -> None:
    # A holder that could lock the file only read-only (another user's file) leaves the
    # pid of whoever wrote it last: a process long gone must not be named as the crawler.
    db = tmp_path / "xyro.db"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    lock_path(db).write_text(gone.stdout)
    fd = os.open(lock_path(db), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)   # as the read-only holder holds it
        with pytest.raises(CrawlerRunning, match="another Xyro crawler \\(another process\\)"):
            CrawlLock(db, wait_s=0.0).acquire()
    finally:
        os.close(fd)


def test_status_probe_does_not_refuse_a_starting_crawler(tmp_path: Path) -> None:
    """`xyro status` takes the lock shared for an instant; a crawler starting then waits."""
    db = tmp_path / "xyro.db"
    lock_path(db).touch()
    fd = os.open(lock_path(db), os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # what crawler_alive holds for an instant
    threading.Timer(0.2, os.close, (fd,)).start()
    started = time.monotonic()
    with CrawlLock(db, wait_s=10.0):
        assert 0.1 < time.monotonic() - started < 10.0


def _xyro(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "xyro", "--config", str(config), *args]


def test_second_crawler_exits_and_killed_one_frees_the_database(tmp_path: Path) -> None:
    with SyntheticWeb(SPEC, WallClock()) as web:
        config = tmp_path / "xyro.yaml"
        db = tmp_path / "xyro.db"
        config.write_text(
            f"seeds: {json.dumps(web.seeds)}\n"
            "scope: {allow_private_addresses: true}\n"
            "crawler: {workers: 2, politeness: {delay_s: 0.2}}\n"
            f"storage: {{database: '{db}', warehouse_dir: '{tmp_path / 'w'}'}}\n")
        subprocess.run(_xyro(config, "init"), check=True, capture_output=True, timeout=60)
        first = subprocess.Popen(_xyro(config, "crawl"), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not web.log.requests():
                assert first.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            second = subprocess.run(_xyro(config, "crawl"), capture_output=True, text=True,
                                    timeout=60)
            assert second.returncode == 2, second.stderr
            lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1 and f"process {first.pid}" in lines[0], second.stderr
            assert "storage.database" in lines[0]
            assert crawler_alive(db) is True
            # Pages `plan --run` queued beside a running crawler would wait unseen.
            planned = subprocess.run(_xyro(config, "plan", "--run"), capture_output=True,
                                     text=True, timeout=60)
            assert planned.returncode == 2, planned.stderr
            lines = [ln for ln in planned.stderr.splitlines()
                     if ln.strip() and ln != "planning..."]
            assert len(lines) == 1 and f"a crawler (process {first.pid})" in lines[0], lines
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        assert crawler_alive(db) is False
