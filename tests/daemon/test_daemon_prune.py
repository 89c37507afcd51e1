"""A running daemon keeps ``loader.versions_per_url``: old versions and their blobs are
pruned once a time unit while it runs, not only at a clean stop it may never reach (a
SIGKILL, a crash loop). Real HTTP server on 127.0.0.1, real SQLite, a real warehouse."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from xyro.app import App
from xyro.config_load import load_config
from xyro.service import daemon as daemon_module
from xyro.service.daemon import Daemon
from xyro.service.sdnotify import Notifier

KEEP = 2


def _counts(db: Path) -> tuple[int, int]:
    """(fetches of the document, its version rows)."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        accesses = conn.execute("SELECT coalesce(max(accesses), 0) FROM urls "
                                "WHERE url LIKE '%doc.xml'").fetchone()[0]
        versions = conn.execute("SELECT count(*) FROM xml_versions").fetchone()[0]
    except sqlite3.OperationalError:   # not created yet
        return 0, 0
    finally:
        conn.close()
    return accesses, versions


def test_the_daemon_prunes_old_versions_while_it_runs(
        tmp_path: Path, routed_site: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    served = iter(range(10**6))
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"},
                                     f"<doc n='{next(served)}'/>".encode()))
    db = tmp_path / "x.db"
    monkeypatch.setattr(daemon_module, "PRUNE_EVERY_MIN_S", 0.5)
    monkeypatch.setattr(daemon_module, "PRUNE_GRACE_S", 0.0)
    daemon = Daemon(App(load_config(None, {}, [
        f"storage.database={db}", f"storage.warehouse_dir={tmp_path / 'w'}",
        f'seeds=["{site.base}/doc.xml"]', "scope.allow_private_addresses=true",
        "crawler.politeness.delay_s=0", "refresh.time_unit_s=1",
        f"loader.versions_per_url={KEEP}"])), Notifier(""))
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while _counts(db)[0] < 4 * KEEP and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)   # a prune after the last of those fetches
        accesses, versions = _counts(db)
    finally:
        daemon.stop.set()
        runner.join(timeout=60)
    assert accesses >= 4 * KEEP, "the document should have been read again every unit"
    assert versions <= KEEP + 2, (accesses, versions)   # two may come between two prunes
    blobs = list((tmp_path / "w").glob("??/??/*.z"))
    assert len(blobs) <= KEEP + 2, blobs
