"""A stop does not wait for ever for the work left in flight once the fetches are cut: an
XML load is C code nothing interrupts (a crowded 8 MiB document took minutes, past systemd's
TimeoutStopSec), so after ``stop_grace_s`` the crawl ends and leaves the page queued in the
store, fetched again at the next start. Real HTTP server on 127.0.0.1, real crawl, real
SQLite; the load is held by wrapping the loader's own ``load`` (no library is mocked)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from xyro.app import build_crawler
from xyro.service.crawl_run import queue_seeds

DOC = b'<?xml version="1.0"?><doc>one</doc>'


def test_a_stop_leaves_a_load_that_outlasts_the_grace_queued(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, DOC))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/doc.xml'])}")
    stop, loading, release = threading.Event(), threading.Event(), threading.Event()
    with app.open_store() as store:
        parts = build_crawler(app, store)
        crawler = parts.crawler
        crawler.settings = replace(crawler.settings, stop_grace_s=0.5)
        assert crawler.loader is not None
        real_load = crawler.loader.load

        def slow_load(*args: Any, **kwargs: Any) -> Any:
            loading.set()
            release.wait(60)   # a load that takes minutes
            return real_load(*args, **kwargs)
        crawler.loader.load = slow_load   # type: ignore[method-assign]
        queue_seeds(crawler.frontier, app.config.seeds)
        runner = threading.Thread(target=crawler.run,
                                  kwargs={"max_seconds": 120, "stop": stop})
        runner.start()
        assert loading.wait(30)
        stopped_at = time.monotonic()
        stop.set()
        runner.join(30)
        ended = not runner.is_alive()
        took = time.monotonic() - stopped_at
        release.set()
        parts.close()
    assert ended and took < 10, took   # 0.5 s of grace, not the load's minutes
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        queued = conn.execute("SELECT count(*) FROM frontier f JOIN urls u ON u.id = f.url_id "
                              "WHERE u.url LIKE '%/doc.xml'").fetchone()[0]
    finally:
        conn.close()
    assert queued == 1   # fetched again at the next start
