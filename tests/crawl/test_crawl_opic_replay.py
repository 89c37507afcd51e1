"""OPIC restored at start agrees with the store (000 §2–3, DESIGN.md §5 "OPIC";
xyro.crawl.opic_replay): the visits of pages fetched after the last checkpoint, or of every
fetched page when there is none, are replayed in fetch order with their stored children."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType
from xyro.app import App, build_opic
from xyro.clock import ManualClock
from xyro.config_load import load_config
from xyro.content.html_links import likely_xml
from xyro.crawl.robots_answers import ORIGIN_UNREACHABLE
from xyro.crawl.opic_online import Focus, OnlineOpic, OpicCheckpoints

T0 = 1_000.0
SITE = "http://site.example"

#: (page, children) in fetch order: each page read once, a feed among the children (focus),
#: pages never fetched (the frontier), a page linked twice from one page.
READS: list[tuple[str, tuple[str, ...]]] = [
    (f"{SITE}/", (f"{SITE}/a", f"{SITE}/b", f"{SITE}/feed.xml", f"{SITE}/a")),
    (f"{SITE}/a", (f"{SITE}/b", f"{SITE}/c", f"{SITE}/u1")),
    (f"{SITE}/feed.xml", (f"{SITE}/d", f"{SITE}/doc1.xml")),
    (f"{SITE}/b", (f"{SITE}/", f"{SITE}/d", f"{SITE}/u2")),
    (f"{SITE}/c", ()),
    (f"{SITE}/d", (f"{SITE}/a", f"{SITE}/doc2.xml", f"{SITE}/u3")),
    (f"{SITE}/doc1.xml", (f"{SITE}/", f"{SITE}/u4")),
    (f"{SITE}/doc2.xml", (f"{SITE}/c", f"{SITE}/u1")),
]


def _app(tmp_path: Path) -> App:
    """An App with the default OPIC settings (focus on XML links, boost 1) on a ManualClock."""
    return App(load_config(None, {}, [f"storage.database={tmp_path / 'x.db'}",
                                      f"storage.warehouse_dir={tmp_path / 'w'}"]),
               ManualClock(T0))


def _read(url: str, at: float, children: Sequence[str], body: str = "") -> FetchRecord:
    return FetchRecord(url=url, fetched_at=at, page_type=PageType.HTML, http_status=200,
                       signature=hashlib.md5(f"{url} {body}".encode()).digest(),
                       children=tuple(children))


def _failed(url: str, at: float) -> FetchRecord:
    return FetchRecord(url=url, fetched_at=at, page_type=PageType.ERROR, http_status=500,
                       error_kind="http", error_detail="HTTP 500")


def _visit(opic: OnlineOpic, url: str, children: Sequence[str]) -> None:
    """The crawl's visit, with the focus flags a replay can know (the URL's look)."""
    opic.visit(url, children, [likely_xml(c, None) for c in children])


def _assert_same(restored: OnlineOpic, reference: OnlineOpic) -> None:
    """Same pages with the same ids, the same cash, history, G and V (to rounding)."""
    urls, estimate = restored.estimates()
    ref_urls, ref_estimate = reference.estimates()
    assert urls == ref_urls
    got, want = restored.checkpoint(), reference.checkpoint()
    np.testing.assert_allclose(got.cash, want.cash, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.history, want.history, rtol=0, atol=1e-12)
    np.testing.assert_allclose(estimate, ref_estimate, rtol=0, atol=1e-12)
    snap, ref_snap = restored.snapshot(), reference.snapshot()
    for key in ("pages", "clock_g", "virtual_cash", "total_cash"):
        assert snap[key] == pytest.approx(ref_snap[key], abs=1e-12), key


def test_a_store_fetched_without_a_checkpoint_is_replayed_in_fetch_order(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No checkpoint (OPIC off while these pages were crawled): the restored OPIC is the one
    that visited the store's fetched pages in the order their fetches started; a failed
    fetch is a visit with no children; a page fetched for its links alone is none, and
    neither is a record of no fetch (robots.txt)."""
    app = _app(tmp_path)
    reference = OnlineOpic(focus=Focus())
    records = [_read(url, T0 + k, kids) for k, (url, kids) in enumerate(READS)]
    records.append(_failed(f"{SITE}/u2", T0 + 20))
    # Records that were no fetch, so no visit: robots.txt forbade u3; u4 was drained when
    # its origin's robots.txt could not be fetched.
    records.append(FetchRecord(url=f"{SITE}/u3", fetched_at=T0 + 22, page_type=PageType.ERROR,
                               error_kind="robots", error_detail="disallowed by robots.txt"))
    records.append(FetchRecord(
        url=f"{SITE}/u4", fetched_at=T0 + 23, page_type=PageType.ERROR, error_kind="connect",
        error_detail=ORIGIN_UNREACHABLE.format(SITE) + " (refused); the host is tried again"))
    outside = FetchRecord(url="http://elsewhere.example/", fetched_at=T0 + 21,
                          page_type=PageType.OUTSIDE, http_status=200, signature=b"o" * 16,
                          children=(f"{SITE}/u3",))
    with MetadataStore.open(tmp_path / "x.db") as store:
        with store.writer() as writer:
            for record in reversed(records):  # stored out of order: replayed by fetch time
                writer.submit(record)
            writer.submit(outside)
        for url, kids in READS:
            _visit(reference, url, kids)
        _visit(reference, f"{SITE}/u2", [])
        with caplog.at_level(logging.INFO, logger="xyro.crawl.opic_replay"):
            restored = build_opic(app, store, [].append)
    assert restored is not None
    _assert_same(restored.opic, reference)
    assert (restored.opic.replayed, restored.opic.visits) == (len(READS) + 1, 0)
    lines = [r.getMessage() for r in caplog.records if r.name == "xyro.crawl.opic_replay"]
    assert len(lines) == 1 and "replayed 9 visits" in lines[0] and "no checkpoint" in lines[0]


def test_visits_after_the_last_checkpoint_are_replayed_as_the_uninterrupted_run(
        tmp_path: Path) -> None:
    """A crawl killed one checkpoint interval after its last checkpoint: the pages first read
    after it (one whose fetch started before it), a page read again with new links, and a
    304 (no visit) are in the store only; after the replay the state is the run's that was
    never interrupted."""
    app = _app(tmp_path)
    clock = app.clock
    assert isinstance(clock, ManualClock)
    run = OnlineOpic(focus=Focus())
    before, after = READS[:4], READS[4:]
    with MetadataStore.open(tmp_path / "x.db") as store:
        with store.writer() as writer:
            checkpoints = OpicCheckpoints(run, writer.submit, clock, interval_s=60.0)
            for k, (url, kids) in enumerate(before):
                writer.submit(_read(url, T0 + k, kids))
                _visit(run, url, kids)
            clock.set(T0 + 10)
            # In flight at the checkpoint: started before it, visited and stored after it.
            in_flight, in_flight_kids = after[0]
            checkpoints.save()
            writer.submit(_read(in_flight, T0 + 9.5, in_flight_kids))
            _visit(run, in_flight, in_flight_kids)
            for k, (url, kids) in enumerate(after[1:]):
                writer.submit(_read(url, T0 + 11 + k, kids))
                _visit(run, url, kids)
            again = (f"{SITE}/doc2.xml", f"{SITE}/u5", f"{SITE}/u5")
            writer.submit(_read(f"{SITE}/a", T0 + 20, again, body="changed"))
            _visit(run, f"{SITE}/a", again)
            writer.submit(FetchRecord(url=f"{SITE}/b", fetched_at=T0 + 21,
                                      page_type=PageType.HTML, http_status=304,
                                      not_modified=True))
            # SIGKILL here: no checkpoint after the one at T0 + 10.
        restored = build_opic(app, store, [].append)
    assert restored is not None
    _assert_same(restored.opic, run)
    assert restored.opic.replayed == len(after) + 1


def test_a_clean_stop_skips_the_scan_but_a_lone_fetch_in_flight_is_still_replayed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """After a clean stop the checkpoint covers every fetch: two counts in SQLite decide it,
    and nothing is replayed. A kill with one fetch in flight at the checkpoint (started
    before it, stored after it, no fetch after it) is not taken for a clean stop."""
    app = _app(tmp_path)
    clock = app.clock
    assert isinstance(clock, ManualClock)
    run = OnlineOpic(focus=Focus())
    with MetadataStore.open(tmp_path / "x.db") as store:
        with store.writer() as writer:
            checkpoints = OpicCheckpoints(run, writer.submit, clock, interval_s=60.0)
            for k, (url, kids) in enumerate(READS[:-1]):
                writer.submit(_read(url, T0 + k, kids))
                _visit(run, url, kids)
            clock.set(T0 + 10)
            checkpoints.save()
        with caplog.at_level(logging.DEBUG, logger="xyro.crawl.opic_replay"):
            clean = build_opic(app, store, [].append)
        assert clean is not None and clean.opic.replayed == 0
        assert any("covers every fetch" in r.getMessage() for r in caplog.records)
        _assert_same(clean.opic, run)

        url, kids = READS[-1]
        with store.writer() as writer:
            writer.submit(_read(url, T0 + 9.5, kids))  # in flight at the checkpoint
        _visit(run, url, kids)
        killed = build_opic(app, store, [].append)
    assert killed is not None and killed.opic.replayed == 1
    _assert_same(killed.opic, run)
