"""pages/s counts the pages fetched: a page robots.txt refused is a page record, never a
fetch (the snapshot's rate, and the summary line's rate over its window)."""

from __future__ import annotations

import time

import pytest

from xyro.crawl.activity import SummaryLine
from xyro.crawl.stats import CrawlStats


def test_the_rate_leaves_out_the_pages_robots_txt_refused() -> None:
    stats = CrawlStats(started_monotonic=time.monotonic() - 10.0)
    for _ in range(30):
        stats.page("xml", 100, None, False, status=200, elapsed_s=0.01)
    for _ in range(10):
        stats.page("error", 0, "robots", False)  # as Crawler._unfetched records a refusal
    snap = stats.snapshot()
    assert snap["pages"] == 40
    assert snap["pages_per_s"] == pytest.approx(3.0, rel=0.02)  # 30 fetched in 10 s


def test_the_summary_window_rate_leaves_them_out_too() -> None:
    now = [0.0]
    summary = SummaryLine(monotonic=lambda: now[0])
    summary.emit({"pages": 100, "pages_per_s": 1.0, "errors_by_kind": {"robots": 10}})
    now[0] = 10.0
    line = summary.emit({"pages": 150, "errors_by_kind": {"robots": 30}})
    assert line.startswith("summary: 3.0 pages/s over 10 s, 120 pages fetched in all (30 more "
                           "refused by robots.txt);")  # 30 fetched in the window
