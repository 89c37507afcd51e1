"""A kill while a sitemap's pages are being queued loses none of them: they are queued before
the sitemap's own record (a listing spans several of the writer's transactions), so the
sitemap is still queued at the restart and read again. Recorded first, it was known and
fetched, and the pages not yet queued were lost to every later run of `xyro crawl`.

Real HTTP server on 127.0.0.1, real crawl, real SQLite. The kill is simulated as in
test_unit_budget_crash.py: every op submitted after its moment is dropped (the writer commits
in submission order, so what SIGKILL leaves is a prefix of the ops)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from metadata.records import Enqueue
from xyro.app import build_crawler
from xyro.service.crawl_run import queue_sitemaps, run_crawl

LISTED = 3000
KILL_AT = 1000   # listed pages whose Enqueue committed when the process dies

def _known_pages(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM urls WHERE url LIKE '%.html'").fetchone()[0]
    finally:
        conn.close()


def test_a_kill_while_a_sitemap_is_read_loses_none_of_its_pages(
        tmp_path: Path, local_app_for: Any, routed_site: Any, kill_point: Any) -> None:
    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path != "/sitemap.xml":
            return 200, {}, b"<html>page</html>"
        urls = "".join(f"<url><loc>{site.base}/p{i}.html</loc></url>" for i in range(LISTED))
        return 200, {"Content-Type": "application/xml"}, (
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>").encode()

    site = routed_site(respond)
    app = local_app_for(tmp_path, f"sitemaps={json.dumps([site.base + '/sitemap.xml'])}",
                        "crawler.politeness.delay_s=0.5")
    stop = threading.Event()
    with app.open_store() as store:
        parts = build_crawler(app, store)
        listed: list[str] = []

        def after(op: Any) -> bool:   # KILL_AT listed pages queued: the process dies
            if isinstance(op, Enqueue) and op.url.endswith(".html"):
                listed.append(op.url)
            return len(listed) >= KILL_AT
        kill = kill_point(parts, stop, after)
        queue_sitemaps(parts.crawler, app.config.sitemaps)
        parts.crawler.run(max_seconds=30, stop=stop)
        parts.close()
    assert kill.dead and _known_pages(tmp_path / "xyro.db") <= KILL_AT

    run_crawl(app, max_seconds=3)   # the restart, with the same config
    assert site.requests.count("/sitemap.xml") == 2
    assert _known_pages(tmp_path / "xyro.db") == LISTED
