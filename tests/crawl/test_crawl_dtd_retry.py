"""A DTD that could not be fetched fails the documents needing it at once, for a while
(``LoaderSettings.failed_need_retry_s``), then is asked again: a DTD server's 500 is rarely
for good, and documents met after it is back must load (paper 003 §4). One fetched serves
for a day (``LoaderSettings.entity_max_age_s``), then is fetched again. Real HTTP server on
127.0.0.1, real SQLite, real lxml; the clock jumps over the hour."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from xyro.app import App, build_crawler
from xyro.crawl.admission import Source
from xyro.loader import LoaderSettings
from xyro.service.crawl_run import queue_seeds

DTD = b"<!ELEMENT r (#PCDATA)>\n"


def _doc(text: str) -> bytes:
    return f'<?xml version="1.0"?>\n<!DOCTYPE r SYSTEM "r.dtd">\n<r>{text}</r>\n'.encode()


def test_a_failed_dtd_is_asked_again_after_a_while(
        tmp_path: Path, local_app_for: Any, routed_site: Any, stepped_clock: Any) -> None:
    dtd_answers = iter([500])   # once, then served

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/r.dtd":
            status = next(dtd_answers, 200)
            return status, {"Content-Type": "application/xml-dtd"}, DTD if status == 200 else b""
        return 200, {"Content-Type": "application/xml"}, _doc(path.strip("/.xml"))

    site = routed_site(respond)
    clock = stepped_clock()   # the wall clock's time, plus the jumps of advance()
    app = App(local_app_for(tmp_path).config, clock)
    with app.open_store() as store:
        parts = build_crawler(app, store)
        try:
            crawler = parts.crawler
            for doc in ("one", "two"):   # two fails at once: r.dtd failed a moment ago
                queue_seeds(crawler.frontier, [f"{site.base}/{doc}.xml"], source=Source.OPERATOR)
                crawler.run(max_seconds=30)
                clock.advance(60)
            clock.advance(LoaderSettings().failed_need_retry_s)
            queue_seeds(crawler.frontier, [f"{site.base}/three.xml"], source=Source.OPERATOR)
            crawler.run(max_seconds=30)
        finally:
            parts.close()
    assert site.requests.count("/r.dtd") == 2, site.requests
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        types = dict(conn.execute("SELECT url, type FROM urls WHERE url LIKE '%.xml'"))
        errors = [d for (d,) in conn.execute("SELECT detail FROM errors")]
    finally:
        conn.close()
    assert types == {f"{site.base}/one.xml": "error", f"{site.base}/two.xml": "error",
                     f"{site.base}/three.xml": "xml"}, (types, errors)
    assert any("r.dtd" in d and "500" in d for d in errors), errors


def test_a_dtd_is_fetched_again_once_a_day_old(
        tmp_path: Path, local_app_for: Any, routed_site: Any, stepped_clock: Any) -> None:
    # A DTD changes too, and documents are validated against it: the copy in memory, or
    # the one an earlier run stored, serves for a day after its fetch, then it is fetched
    # again (before, never again: new versions were validated against the first copy).
    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/r.dtd":
            return 200, {"Content-Type": "application/xml-dtd"}, DTD
        return 200, {"Content-Type": "application/xml"}, _doc(path.strip("/.xml"))

    site = routed_site(respond)
    clock = stepped_clock()   # the wall clock's time, plus the jumps of advance()
    app = App(local_app_for(tmp_path).config, clock)
    day = LoaderSettings().entity_max_age_s
    fetches = []
    for docs in (("one",), ("two", "three")):   # a restart between one and two
        with app.open_store() as store:
            parts = build_crawler(app, store)
            try:
                for doc in docs:
                    queue_seeds(parts.crawler.frontier, [f"{site.base}/{doc}.xml"],
                                source=Source.OPERATOR)
                    parts.crawler.run(max_seconds=30)
                    fetches.append(site.requests.count("/r.dtd"))
                    clock.advance(day / 2)
            finally:
                parts.close()
    # one: fetched; two, half a day later: the copy the first process stored serves the
    # second; three, a day after the fetch: fetched again.
    assert fetches == [1, 1, 2], (fetches, site.requests)
