"""Shared fixtures for the politeness/frontier tests: a manual clock and wired components."""

from __future__ import annotations

import pytest

from xyro.clock import ManualClock
from xyro.crawl.frontier import Frontier
from xyro.crawl.hosts import HostScheduler
from xyro.net.robots import RobotsCache

T0 = 1_700_000_000.0  # 2023-11-14, a fixed start for every test


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def robots(clock: ManualClock) -> RobotsCache:
    return RobotsCache("XyroBot", clock, ttl_s=3600, unreachable_retry_s=600, max_crawl_delay_s=30)


@pytest.fixture
def hosts(clock: ManualClock) -> HostScheduler:
    return HostScheduler(1.0, clock)


@pytest.fixture
def frontier(hosts: HostScheduler, robots: RobotsCache, clock: ManualClock) -> Frontier:
    return Frontier(hosts, robots, clock)
