"""A robots.txt whose redirects loop or run past five hops is unavailable: allow all
(RFC 9309 §2.3.1.2, §2.3.1.3), as the robots cache documents; one reached within five hops
is obeyed. Real HTTP server on 127.0.0.1, real crawl, wall clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from xyro.service.crawl_run import run_crawl

PAGES = ["/a.html", "/private/b.html"]


def _redirect(server: HTTPServer, path: str, to: str) -> None:
    server.expect_request(path).respond_with_data("", status=301, headers={"Location": to})


def _crawl(tmp_path: Path, server: HTTPServer, local_app_for: Any) -> set[str]:
    links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)
    server.expect_request("/").respond_with_data(f"<html><body>{links}</body></html>",
                                                 content_type="text/html")
    for page in PAGES:
        server.expect_request(page).respond_with_data(f"<html>{page}</html>",
                                                      content_type="text/html")
    app = local_app_for(tmp_path, f"seeds={json.dumps([server.url_for('/')])}",
                    "crawler.workers=2")
    summary = run_crawl(app, max_seconds=20)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    return {req.path for req, _ in server.log}


@pytest.mark.parametrize("hops", ["loop", "six"])
def test_robots_redirects_that_never_end_mean_allow_all(hops: str, tmp_path: Path,
                                                        httpserver: HTTPServer,
                                                        local_app_for: Any) -> None:
    if hops == "loop":
        _redirect(httpserver, "/robots.txt", "/r1")
        _redirect(httpserver, "/r1", "/robots.txt")
    else:
        chain = ["/robots.txt", *(f"/r{i}" for i in range(1, 7))]
        for here, there in zip(chain, chain[1:]):
            _redirect(httpserver, here, there)
        httpserver.expect_request("/r6").respond_with_data("User-agent: *\nDisallow: /\n")
    served = _crawl(tmp_path, httpserver, local_app_for)
    assert {"/", *PAGES} <= served


def test_robots_reached_within_five_redirects_is_obeyed(tmp_path: Path,
                                                        httpserver: HTTPServer,
                                                        local_app_for: Any) -> None:
    _redirect(httpserver, "/robots.txt", "/r1")
    _redirect(httpserver, "/r1", "/rules.txt")
    httpserver.expect_request("/rules.txt").respond_with_data(
        "User-agent: *\nDisallow: /private/\n")
    served = _crawl(tmp_path, httpserver, local_app_for)
    assert {"/", "/a.html"} <= served and "/private/b.html" not in served
