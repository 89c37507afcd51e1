"""A sitemap that declares a DTD waits, like any XML document, for the DTD to be fetched;
once loaded it is still read as a sitemap and its pages enter the frontier (they were
dropped with the pending load). Real HTTP server on 127.0.0.1, real crawl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_httpserver import HTTPServer

from xyro.service.crawl_run import run_crawl

SM = "http://www.sitemaps.org/schemas/sitemap/0.9"


def test_a_sitemap_with_a_dtd_is_read_once_its_dtd_arrived(tmp_path: Path,
                                                            httpserver: HTTPServer,
                                                            local_app_for: Any) -> None:
    listed = httpserver.url_for("/listed.html")
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    httpserver.expect_request("/sitemap.xml").respond_with_data(
        f'<?xml version="1.0"?>\n<!DOCTYPE urlset SYSTEM "sitemap.dtd">\n'
        f'<urlset xmlns="{SM}"><url><loc>{listed}</loc></url></urlset>',
        content_type="application/xml")
    httpserver.expect_request("/sitemap.dtd").respond_with_data(
        "<!ELEMENT urlset ANY><!ELEMENT url ANY><!ELEMENT loc (#PCDATA)>"
        "<!ATTLIST urlset xmlns CDATA #IMPLIED>", content_type="application/xml-dtd")
    httpserver.expect_request("/listed.html").respond_with_data(
        "<html><body>listed</body></html>", content_type="text/html")
    app = local_app_for(tmp_path, f"sitemaps={json.dumps([httpserver.url_for('/sitemap.xml')])}")
    summary = run_crawl(app, max_seconds=20)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    served = [req.path for req, _ in httpserver.log]
    assert "/sitemap.dtd" in served and "/listed.html" in served, served
