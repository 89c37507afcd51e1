"""A document may have at most ``loader.max_entity_urls`` DTD and entity URLs fetched, over
all its rounds (DESIGN.md §7, untrusted input): one declaring thousands would otherwise send
the crawler to fetch each, wherever it points. Real HTTP server on 127.0.0.1, real SQLite,
real lxml."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

LIMIT = 12


def _doc(entities: int) -> bytes:
    decls = "".join(f'<!ENTITY e{i} SYSTEM "ent/{i}.ent">' for i in range(entities))
    uses = "".join(f"&e{i};" for i in range(entities))
    return f'<?xml version="1.0"?>\n<!DOCTYPE r [{decls}]>\n<r>{uses}</r>\n'.encode()


def test_a_document_needing_too_many_entity_urls_is_an_error_not_a_fetch_storm(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/ent/"):
            return 200, {"Content-Type": "text/plain"}, b"x"
        entities = {"/few.xml": LIMIT, "/many.xml": 10 * LIMIT}[path]
        return 200, {"Content-Type": "application/xml"}, _doc(entities)

    site = routed_site(respond)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/few.xml'])}",
                        f"loader.max_entity_urls={LIMIT}")
    assert run_crawl(app, max_seconds=60).stop_reason == "frontier exhausted"
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/many.xml'])}",
                        f"loader.max_entity_urls={LIMIT}")
    assert run_crawl(app, max_seconds=60).stop_reason == "frontier exhausted"
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        types = dict(conn.execute("SELECT url, type FROM urls WHERE url LIKE '%.xml'"))
        detail = conn.execute("SELECT e.kind, e.detail FROM errors e JOIN urls u "
                              "ON u.id = e.url_id WHERE u.url LIKE '%many.xml'").fetchone()
    finally:
        conn.close()
    assert types == {site.base + "/few.xml": "xml", site.base + "/many.xml": "error"}
    assert detail[0] == "entity_refused" and f"more than {LIMIT} DTD and entity URLs" in detail[1]
    assert len([p for p in site.requests if p.startswith("/ent/")]) == LIMIT  # few's only
