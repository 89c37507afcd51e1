"""The planner reads a page's newest observations and a summary of the older ones
(xyro.jobs.plan_estimate, metadata.refresh_queries.recent_observations, DESIGN.md §6):
the rows read per page are bounded whatever its history, a history within the bound is
estimated bit for bit as before, and a longer one as the whole history would be: its
first access, its earlier changes and its earlier date verdicts still count."""

from __future__ import annotations

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata import refresh_queries as rq
from metadata.records import SetLastModifiedVerdicts
from refresh import dated_history, estimate_rate, page_reliability
from xyro.jobs import plan_estimate
from xyro.jobs.plan_estimate import PageEstimator

M = rq.RECENT_OBSERVATIONS
PRIOR = 0.1


def _estimates(store: MetadataStore, settings, whole: bool = False) -> dict[str, object]:
    """Evidence per URL: the planner's (newest reads), or from every observation."""
    conn = store.read_connection()
    try:
        est = PageEstimator(conn, settings)
        pages = rq.planned_pages(conn)
        need = [int(i) for i in pages.ids]
        top = rq.max_observation_id(conn)
        if whole:
            rows = rq.observations_of(conn, need, top)
            host_of = {int(i): int(h) for i, h in zip(pages.ids, pages.host_id)}
            ev = est.estimate({i: est.history(rows[i]) for i in need}, host_of, PRIOR)
        else:
            ev = est.evidence(pages, need, top, PRIOR)
        return {url: ev[i] for i, url in rq.urls_of(conn, need).items()}
    finally:
        conn.close()


def _poisson(kit, url: str, reads: int, rate: float, seed: int, dated: bool = False,
             not_modified: bool = False) -> list[FetchRecord]:
    """``reads`` reads about a unit apart of a page changing at ``rate`` per unit; with
    ``dated`` its Last-Modified, which ``not_modified`` 304s omit."""
    rng = np.random.default_rng(seed)
    times = kit.start + kit.unit * np.cumsum(rng.uniform(0.5, 1.5, reads))
    changes = np.sort(rng.uniform(times[0] - 5 * kit.unit, times[-1],
                                  rng.poisson(rate * (reads + 5))))
    records, seen = [], -1
    for t in times:
        done = changes[changes <= t]
        if not_modified and done.size == seen:
            records.append(FetchRecord(url, float(t), PageType.XML, http_status=304,
                                       not_modified=True))
        else:
            lm = float(np.floor(done[-1] if done.size else times[0] - 9 * kit.unit))
            records.append(FetchRecord(url, float(t), PageType.XML, http_status=200,
                                       signature=f"{url}#{done.size}".encode(),
                                       last_modified=lm if dated else None))
        seen = done.size
    return records


def test_histories_within_the_bound_are_estimated_bit_for_bit_as_before(store, fill, kit
                                                                        ) -> None:
    records = []
    for n in (2, 9, M - 1, M):
        records += kit.fetch_history(f"http://a.example/always{n}.xml", kit.regular(n, 1.0),
                                     list(range(n)))
        records += kit.fetch_history(f"http://a.example/never{n}.xml", kit.regular(n, 1.0),
                                     [0] * n)
        records += _poisson(kit, f"http://b.example/dated{n}.xml", n, 0.2, n, dated=True)
        records += _poisson(kit, f"http://b.example/n304{n}.xml", n, 0.2, n + 1, dated=True,
                            not_modified=True)
        records += _poisson(kit, f"http://c.example/mixed{n}.xml", n, 0.5, n + 2)
        times = kit.regular(n, 1.0)
        records += kit.fetch_history(f"http://c.example/stamped{n}.xml", times,
                                     [k // 2 for k in range(n)], last_modified=times)
    records += kit.fetch_history("http://c.example/twice.xml", kit.regular(6, 1.0) * 2,
                                 [0, 0, 1, 1, 2, 2, 0, 1, 1, 2, 3, 3])  # repeated times
    fill(records)
    s = kit.settings()
    ev = _estimates(store, s)
    conn = store.read_connection()
    try:
        est = PageEstimator(conn, s)
        ids = {url: i for i, url in rq.urls_of(conn, rq.planned_pages(conn).ids.tolist()).items()}
        top = rq.max_observation_id(conn)
        rows = rq.observations_of(conn, list(ids.values()), top)
        reads = rq.recent_observations(conn, list(ids.values()), top)
        tol = plan_estimate.HTTP_DATE_TOLERANCE_S / s.time_unit_s
        for url, e in ev.items():
            i = ids[url]
            assert reads[i].older is None and reads[i].rows == rows[i]
            history = est.history(rows[i])
            # What the planner computed before: refresh.estimate_rate on the whole history.
            assert e.estimate == estimate_rate(
                history, PRIOR, host_reliable=e.lm_reliable, tolerance=tol,
                resolution=s.min_interval_units, lm_prior_shape=plan_estimate.LM_PRIOR_SHAPE)
            assert e.page_verdict == page_reliability(dated_history(history, tol), tol).reliable
            assert (e.accesses, e.changes) == (history.access_times.size, history.changed.sum())
    finally:
        conn.close()
    sources = {e.estimate.source.value for e in ev.values()}
    assert sources == {"always-changed", "never-changed", "signature-mle", "last-modified"}


def test_rows_read_per_page_stay_bounded_as_histories_grow(tmp_path, kit, monkeypatch
                                                            ) -> None:
    """The cost bound, counted: rows handed to the estimator per page, and SQLite's own
    work (virtual-machine steps) for pages read 300 and 1200 times."""
    read: list[int] = []
    history = PageEstimator.history
    monkeypatch.setattr(PageEstimator, "history",
                        lambda self, rows: read.append(len(rows)) or history(self, rows))
    steps = {}
    for reads in (300, 1200):
        with MetadataStore.open(tmp_path / f"{reads}.db") as store:
            writer = store.writer()
            for rec in sorted([r for p in range(3) for r in _poisson(
                    kit, f"http://a.example/p{p}.xml", reads, 0.05 + 0.5 * p, p, dated=True)],
                    key=lambda r: r.fetched_at):
                writer.submit(rec)
            writer.close()
            conn = store.read_connection()
            try:
                pages = rq.planned_pages(conn)
                est = PageEstimator(conn, kit.settings())
                count = [0]
                conn.set_progress_handler(lambda: count.__setitem__(0, count[0] + 1) or 0, 10)
                read.clear()
                est.evidence(pages, [int(i) for i in pages.ids], rq.max_observation_id(conn),
                             PRIOR)
                conn.set_progress_handler(None, 0)
                steps[reads] = count[0]
                assert max(read) <= M and len(read) == 6  # rows and the first two, per page
            finally:
                conn.close()
    assert steps[1200] < 1.2 * steps[300], steps


def test_a_page_never_seen_to_change_keeps_its_first_access(store, fill, kit) -> None:
    n = M + 150
    fill(kit.fetch_history("http://a.example/still.xml", kit.regular(n, 1.0), [0] * n))
    ev = _estimates(store, kit.settings())["http://a.example/still.xml"]
    assert ev.estimate.source.value == "never-changed"
    assert ev.estimate.rate == pytest.approx(0.5 / (n - 1), rel=1e-12)  # not 0.5 / (M - 1)


def test_changes_before_the_newest_reads_still_count(store, fill, kit) -> None:
    n = M + 300
    versions = np.searchsorted([10, 60, 110, 160], np.arange(n), side="right").tolist()
    fill(kit.fetch_history("http://a.example/quiet.xml", kit.regular(n, 1.0), versions))
    ev = _estimates(store, kit.settings())["http://a.example/quiet.xml"]
    whole = _estimates(store, kit.settings(), whole=True)["http://a.example/quiet.xml"]
    assert ev.estimate.source.value == whole.estimate.source.value == "signature-mle"
    assert ev.estimate.rate == pytest.approx(whole.estimate.rate, rel=1e-9)  # regular reads


def test_long_histories_are_estimated_close_to_the_whole_history(store, fill, kit) -> None:
    """Rates whose newest reads hold few changes (the older reads join them: within 2 %),
    and faster ones (their newest reads alone: within 25 %), by signatures and by dates."""
    records, slow = [], {}
    for k, rate in enumerate((0.005, 0.02, 0.06, 0.1, 0.5, 2.0)):
        for j, (dated, n304) in enumerate(((False, False), (True, False), (True, True))):
            url = f"http://h{j}.example/p{k}.xml"
            records += _poisson(kit, url, M + 400, rate, 10 * k + j, dated, n304)
            slow[url] = rate <= 0.06
    fill(records)
    ev = _estimates(store, kit.settings())
    whole = _estimates(store, kit.settings(), whole=True)
    for url, is_slow in slow.items():
        assert ev[url].estimate.source == whole[url].estimate.source, url
        assert ev[url].lm_reliable == whole[url].lm_reliable, url
        assert ev[url].estimate.rate == pytest.approx(whole[url].estimate.rate,
                                                      rel=0.02 if is_slow else 0.25), url


def test_304s_without_a_date_carry_it_into_the_newest_reads(store, fill, kit) -> None:
    url = "http://a.example/n304.xml"
    fill(_poisson(kit, url, M + 200, 0.004, 7, dated=True, not_modified=True))
    ev = _estimates(store, kit.settings())[url]
    whole = _estimates(store, kit.settings(), whole=True)[url]
    assert ev.lm_reliable and whole.lm_reliable, ev.lm_reason
    assert ev.estimate.rate == pytest.approx(whole.estimate.rate, rel=0.02)


def test_dates_that_failed_on_older_reads_stay_failed(store, fill, kit) -> None:
    """The verdict the planner stored on the older reads (a date going backwards) holds
    while the newest reads look consistent, as on the whole history."""
    url = "http://a.example/liar.xml"
    times = kit.regular(M + 60, 1.0)
    lms = [kit.start - kit.unit * (9 if k == 5 else 1) for k in range(len(times))]
    records = kit.fetch_history(url, times, [0] * len(times), last_modified=lms)
    fill(records[:20])
    first = _estimates(store, kit.settings())[url]
    assert not first.page_verdict and "backwards" in first.lm_reason
    writer = store.writer()  # what the planner writes after a unit
    writer.submit(SetLastModifiedVerdicts(np.asarray(store.url_ids([url], create=False)),
                                          np.asarray([False])))
    writer.close()
    fill(records[20:])
    ev = _estimates(store, kit.settings())[url]
    assert not _estimates(store, kit.settings(), whole=True)[url].page_verdict
    assert not ev.page_verdict and ev.estimate.source.value == "never-changed"


def test_chunks_give_the_answer_of_one_pass(store, fill, kit, monkeypatch) -> None:
    """A host's verdict is taken over all its pages, not chunk by chunk: 2 of its 10 pages
    with dates going backwards fail it (over a tenth), in every chunk of two pages."""
    records = []
    for k in range(10):
        times = kit.regular(8, 1.0, 0.01 * k)
        lms = [kit.start - kit.unit * (5 if j == 3 and k < 2 else 1) for j in range(8)]
        records += kit.fetch_history(f"http://a.example/p{k}.xml", times, [0] * 8,
                                     last_modified=lms)
    fill(records)
    monkeypatch.setattr(plan_estimate, "ESTIMATE_CHUNK", 2)
    ev = _estimates(store, kit.settings())
    assert ev == _estimates(store, kit.settings(), whole=True)
    assert not any(e.lm_reliable for e in ev.values())
    assert sum(e.page_verdict for e in ev.values()) == 8
