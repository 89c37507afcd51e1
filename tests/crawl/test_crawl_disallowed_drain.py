"""A host whose robots.txt now disallows everything, with many URLs queued: they are recorded
unfetched in batches, a stop seen between two (it waited for the whole queue: 100,000 URLs
held a SIGTERM for 52 s). Real HTTP server on 127.0.0.1, real SQLite."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from metadata.records import Enqueue
from xyro.crawl.robots_answers import DRAIN_BATCH
from xyro.service.crawl_run import run_crawl

QUEUED = 20 * DRAIN_BATCH


def test_a_stop_is_seen_between_batches_of_disallowed_urls(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {}, b"<html>x</html>"),
                       robots="User-agent: *\nDisallow: /\n")
    app = local_app_for(tmp_path)
    with app.open_store() as store:
        writer = store.writer()
        writer.submit_many([Enqueue(f"{site.base}/page/{i}", 3) for i in range(QUEUED)])
        writer.close()
    stop = threading.Event()

    def stop_soon_after_robots() -> None:
        while not site.arrivals:
            time.sleep(0.01)
        time.sleep(0.3)
        stop.set()   # what SIGTERM does
    threading.Thread(target=stop_soon_after_robots, daemon=True).start()
    summary = run_crawl(app, stop=stop, max_seconds=120)
    assert summary.stop_reason == "stop requested"
    assert site.requests == []
    # Recording 20 batches takes seconds; the stop came 0.3 s in and ended the drain.
    assert summary.stats["pages"] < QUEUED - DRAIN_BATCH, summary.stats["pages"]
