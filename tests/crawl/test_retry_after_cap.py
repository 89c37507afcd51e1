"""A Retry-After of years is capped for the URL as for its host
(``crawler.politeness.max_retry_after_s``, DESIGN.md §7): the URL comes back after the cap,
and a crawl with nothing else to do ends instead of waiting for it for good. Real HTTP
server on 127.0.0.1, real crawl, real SQLite file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from xyro.crawl.retry_policy import RetryPolicy
from xyro.service.crawl_run import run_crawl


def test_a_retry_after_of_years_is_capped_for_the_url(tmp_path: Path, local_app_for: Any,
                                                      routed_site: Any) -> None:
    """``/`` links to ``/p0``, whose first answer is a 503 with Retry-After 10^9 s."""
    asked: list[str] = []

    def respond(path: str) -> tuple[int, dict[str, str], bytes]:
        asked.append(path)
        if path == "/p0" and asked.count("/p0") == 1:
            return 503, {"Retry-After": "999999999"}, b"<p>busy</p>"
        return 200, {}, b'<a href="/p0">p0</a>' if path == "/" else b"<p>ok</p>"

    site = routed_site(respond)
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}",
                        "crawler.politeness.max_retry_after_s=1")
    started = time.monotonic()
    summary = run_crawl(app, max_seconds=30)
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    assert site.requests.count("/p0") == 2 and time.monotonic() - started < 20


def test_the_policy_caps_every_pause() -> None:
    policy = RetryPolicy(max_retries=5, base_pause_s=60.0, max_pause_s=100.0)
    assert policy.pause("u", 503, 1e9) == 100.0
    assert policy.pause("u", 503, 5.0) == 5.0
    assert policy.pause("v", 429, None) == 60.0 and policy.pause("v", 429, None) == 100.0
