"""The rounds of the daemon's global PageRank estimate (xyro/jobs/global_round.py) over a real
store: they start once the scope stops growing, queue the selector's best out-of-scope pages
within the budget, wait for them, survive a restart, and with ``importance: global`` leave
the estimate as the in-scope pages' importance. The fetches are the writer's records of
what the crawler would store (type ``outside``), so each step is exact and fast; the daemon
test on the synthetic web (test_daemon_global_estimate.py) covers the real fetching."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata.writer import Writer
from xyro.app import App
from xyro.clock import ManualClock
from xyro.config_load import load_config
from xyro.config import GlobalEstimateConfig
from xyro.jobs.global_round import GlobalRounds
from xyro.jobs.global_round_state import STATE_KEY, RoundState
from xyro.jobs.global_stored import score_stored, stored_domain
from xyro.jobs.rank_run import run_rank
from xyro.net.urls import Scope

T0 = 1_700_000_000.0
SCOPE = Scope(["http://in.example/"])
IN = [f"http://in.example/{i}" for i in range(6)]
OUT = [f"http://out{h}.example/{i}" for h in range(3) for i in range(4)]


def _md5(text: str) -> bytes:
    return hashlib.md5(text.encode()).digest()


def _out_links(url: str) -> tuple[str, ...]:
    """An out-of-scope page links to two in-scope pages and to the next out-of-scope page."""
    i = OUT.index(url)
    return (IN[i % 3], IN[(i + 1) % 3], OUT[(i + 1) % len(OUT)])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    with MetadataStore.open(tmp_path / "x.db") as s:
        yield s


def _fetch_in_scope(writer: Writer, pages: list[str]) -> None:
    """In-scope pages in a ring, each also linking to two out-of-scope pages."""
    for i, url in enumerate(pages):
        children = (IN[(i + 1) % len(pages)], OUT[(2 * i) % len(OUT)],
                    OUT[(2 * i + 5) % len(OUT)])
        writer.submit(FetchRecord(url, T0 + i, PageType.HTML, 200, _md5(url),
                                  children=children))
    writer.flush()


def _fetch_outside(writer: Writer, pages: list[tuple[int, str]]) -> None:
    for _, url in pages:
        writer.submit(FetchRecord(url, T0 + 100, PageType.OUTSIDE, 200, _md5(url),
                                  children=_out_links(url)))
    writer.flush()


def _rounds(store: MetadataStore, writer: Writer, queued: list[list[tuple[int, str]]],
            importance: str = "global") -> GlobalRounds:
    settings = GlobalEstimateConfig(enabled=True, extra_pages_per_local_page=1.0, rounds=3,
                                    importance=importance)

    def queue(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
        queued.append(pages)
        return pages

    return GlobalRounds(settings, 0.85, SCOPE, store, queue, writer.submit, ManualClock(T0))


def _first_round(store: MetadataStore, writer: Writer,
                 queued: list[list[tuple[int, str]]]) -> RoundState:
    """The in-scope pages fetched, the scope settled, and round 1 queued (2 pages)."""
    _fetch_in_scope(writer, IN)
    rounds = _rounds(store, writer, queued)
    rounds.step()
    state = rounds.step()
    assert state.round == 1 and len(state.pending) == 2
    return state


def _importance(store: MetadataStore) -> dict[str, float | None]:
    conn = sqlite3.connect(store.path)
    try:
        return dict(conn.execute("SELECT url, importance FROM urls"))
    finally:
        conn.close()


def test_rounds_start_when_the_scope_settles_spend_the_budget_and_survive_a_restart(
        store: MetadataStore) -> None:
    queued: list[list[tuple[int, str]]] = []
    writer = store.writer()
    try:
        _fetch_in_scope(writer, IN[:4])
        rounds = _rounds(store, writer, queued)
        assert rounds.step().local_pages == 4 and not rounds.state.started
        _fetch_in_scope(writer, IN)          # the scope grew: still waiting
        assert rounds.step().local_pages == 6 and not queued
        state = rounds.step()                # unchanged since the last check: round 1
        assert (state.round, state.rounds, state.budget, state.spent) == (1, 3, 6, 2)
        assert (state.selector, state.out_degree) == ("sc_learned", "within")  # the config's
        assert [url for _, url in state.pending] == [url for _, url in queued[0]]
        assert all(url.startswith("http://out") for _, url in queued[0])
        assert rounds.step() == state        # its pages are not fetched yet
        _fetch_outside(writer, queued[0][:1])
        assert len(rounds.step().pending) == 1
        _fetch_outside(writer, queued[0][1:])
        writer.flush()

        # A restart: the saved state comes back, and the rounds go on from it.
        restarted = _rounds(store, writer, queued)
        assert restarted.state.round == 1 and len(restarted.state.pending) == 1
        restarted.resume()                   # it was fetched since: nothing is offered
        assert restarted.state.pending == () and len(queued) == 1
        state = restarted.step()
        assert (state.round, state.spent) == (2, 4) and len(queued) == 2
        _fetch_outside(writer, list(state.pending))
        state = restarted.step()
        assert (state.round, state.spent) == (3, 6)
        _fetch_outside(writer, list(state.pending))
        state = restarted.step()
        writer.flush()
        assert state.finished and state.spent == state.budget == 6
        fetched = [u for p in queued for _, u in p]
        assert len(fetched) == len(set(fetched)) == 6     # no page chosen twice
        assert RoundState.from_stored(store.get_state(STATE_KEY)) == state
    finally:
        writer.close()

    # importance: global -> r_i = n·f_i over the in-scope pages (mean 1), out-of-scope untouched
    stored = stored_domain(store, SCOPE)
    expected = score_stored(stored, "sc", "within", 0.85).estimate * len(stored.local)
    importance = _importance(store)
    got = np.array([importance[stored.urls[int(j)]] for j in stored.local])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got.sum() == pytest.approx(6.0)
    assert all(importance[u] is None for u in fetched)


def test_a_finished_estimate_is_written_again_after_a_restart_only_when_global(
        store: MetadataStore) -> None:
    writer = store.writer()
    try:
        _fetch_in_scope(writer, IN)
        queued: list[list[tuple[int, str]]] = []
        rounds = _rounds(store, writer, queued, importance="local")
        while not rounds.step().finished:
            if rounds.state.pending:
                _fetch_outside(writer, list(rounds.state.pending))
        writer.flush()
        assert rounds.step().finished
        writer.flush()
        assert all(v is None for v in _importance(store).values())
        again = _rounds(store, writer, queued, importance="global")
        assert again.step().finished
        writer.flush()
        assert sum(v or 0.0 for v in _importance(store).values()) == pytest.approx(6.0)
    finally:
        writer.close()


@pytest.mark.parametrize("importance", ["global", "local"])
def test_a_ranking_run_by_hand_keeps_a_finished_estimate_only_when_global(
        store: MetadataStore, importance: str) -> None:
    """``xyro rank`` writes PageRank over every page; with ``importance: global`` the
    in-scope pages get the finished estimate back, as after the daemon's own ranking."""
    writer = store.writer()
    try:
        _fetch_in_scope(writer, IN)
        rounds = _rounds(store, writer, [], importance="global")
        while not rounds.step().finished:
            if rounds.state.pending:
                _fetch_outside(writer, list(rounds.state.pending))
        writer.flush()
    finally:
        writer.close()
    stored = stored_domain(store, SCOPE)
    estimate = score_stored(stored, "sc_learned", "within", 0.85).estimate * len(stored.local)

    app = App(load_config(None, {}, [
        'seeds=["http://in.example/"]', f"storage.database={store.path}",
        f"storage.warehouse_dir={store.path.parent / 'warehouse'}",
        "ranking.global_estimate.enabled=true",
        "ranking.global_estimate.extra_pages_per_local_page=1.0",
        "ranking.global_estimate.rounds=3",
        f"ranking.global_estimate.importance={importance}"]), ManualClock(T0))
    summary = run_rank(app)
    got = np.array([_importance(store)[stored.urls[int(j)]] for j in stored.local])
    if importance == "global":
        assert summary.global_estimate_pages == len(IN)
        np.testing.assert_allclose(got, estimate, rtol=1e-12)
    else:
        assert summary.global_estimate_pages == 0
        assert not np.allclose(got, estimate, rtol=1e-3)   # the ranking's PageRank


def test_a_restart_forgets_pending_pages_the_admission_now_refuses(
        store: MetadataStore) -> None:
    writer = store.writer()
    try:
        state = _first_round(store, writer, [])
        _fetch_outside(writer, list(state.pending[:1]))
        writer.flush()
        settings = GlobalEstimateConfig(enabled=True, extra_pages_per_local_page=1.0, rounds=3)
        refused: list[list[tuple[int, str]]] = []
        restarted = GlobalRounds(settings, 0.85, SCOPE, store,
                                 lambda pages: refused.append(pages) or [], writer.submit,
                                 ManualClock(T0))
        restarted.resume()
        assert refused == [list(state.pending[1:])]   # the fetched one is not offered again
        assert restarted.state.pending == () and restarted.state.round == 1
    finally:
        writer.close()


def test_the_state_survives_its_json() -> None:
    state = RoundState(round=2, rounds=4, local_pages=85, budget=85, spent=42,
                       pending=((7, "http://a.example/x"),), estimate_change_l1=0.25,
                       updated_at=1.5)
    assert RoundState.from_stored(state.to_json()) == state
    assert RoundState.from_stored(None) == RoundState() and not RoundState().started
    assert state.started and state.pending_urls == frozenset({"http://a.example/x"})


@pytest.mark.parametrize("value", ['{"round": 1, "colour": 2}', '{"pending": [[1]]}', '[1]'])
def test_a_saved_row_that_is_no_round_state_is_named(value: str) -> None:
    with pytest.raises(ValueError, match=f"{STATE_KEY}.*not a round state this version"):
        RoundState.from_stored(value)


def test_a_saved_state_this_version_cannot_read_restarts_the_rounds_not_the_daemon(
        store: MetadataStore, caplog: pytest.LogCaptureFixture) -> None:
    # A newer version's state (one more field), or a row edited by hand: an ERROR line and
    # fresh rounds; the crawl must not die of it at every start under systemd.
    store.set_state(STATE_KEY, '{"round": 2, "rounds": 4, "budget": 8, "new_field": 1}')
    writer = store.writer()
    try:
        rounds = _rounds(store, writer, [])
        assert rounds.state == RoundState(scope=SCOPE.fingerprint(),
                                          updated_at=T0, selector="sc_learned",
                                          out_degree="within")
        writer.flush()
        assert RoundState.from_stored(store.get_state(STATE_KEY)) == rounds.state
    finally:
        writer.close()
    assert any(r.levelname == "ERROR" and "not a round state this version" in r.getMessage()
               and "the rounds start again" in r.getMessage() for r in caplog.records)


def test_a_scope_changed_since_the_rounds_began_starts_them_again(
        store: MetadataStore, caplog: pytest.LogCaptureFixture) -> None:
    # n, the budget and the pending pages belong to the scope the rounds began under: a scope
    # grown, shrunk or lifted since would overspend (n of the old scope) or, finished for
    # lack of candidates while lifted, never run again.
    writer = store.writer()
    try:
        queued: list[list[tuple[int, str]]] = []
        state = _first_round(store, writer, queued)
        assert state.scope == SCOPE.fingerprint()
        writer.flush()
        again = _rounds(store, writer, queued)          # the same scope: the rounds go on
        assert again.state == state

        grown = Scope(["http://in.example/", "http://out0.example/"])
        assert grown.fingerprint() != SCOPE.fingerprint()
        settings = GlobalEstimateConfig(enabled=True, extra_pages_per_local_page=1.0, rounds=3)
        restarted = GlobalRounds(settings, 0.85, grown, store,
                                 lambda pages: queued.append(pages) or pages, writer.submit,
                                 ManualClock(T0))
        fresh = restarted.state
        assert (fresh.round, fresh.spent, fresh.budget, fresh.pending, fresh.finished) \
            == (0, 0, 0, (), False) and fresh.scope == grown.fingerprint()
        assert "the scope changed since its rounds began" in caplog.text
        writer.flush()
        assert RoundState.from_stored(store.get_state(STATE_KEY)).scope == grown.fingerprint()
        restarted.step()                                # n of the new scope, then round 1
        state = restarted.step()
        assert state.local_pages == 6 and state.round == 1
        assert all(not url.startswith("http://out0.") for _, url in state.pending)
    finally:
        writer.close()


def test_a_state_saved_before_scopes_were_recorded_is_kept(store: MetadataStore) -> None:
    saved = RoundState(round=1, rounds=3, local_pages=6, budget=6, spent=2,
                       pending=((40, "http://out1.example/0"),))
    store.set_state(STATE_KEY, saved.to_json())
    writer = store.writer()
    try:
        rounds = _rounds(store, writer, [])
        assert rounds.state.scope == SCOPE.fingerprint()
        assert (rounds.state.round, rounds.state.spent, rounds.state.pending) \
            == (1, 2, saved.pending)
    finally:
        writer.close()


def test_refused_candidates_are_passed_over_for_the_next_best(store: MetadataStore) -> None:
    # The crawler's admission refuses some out-of-scope links for good (a .pdf suffix, a
    # trap): the round takes the next best instead of ending the rounds unspent.
    writer = store.writer()
    try:
        _fetch_in_scope(writer, IN)
        offered: list[list[tuple[int, str]]] = []

        def queue(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
            offered.append(pages)
            return [p for p in pages if not p[1].startswith("http://out0.")]

        settings = GlobalEstimateConfig(enabled=True, extra_pages_per_local_page=1.0, rounds=3)
        rounds = GlobalRounds(settings, 0.85, SCOPE, store, queue, writer.submit,
                              ManualClock(T0))
        rounds.step()
        while not rounds.step().finished:
            _fetch_outside(writer, list(rounds.state.pending))
        state = rounds.state
        assert state.spent == state.budget == 6 and state.round == 3
        tried = [url for pages in offered for _, url in pages]
        assert len(tried) > 6 and all(tried.count(u) <= 3 for u in tried)
    finally:
        writer.close()


def test_fewer_rounds_configured_after_a_restart_keep_the_started_ones(
        store: MetadataStore) -> None:
    # The budget and the rounds are fixed when the rounds start; a restart with a smaller
    # ``rounds`` indexed past the new round sizes (IndexError at every check).
    writer = store.writer()
    try:
        _fetch_in_scope(writer, IN)
        queued: list[list[tuple[int, str]]] = []
        rounds = _rounds(store, writer, queued)
        rounds.step()
        for _ in range(2):
            _fetch_outside(writer, list(rounds.step().pending))
        assert (rounds.state.round, rounds.state.rounds) == (2, 3)
        settings = GlobalEstimateConfig(enabled=True, extra_pages_per_local_page=0.5, rounds=1)
        restarted = GlobalRounds(settings, 0.85, SCOPE, store,
                                 lambda pages: queued.append(pages) or pages, writer.submit,
                                 ManualClock(T0))
        state = restarted.step()
        assert (state.round, state.rounds, state.spent, state.budget) == (3, 3, 6, 6)
        _fetch_outside(writer, list(state.pending))
        assert restarted.step().finished
    finally:
        writer.close()


def test_a_page_read_for_its_links_counts_in_the_domain_once_the_scope_covers_it(
        store: MetadataStore) -> None:
    writer = store.writer()
    try:
        _fetch_in_scope(writer, IN)
        _fetch_outside(writer, [(0, OUT[0]), (0, OUT[5])])
    finally:
        writer.close()
    narrow = stored_domain(store, SCOPE)
    grown = stored_domain(store, Scope(["http://in.example/", "http://out0.example/"]))
    in_l = {narrow.urls[int(j)] for j in narrow.local}
    assert OUT[0] not in in_l and OUT[0] in {narrow.urls[int(j)] for j in narrow.outside}
    # Its links are stored: in the local domain now, not lost to both L and F.
    assert {grown.urls[int(j)] for j in grown.local} == in_l | {OUT[0]}
    assert OUT[5] in {grown.urls[int(j)] for j in grown.outside}
