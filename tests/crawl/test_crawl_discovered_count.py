"""The crawl's ``discovered`` counter (``xyro status``, the progress line) counts the URLs a
sitemap brings as it counts those of links: new to the frontier, queued or refused. Real
HTTP server on 127.0.0.1, real crawl into real SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

PAGES = [f"/p{i}.html" for i in range(4)]


def test_pages_listed_by_a_sitemap_count_as_discovered(tmp_path: Path, local_app_for: Any,
                                                       routed_site: Any) -> None:
    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path != "/sitemap.xml":
            return 200, {}, b"<html><body>no links</body></html>"
        urls = "".join(f"<url><loc>{site.base}{p}</loc></url>" for p in PAGES)
        return 200, {"Content-Type": "application/xml"}, (
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>").encode()
    site = routed_site(respond)
    app = local_app_for(tmp_path, "seeds=[]",
                        f"sitemaps={json.dumps([site.base + '/sitemap.xml'])}")
    summary = run_crawl(app, max_seconds=30)

    assert summary.stop_reason == "frontier exhausted"
    assert sorted(site.requests) == sorted(["/sitemap.xml", *PAGES])
    assert summary.stats["discovered"] == len(PAGES)
