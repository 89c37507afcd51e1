"""The seen-set is sized for what the store already holds, and says when a crawl outgrows
it: past its size a Bloom filter takes more and more new URLs for seen (a quarter of them
at three times its size), and discovery would skip them with no sign. Real SQLite, real
crawl of a server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from metadata.records import Enqueue
from xyro.app import build_crawler
from xyro.service.crawl_run import run_crawl


def test_a_store_larger_than_expected_urls_sizes_the_seen_set_and_says_so(
        tmp_path: Path, local_app_for: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = local_app_for(tmp_path, "crawler.expected_urls=100")
    with app.open_store() as store:
        writer = store.writer()
        writer.submit_many([Enqueue(f"http://a.example/{i}", 3) for i in range(500)])
        writer.close()
        with caplog.at_level(logging.WARNING):
            parts = build_crawler(app, store)
        try:
            assert parts.crawler.seen.expected == 1000
        finally:
            parts.close()
    assert any("holds 500 URLs, more than crawler.expected_urls (100)" in r.getMessage()
               for r in caplog.records)


def test_a_crawl_past_the_seen_sets_size_says_so_once(
        tmp_path: Path, local_app_for: Any, routed_site: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(40))
    site = routed_site(lambda path: (200, {}, f"<html>{links}</html>".encode()))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}",
                        "crawler.expected_urls=10")
    with caplog.at_level(logging.WARNING):
        run_crawl(app, max_pages=1)
    warned = [r for r in caplog.records if "more than the 10 URLs it was sized for" in
              r.getMessage()]
    assert len(warned) == 1
