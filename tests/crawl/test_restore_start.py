"""A start restores the crawl from the store (xyro.service.crawl_run.restore_frontier): the
seen-set from every stored URL, the queue from the frontier table, with progress logged for
the operator (millions of queued URLs take minutes). Real SQLite file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from metadata import Enqueue
from xyro.app import build_crawler
from xyro.crawl.frontier import RESTORE_CHECK
from xyro.service import crawl_run

QUEUED = 2 * RESTORE_CHECK + 500


def test_a_start_restores_every_queued_url_and_logs_its_progress(
        tmp_path: Path, local_app_for: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    app = local_app_for(tmp_path, 'scope.allowed_domains=["example"]')
    urls = [f"http://h{i % 40}.example/d{i % 7}/p{i}.xml" for i in range(QUEUED)]
    with app.open_store() as store:
        with store.writer(now=1.0) as writer:
            for url in urls:
                writer.submit(Enqueue(url, 3, enqueued_at=1.0))
    monkeypatch.setattr(crawl_run, "RESTORE_LOG_EVERY", RESTORE_CHECK)
    caplog.set_level(logging.INFO, logger="xyro.crawl")
    with app.open_store() as store:
        parts = build_crawler(app, store)
        try:
            assert crawl_run.restore_frontier(store, parts.crawler) == QUEUED
            frontier = parts.crawler.frontier
            assert len(frontier.seen) == QUEUED
            assert all(url in frontier.seen for url in urls[::101])
        finally:
            parts.close()
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("restor")]
    assert progress == [
        f"restoring the crawl: the seen-set from every stored URL, then {QUEUED} queued URLs",
        f"restoring: {RESTORE_CHECK} stored URLs read into the seen-set",
        f"restoring: {2 * RESTORE_CHECK} stored URLs read into the seen-set",
        f"restoring: {RESTORE_CHECK} of {QUEUED} queued URLs read",
        f"restoring: {2 * RESTORE_CHECK} of {QUEUED} queued URLs read",
    ]
