"""Sitemaps crawled for real (paper 003 §3, DESIGN.md §2): a gzip-compressed sitemap served
as ``application/gzip`` is read and its pages published, a sitemap over the 50,000-entry
limit is cut with a WARNING and an errors row an operator can query (``xyro status``,
``v_recent_errors``), never silently, and one larger than a page may be is read all the same. Threaded http.server on 127.0.0.1, real SQLite."""

from __future__ import annotations

import gzip
import json
import logging
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from xyro.app import App
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.crawl.publishing import NOTICE_KIND
from xyro.publication.sitemaps import MAX_SITEMAP_URLS
from xyro.service.crawl_run import run_crawl

SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
Routes = dict[str, tuple[str, bytes]]   # path -> (Content-Type, body)


class _Site(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: Routes = {}
        self.hits: list[str] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Site

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.hits.append(self.path)
        content_type, body = self.server.routes.get(self.path, ("text/plain", b""))
        self.send_response(200 if self.path in self.server.routes else 404)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[_Site]:
    server = _Site()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _crawl(tmp_path: Path, sitemap: str) -> App:
    """Crawl from the one configured ``sitemap`` into ``tmp_path``/xyro.db until done."""
    config = load_config(None, {}, [
        "scope.allow_private_addresses=true", "crawler.politeness.delay_s=0",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}", f"sitemaps={json.dumps([sitemap])}"])
    app = App(config, WallClock())
    with app.open_store(create=True):
        pass
    summary = run_crawl(app, max_seconds=30)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    return app


def _rows(db: Path, sql: str, *args: object) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _urlset(*locs: str) -> bytes:
    return (f'<?xml version="1.0"?>\n<urlset xmlns="{SM}">'
            + "".join(f"<url><loc>{loc}</loc></url>" for loc in locs) + "</urlset>").encode()


def test_an_application_gzip_sitemap_is_read_and_its_pages_published(
        tmp_path: Path, site: _Site) -> None:
    listed = site.url("/listed.html")
    xml = _urlset(listed)
    site.routes = {"/sitemap.xml.gz": ("application/gzip", gzip.compress(xml, mtime=0)),
                   "/listed.html": ("text/html", b"<html><body>listed</body></html>")}
    _crawl(tmp_path, site.url("/sitemap.xml.gz"))
    assert "/listed.html" in site.hits, site.hits
    db = tmp_path / "xyro.db"
    [(page_type, content_type)] = _rows(db, "SELECT type, content_type FROM urls WHERE url = ?",
                                        site.url("/sitemap.xml.gz"))
    assert (page_type, content_type) == ("xml", "application/gzip")
    # The warehouse keeps the XML the gzip file held, not the gzip bytes.
    [(key,)] = _rows(db, "SELECT v.storage_key FROM xml_versions v JOIN urls u "
                         "ON u.id = v.url_id WHERE u.url = ?", site.url("/sitemap.xml.gz"))
    assert zlib.decompress((tmp_path / "warehouse" / key).read_bytes()) == xml


def test_a_sitemap_over_the_limit_is_cut_with_a_warning_and_an_errors_row(
        tmp_path: Path, site: _Site, caplog: pytest.LogCaptureFixture) -> None:
    listed = site.url("/listed.html")
    # One page listed 50,001 times: the cap counts entries, and the crawl fetches one page.
    site.routes = {"/big.xml": ("application/xml", _urlset(*[listed] * (MAX_SITEMAP_URLS + 1))),
                   "/listed.html": ("text/html", b"<html><body>listed</body></html>")}
    sitemap = site.url("/big.xml")
    with caplog.at_level(logging.INFO, logger="xyro.crawl.publishing"):
        _crawl(tmp_path, sitemap)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and r.name == "xyro.crawl.publishing"]
    assert len(warnings) == 1, warnings
    assert sitemap in warnings[0] and f"{MAX_SITEMAP_URLS} kept" in warnings[0]
    assert f"more than {MAX_SITEMAP_URLS} entries" in warnings[0] and "limit" in warnings[0]
    db = tmp_path / "xyro.db"
    rows = _rows(db, "SELECT u.type, e.kind, e.detail FROM errors e JOIN urls u "
                     "ON u.id = e.url_id WHERE u.url = ?", sitemap)
    assert len(rows) == 1, rows
    page_type, kind, detail = rows[0]
    assert (page_type, kind) == ("xml", NOTICE_KIND)   # read, and still an XML page
    assert f"lists more than {MAX_SITEMAP_URLS} entries: {MAX_SITEMAP_URLS} kept" in detail
    assert "/listed.html" in site.hits


def test_a_sitemap_larger_than_a_page_may_be_is_read_and_not_kept(
        tmp_path: Path, site: _Site) -> None:
    """sitemaps.org allows 50 MB uncompressed, which servers often send as is: a known
    sitemap may be as large on the wire as decoded (``max_decoded_bytes``), while a page
    keeps ``max_body_bytes``. Past ``loader.max_document_bytes`` it is read for its entries
    and stays an XML page, with a notice saying why no version of it is stored."""
    listed, big_page = site.url("/listed.html"), site.url("/big.html")
    sitemap_xml = _urlset(*[listed] * 30_000, big_page)     # about 1.2 MiB
    assert 1 << 20 < len(sitemap_xml) < 4 << 20
    site.routes = {"/big.xml": ("application/xml", sitemap_xml),
                   "/listed.html": ("text/html", b"<html><body>listed</body></html>"),
                   "/big.html": ("text/html", b"<html><body>" + b"x" * (2 << 20))}
    config = load_config(None, {}, [
        "scope.allow_private_addresses=true", "crawler.politeness.delay_s=0",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}",
        f"sitemaps={json.dumps([site.url('/big.xml')])}",
        f"crawler.limits.max_body_bytes={1 << 20}",
        f"crawler.limits.max_decoded_bytes={4 << 20}",
        f"loader.max_document_bytes={1 << 20}"])
    app = App(config, WallClock())
    with app.open_store(create=True):
        pass
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    assert "/listed.html" in site.hits, site.hits[:5]
    db = tmp_path / "xyro.db"
    rows = _rows(db, "SELECT u.type, e.kind, e.detail FROM urls u LEFT JOIN errors e "
                     "ON e.url_id = u.id WHERE u.url = ?", site.url("/big.xml"))
    assert len(rows) == 1, rows
    page_type, kind, detail = rows[0]
    assert (page_type, kind) == ("xml", NOTICE_KIND), rows
    assert "not kept in the warehouse" in detail and "loader.max_document_bytes" in detail
    assert _rows(db, "SELECT count(*) FROM xml_versions v JOIN urls u ON u.id = v.url_id "
                     "WHERE u.url = ?", site.url("/big.xml")) == [(0,)]
    # A page keeps the page cap.
    [(big_type, big_kind)] = _rows(db, "SELECT u.type, e.kind FROM urls u JOIN errors e "
                                       "ON e.url_id = u.id WHERE u.url = ?", big_page)
    assert (big_type, big_kind) == ("error", "too_large")
