"""The operator's log: host warnings, the summary line, idling (unit level)."""

from __future__ import annotations

import logging

import pytest

from xyro.clock import ManualClock
from xyro.crawl.activity import HostWarnings, SummaryLine, format_summary, refused_private


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_host_warnings_are_rate_limited_per_host_and_count_what_they_held(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(1000.0)
    warn = HostWarnings(clock, interval_s=600.0)
    with caplog.at_level(logging.WARNING):
        warn.error("http://a.example/1", "dns", "a.example: no such host")
        warn.error("http://a.example/2", "dns", "again")
        warn.error("http://a.example/3", "timeout", "slow")
        warn.error("http://b.example/", "connect", "refused")
        clock.advance(599.0)
        warn.error("http://a.example/4", "dns", "still")
        clock.advance(1.0)
        warn.error("http://a.example/5", "dns", "and again")
    lines = _warnings(caplog)
    assert len(lines) == 3, lines
    assert lines[0].startswith("host a.example: dns error: a.example: no such host")
    assert "check the host name" in lines[0]
    assert lines[1].startswith("host b.example: connect error")
    assert "(and 3 more in the last 600 s: dns 2, timeout 1)" in lines[2]


def test_page_verdicts_are_not_host_warnings(caplog: pytest.LogCaptureFixture) -> None:
    warn = HostWarnings(ManualClock(0.0), interval_s=0.0)
    with caplog.at_level(logging.WARNING):
        for kind in ("http", "parse", "content_type", "robots", "redirect"):
            warn.error("http://a.example/", kind, "a page problem")
        warn.error("not a url", "dns", "ignored, not a crash")
    assert _warnings(caplog) == []


def test_address_warning_names_the_config_key(caplog: pytest.LogCaptureFixture) -> None:
    warn = HostWarnings(ManualClock(0.0))
    with caplog.at_level(logging.WARNING):
        warn.error("http://127.0.0.2:8080/", "address", "127.0.0.2 (loopback)")
    (line,) = _warnings(caplog)
    assert "host 127.0.0.2:8080: address error" in line
    assert "scope.allow_private_addresses: true" in line


def test_host_memory_is_bounded() -> None:
    warn = HostWarnings(ManualClock(0.0), interval_s=1e9, max_hosts=100)
    for i in range(1000):
        warn.error(f"http://h{i}.example/", "dns", "x")
    assert len(warn._hosts) == 100


def test_refused_private_sees_literals_and_localhost_without_dns() -> None:
    urls = ["http://127.0.0.2:8080/x", "http://[::1]/", "http://localhost/", "http://10.1.2.3/",
            "http://example.com/", "http://8.8.8.8/", "https://[2001:4860:4860::8888]/"]
    assert refused_private(urls) == urls[:4]


def test_summary_reports_the_window_since_the_last_line(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    summary = SummaryLine(monotonic=lambda: now[0])
    snap = {"pages": 10, "pages_per_s": 0.5, "errors_by_kind": {"dns": 1}, "queued": 5,
            "queued_by_priority": {0: 0, 1: 2, 3: 3}, "in_flight": 2, "hosts_waiting": 4}
    with caplog.at_level(logging.INFO):
        first = summary.emit(snap)
        now[0] = 160.0
        second = summary.emit({**snap, "pages": 130, "errors_by_kind": {"dns": 1, "http": 6}},
                              due=42)
    assert first.startswith("summary: 0.5 pages/s since the start, 10 pages fetched in all;")
    assert "errors since last: dns=1" in first
    assert "due this unit not planned yet" in first
    assert second.startswith("summary: 2.0 pages/s over 60 s, 130 pages fetched in all;")
    assert "errors since last: http=6;" in second
    assert ("queued 5 (p1=2 p3=3), in flight 2, hosts with queued URLs 4; "
            "due this unit 42") in second
    assert [r.getMessage() for r in caplog.records] == [first, second]


def test_idle_and_busy_are_logged_once_per_transition(caplog: pytest.LogCaptureFixture) -> None:
    summary = SummaryLine()
    empty, busy = {"queued": 0, "in_flight": 0}, {"queued": 3, "in_flight": 1}
    with caplog.at_level(logging.INFO):
        for snap in (busy, empty, empty, empty, busy, busy, empty):
            summary.watch_idle(snap, "waiting for the planner")
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(":")[0] for line in lines] == ["idle", "busy", "idle"]
    assert lines[0].endswith("waiting for the planner")


def test_format_summary_without_queues() -> None:
    line = format_summary({}, 0.0, {}, None, None)
    assert line == ("summary: 0.0 pages/s since the start, 0 pages fetched in all; errors since "
                    "last: none; queued 0, in flight 0, hosts with queued URLs 0; due this unit "
                    "not planned yet")
