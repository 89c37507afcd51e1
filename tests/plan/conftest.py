"""A real metadata store filled through the writer with pages and their fetch histories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from pathlib import Path

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType, SetRanks
from xyro.clock import ManualClock
from xyro.jobs.plan_settings import PlannerSettings

START = 1_700_000_000.0
UNIT = 3600.0


def settings(**over: object) -> PlannerSettings:
    base = dict(time_unit_s=UNIT, bandwidth=20, discovery_share=0.25, min_interval_units=1.0,
                max_interval_units=50.0, importance_floor=0.0, importance_source="rank")
    base.update(over)
    return PlannerSettings(**base)  # type: ignore[arg-type]


def fetch_history(url: str, times: list[float], versions: list[int],
                  last_modified: list[float | None] | None = None,
                  page_type: PageType = PageType.XML,
                  children: tuple[str, ...] = ()) -> list[FetchRecord]:
    """FetchRecords of ``url`` at ``times`` with body version ``versions[k]`` (MD5 = version)."""
    lms = last_modified or [None] * len(times)
    return [FetchRecord(url, t, page_type, http_status=200,
                        signature=f"{url}#{v}".encode(), last_modified=lm,
                        children=children if k == 0 else ())
            for k, (t, v, lm) in enumerate(zip(times, versions, lms))]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    with MetadataStore.open(tmp_path / "xyro.db") as s:
        yield s


@pytest.fixture
def fill(store: MetadataStore) -> Callable[[list[FetchRecord]], None]:
    def _fill(records: list) -> None:
        writer = store.writer()
        try:
            for rec in sorted(records, key=lambda r: getattr(r, "fetched_at", 0.0)):
                writer.submit(rec)
        finally:
            writer.close()
    return _fill


def set_ranks(store: MetadataStore, urls: list[str], importance: list[float] | None = None,
              interest: list[float] | None = None) -> None:
    ids = np.asarray(store.url_ids(urls, create=False), dtype=np.int64)
    writer = store.writer()
    try:
        writer.submit(SetRanks(ids, None if importance is None else np.asarray(importance, float),
                               None if interest is None else np.asarray(interest, float)))
    finally:
        writer.close()


def regular(n: int, every: float, offset: float = 0.0) -> list[float]:
    """n access times every ``every`` units from START + offset units."""
    return [START + UNIT * (offset + k * every) for k in range(n)]


def build(fill: Callable[[list], None]) -> dict[str, list[float]]:
    """Three hosts: always changing (XML), never changing (XML), half changing (HTML);
    each fast page links one unread XML page."""
    pages: dict[str, list[float]] = {}
    records: list[FetchRecord] = []
    for i in range(6):
        url = f"http://fast.example/p{i}.xml"
        pages[url] = regular(8, 2.0, 0.1 * i)
        records += fetch_history(url, pages[url], list(range(8)),
                                 children=(f"http://fast.example/new{i}.xml",))
        url = f"http://slow.example/p{i}.xml"
        pages[url] = regular(8, 2.0, 0.1 * i)
        records += fetch_history(url, pages[url], [0] * 8)
        url = f"http://mixed.example/p{i}.html"
        pages[url] = regular(8, 2.0, 0.1 * i)
        records += fetch_history(url, pages[url], [0, 1, 1, 2, 2, 3, 3, 4],
                                 page_type=PageType.HTML)
    fill(records)
    return pages


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above (test modules cannot import conftest under importlib mode)."""
    return SimpleNamespace(start=START, unit=UNIT, settings=settings, regular=regular,
                           fetch_history=fetch_history, set_ranks=set_ranks, build=build)
