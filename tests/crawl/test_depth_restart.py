"""``scope.max_depth`` holds across a restart (DESIGN.md §2, §7): a page fetched in the same
writer batch as the parent that made it known is stored at its link depth, not at 0, so the
frontier restored from the store does not go deeper than the limit.

Real HTTP server on 127.0.0.1 (a binary tree: page i is at depth ⌊log2(i + 1)⌋), real crawl,
real SQLite file.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from metadata import Enqueue, FetchRecord, MetadataStore, PageType
from xyro.service.crawl_run import run_crawl

MAX_DEPTH = 2


def _depth(path: str) -> int:
    return int(math.log2(int(path[2:-5]) + 1))


def test_a_crawl_stopped_and_resumed_keeps_to_max_depth(tmp_path: Path, tree_site: Any,
                                                       local_app_for: Any) -> None:
    site = tree_site(200)
    settings = (f"seeds={json.dumps([site.base + '/p0.html'])}",
                f"scope.max_depth={MAX_DEPTH}", "crawler.workers=1")
    run_crawl(local_app_for(tmp_path, *settings), max_pages=4)  # a stop in the middle
    summary = run_crawl(local_app_for(tmp_path, *settings))
    assert summary.stop_reason == "frontier exhausted"
    assert sorted(site.requests) == sorted(f"/p{i}.html" for i in range(7)), site.requests
    with sqlite3.connect(tmp_path / "xyro.db") as conn:
        for url, depth in conn.execute("SELECT url, depth FROM urls"):
            path = url[url.rindex("/"):]
            assert depth == _depth(path), (url, depth)


def test_one_batch_creates_a_fetched_child_at_its_depth(tmp_path: Path) -> None:
    """The writer alone: the parent's record (which enqueues the child) and the child's own
    record in one batch; the child's row is created at the depth its record carries."""
    root = "http://h.example/"
    with MetadataStore.open(tmp_path / "x.db") as store:
        with store.writer() as writer:
            writer.submit(Enqueue(root, 1))
            writer.flush()
            writer.submit_many([
                FetchRecord(url=root, fetched_at=1.0, page_type=PageType.HTML, http_status=200,
                            children=(root + "a",), enqueue=((root + "a", 3),)),
                FetchRecord(url=root + "a", fetched_at=2.0, page_type=PageType.HTML,
                            http_status=200, children=(root + "a/x",),
                            enqueue=((root + "a/x", 3),), depth=1)])
        conn = store.read_connection()
        try:
            depths = dict(conn.execute("SELECT url, depth FROM urls"))
        finally:
            conn.close()
    assert depths == {root: 0, root + "a": 1, root + "a/x": 2}
