"""When the crawl gives up on an origin whose robots.txt cannot be reached: only after more
than ``max_retries`` consecutive failures spanning ``max_retries`` retry periods, as Heritrix
retries a failed prerequisite before failing the URIs that wait on it
(xyro.crawl.retry_policy.PrerequisiteRetries)."""

from __future__ import annotations

from xyro.crawl.retry_policy import PrerequisiteRetries
from xyro.records import ErrorKind

RETRY_S = 60.0   # crawler.politeness.robots_unreachable_retry_s
ATTEMPTS = 4     # the first try and max_retries (3) retries


def test_the_crawl_gives_up_only_after_retries_over_the_span_and_an_answer_resets_it() -> None:
    failures = PrerequisiteRetries(max_retries=3)
    origin, host = "http://a.org", "a.org"
    for t in (0.0, 1.0, 2.0, 3.0, 4.0):   # tries in quick succession: not hours apart
        assert not failures.failed(origin, host, ErrorKind.DNS, "dns", t, RETRY_S)
    assert failures.failed(origin, host, ErrorKind.DNS, "dns", 3 * RETRY_S, RETRY_S)
    assert "6 attempts over" in failures.draining[origin][2]
    failures.answered(origin)             # the host answered: nothing is drained
    assert failures.draining == {} and failures.attempts(origin) == 0
    for k in range(ATTEMPTS - 1):
        assert not failures.failed(origin, host, ErrorKind.DNS, "dns", k * RETRY_S, RETRY_S)
    assert failures.failed(origin, host, ErrorKind.DNS, "dns", 3 * RETRY_S, RETRY_S)
