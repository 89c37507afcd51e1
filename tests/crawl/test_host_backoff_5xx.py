"""A host whose gateway answers 502 backs off as for a timeout (DESIGN.md §7: consecutive
server failures, exponential back-off), while a 500 (one broken page) backs nothing off.
Real HTTP server on 127.0.0.1, real crawl; the scheduler's back-off base is shortened so the
doubling shows in a second."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

PAGES = 5
BASE_S = 0.2


def _gaps(tmp_path: Path, local_app_for: Any, routed_site: Any, status: int) -> list[float]:
    """Crawl a site whose ``/`` links to ``/p0..p4``, which all answer ``status``; the
    seconds between the requests of those pages."""
    links = "".join(f'<a href="/p{i}">p</a>' for i in range(PAGES)).encode()
    site = routed_site(lambda path: (200 if path == "/" else status, {}, links))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/'])}",
                        "crawler.workers=1")

    def shorter_backoff(parts: Any) -> None:
        parts.crawler.frontier.hosts.backoff_base_s = BASE_S
    summary = run_crawl(app, max_seconds=30, customize=shorter_backoff)
    assert summary.stop_reason == "frontier exhausted"
    times = [t for t, path in zip(site.times, site.requests) if path != "/"]
    assert len(times) == PAGES
    return [b - a for a, b in zip(times, times[1:])]


def test_502s_back_the_host_off_and_500s_do_not(tmp_path: Path, local_app_for: Any,
                                                routed_site: Any) -> None:
    gaps = _gaps(tmp_path / "a", local_app_for, routed_site, 502)
    # After e failures in a row, no start before BASE_S·2^(e−1): 0.2, 0.4, 0.8, 1.6 s.
    assert all(g >= BASE_S * 2 ** k * 0.9 for k, g in enumerate(gaps)), gaps
    gaps = _gaps(tmp_path / "b", local_app_for, routed_site, 500)
    assert sum(gaps) < BASE_S, "a 500 backed the host off"
