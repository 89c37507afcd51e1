"""Fixtures of the metadata tests: real SQLite files in tmp_path."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata import FetchRecord, MetadataStore, PageType


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "xyro.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[MetadataStore]:
    with MetadataStore.open(db_path) as s:
        yield s


def md5(text: str) -> bytes:
    return hashlib.md5(text.encode()).digest()


def make_fetch(url: str, at: float, body: str | None = "body", *, children: tuple[str, ...] = (),
            enqueue: tuple[tuple[str, int], ...] = (), status: int = 200,
            page_type: PageType = PageType.HTML, **kw: object) -> FetchRecord:
    """A FetchRecord as the crawler would send it (signature = MD5 of ``body``)."""
    return FetchRecord(url=url, fetched_at=at, page_type=page_type, http_status=status,
                       signature=None if body is None else md5(body), children=children,
                       enqueue=enqueue, **kw)


@pytest.fixture(name="fetched")
def fetched_fixture():  # type: ignore[no-untyped-def]
    """The :func:`make_fetch` helper (conftest is not importable under importlib mode)."""
    return make_fetch


def fill_small_store(store: MetadataStore) -> None:
    """A small crawl touching every table: HTML, XML with versions, errors, ranks, jobs."""
    import numpy as np

    from metadata import (Enqueue, JobRun, SaveOpic, SetRanks, SetRefresh, SetState,
                          UnitSpent, XmlVersion)

    day = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    home, cat, feed, doc = ("http://shop.example/", "http://shop.example/catalog.xml",
                            "http://news.example/feed.xml", "http://shop.example/doc.html")
    dtd = "http://shop.example/catalog.dtd"
    new = "http://shop.example/new.html"
    with store.writer() as w:
        w.submit(Enqueue(home, 1, enqueued_at=day))
        w.submit(make_fetch(home, day + 60, "home v1", children=(cat, doc, feed, home),
                            enqueue=((cat, 1), (doc, 2), (feed, 2))))
        w.submit(make_fetch(cat, day + 120, "<catalog/>", page_type=PageType.XML,
                            content_type="application/xml", size=2048))
        w.submit(XmlVersion(cat, md5("<catalog/>"), md5("c14n"), day + 120, 2048,
                            "ab/abcdef", True, dtd_url=dtd))
        w.submit(make_fetch(feed, day + 180, None, status=503, page_type=PageType.ERROR,
                            error_kind="http", error_detail="503 Service Unavailable"))
        w.submit(make_fetch(doc, day + 240, None, status=None, page_type=PageType.ERROR,
                            error_kind="timeout", error_detail="read deadline 30 s exceeded"))
        w.submit(make_fetch(home, day + 3600, "home v2", children=(cat, doc, new),
                            enqueue=((new, 3),)))
        w.submit(make_fetch(cat, day + 3660, "<catalog><item/></catalog>",
                            page_type=PageType.XML, size=2100))
        w.submit(XmlVersion(cat, md5("<catalog><item/></catalog>"), md5("c14n2"), day + 3660,
                            2100, "ab/abcd99", False, "element item not declared", dtd))
        w.flush()
        ids = np.array(store.url_ids([home, cat, feed, doc]), dtype=np.int64)
        w.submit(SetRanks(ids, importance=np.array([1.9, 1.4, 0.4, 0.3]),
                          interest=np.array([2.2, 1.0, 0.5, 0.3])))
        w.submit(SaveOpic(day + 3650, 2.5, b"checkpoint bytes", (home, cat, feed, doc),
                          cash=np.array([0.05, 0.1, 0.02, 0.03]),
                          history=np.array([0.4, 0.2, 0.1, 0.1]),
                          estimate=np.array([0.45, 0.3, 0.12, 0.13])))
        w.submit(SetRefresh(int(ids[0]), 1 / 3600, "mle", 492_010, 2.0))
        w.submit(SetRefresh(int(ids[1]), 1 / 86400, "last_modified", 492_012, 6.0))
        w.submit(SetState("S", 0.0203))
        w.submit(JobRun("rank", day + 3700, day + 3702.5, "ok", "direct+inverse, 31 iter"))
        w.submit(JobRun("plan", day + 3720, day + 3720.2, "ok", "K=0.81, 2 pages due"))
        w.submit(UnitSpent(20454, 86400.0, 4, 4, 2, 1, 1, 1, True, day))
        w.submit(UnitSpent(20455, 86400.0, 4, 2, 1, 1, 0, None, False, day + 3700))


@pytest.fixture
def small_store(store: MetadataStore) -> MetadataStore:
    fill_small_store(store)
    return store
