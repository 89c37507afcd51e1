"""The daemon's rounds of FindGlobalPR (001 Algorithm 2, DESIGN.md §5 "Global PageRank of a
local domain"): fetch a few well-chosen out-of-scope pages, round after round, keeping only
their links.

Each check (every ``ranking.global_estimate.check_interval_s``) does one of:

- **wait for the scope to settle**: the rounds start once the local domain L (in-scope
  pages with stored links) did not grow between two checks; n = |L| then fixes the budget,
  ``extra_pages_per_local_page`` × n pages spread evenly over ``rounds`` rounds
  (:meth:`ranking.global_estimate.EstimateParams.round_sizes`);
- **wait for the round's pages**: the URLs queued by the last round that the store does not
  show fetched yet (still ``unread``) are its pending pages;
- **choose the next round**: rebuild L and F (L plus the out-of-scope pages with stored
  links) from the store, PageRank F, score its frontier with the selector
  (:mod:`xyro.jobs.global_stored`) and queue the best k out-of-scope pages through the
  frontier (``queue``: ``Source.GLOBAL_ESTIMATE`` at the discovery level, politeness and
  robots.txt as always; the crawler fetches them for their links alone, type ``outside``);
- **finish** after the last round (or when no candidate is left), recording the last
  estimate's L1 distance from local PageRank. With ``importance: global`` the estimate then
  becomes the importance of the in-scope pages, r_i = n·f_i (mean 1 over L, as the ranking
  job's N·PR_i is over all pages, DESIGN.md §5), and every ranking run, the daemon's or
  ``xyro rank`` by hand, writes it again after its own (:func:`finished_importance`),
  which would overwrite it.

The state (:class:`RoundState`) is saved in the store's ``state`` table after every change,
through the writer and after the frontier's own records, so a restart continues the rounds:
its pending URLs are restored as ``links`` items (``Frontier.restore(links_only=...)``)
and offered once more (:meth:`GlobalRounds.resume`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from metadata import MetadataStore, SetRanks, SetState
from ranking.global_estimate import EstimateParams, estimate_metrics
from xyro.clock import Clock
from xyro.config import GlobalEstimateConfig
from xyro.jobs.global_round_state import STATE_KEY, RoundState
from xyro.jobs.global_stored import (AcceptFn, StoredDomain, StoredRound, score_stored,
                                     stored_domain)
from xyro.net.urls import Scope

log = logging.getLogger(__name__)

ID_CHUNK = 500  # URL ids per query (SQLite's bound variables)

#: (URL id, URL) of pages to fetch -> those the frontier accepted.
QueueFn = AcceptFn


class GlobalRounds:
    """One check of the module doc per :meth:`step`; the state lives in memory and is saved
    through ``record`` (the writer's submit) after every change."""

    def __init__(self, settings: GlobalEstimateConfig, damping: float, scope: Scope,
                 store: MetadataStore, queue: QueueFn, record: Callable[[Any], object],
                 clock: Clock) -> None:
        self._settings = settings
        self._damping = damping
        self._scope = scope
        self._store = store
        self._queue = queue
        self._record = record
        self._clock = clock
        self.state = self._stored_state()
        # The estimate written as importance in this process (a restart writes it once more:
        # importance may have turned global since the rounds finished).
        self._written = False
        self._check_scope()

    def step(self) -> RoundState:
        self._check_scope()
        state = self.state
        if state.finished:
            if self._global_importance and not self._written:  # after a restart
                stored = stored_domain(self._store, self._scope)
                self._keep_estimate(stored.local, self._score(stored).estimate)
            return state
        if state.pending:
            left = self._unfetched(state.pending)
            if left:
                if len(left) < len(state.pending):
                    self._save(replace(state, pending=left))
                return self.state
            state = replace(state, pending=())
        stored = stored_domain(self._store, self._scope)
        if not state.started:
            state = self._start(state, int(stored.local.size))
            if not state.started:
                return state
        scored = self._score(stored)
        change = estimate_metrics(scored.estimate, scored.local_pr, kendall=False)["l1"]
        state = replace(state, estimate_change_l1=change)
        if state.round >= state.rounds or state.spent >= state.budget:
            return self._finish(state, "all rounds done", stored.local, scored.estimate)
        sizes = EstimateParams(budget=state.budget, rounds=state.rounds).round_sizes()
        k = min(int(sizes[state.round]), state.budget - state.spent)
        queued = scored.best_accepted(k, stored.urls, self._queue)
        if not queued:
            return self._finish(state, "no out-of-scope page left to fetch", stored.local,
                                scored.estimate)
        log.info("global estimate: round %d of %d queues %d out-of-scope pages",
                 state.round + 1, state.rounds, len(queued))
        return self._save(replace(state, round=state.round + 1,
                                  spent=state.spent + len(queued), pending=tuple(queued)))

    def resume(self) -> None:
        """At start, once the frontier is restored: offer the pending pages not fetched yet
        again (those restored are known, a lost one is queued again), and forget those the
        admission now refuses, so that none can hold the rounds back for ever."""
        pending = self._unfetched(self.state.pending) if self.state.pending else ()
        if pending:
            pending = tuple(self._queue(list(pending)))
        if pending != self.state.pending:
            self._save(replace(self.state, pending=pending))

    def _stored_state(self) -> RoundState:
        """The saved state; a fresh one, said in an ERROR line, when it cannot be read (a
        newer version's, a row edited by hand): the rounds are worth less than the crawl."""
        try:
            return RoundState.from_stored(self._store.get_state(STATE_KEY))
        except ValueError as exc:
            log.error("global estimate: %s; the rounds start again", exc)
            return RoundState(scope="unreadable")   # saved over at once (_check_scope)

    def _check_scope(self) -> None:
        """The rounds belong to the scope they began under (n, the budget, the pages still
        pending were chosen for it): when it changed, they start again for the new one. The
        out-of-scope pages fetched so far keep their links, so the new rounds build on them."""
        scope = self._scope.fingerprint()
        state = self.state
        if state.scope == scope:
            return
        if state.scope and state != RoundState(scope=state.scope):
            log.warning("global estimate: the scope changed since its rounds began (round %d "
                        "of %d, %d of %d extra pages queued): they start again for the new "
                        "scope", state.round, state.rounds, state.spent, state.budget)
            self._written = False
            state = RoundState()
        self._save(replace(state, scope=scope))

    def _start(self, state: RoundState, n: int) -> RoundState:
        """Fix n and the budget when L did not grow since the last check; else note n."""
        if n == 0 or n != state.local_pages:
            return self._save(replace(state, local_pages=n))
        sizes = self._round_sizes(n)
        log.info("global estimate: the scope holds %d pages; %d extra pages in %d rounds",
                 n, int(sizes.sum()), len(sizes))
        return replace(state, budget=int(sizes.sum()), rounds=len(sizes))

    @property
    def _global_importance(self) -> bool:
        return self._settings.importance == "global"

    def _score(self, stored: StoredDomain) -> StoredRound:
        return _score(stored, self._settings, self._damping)

    def _keep_estimate(self, local: np.ndarray, estimate: np.ndarray) -> None:
        """With ``importance: global``: r_i = n·f_i for the in-scope pages, written now."""
        if self._global_importance:
            self._record(SetRanks(*_importance(local, estimate)))
            self._written = True

    def _round_sizes(self, n: int) -> Any:
        # At least one page: a budget that rounds to 0 would never start the rounds.
        budget = max(1, int(round(self._settings.extra_pages_per_local_page * n)))
        params = EstimateParams(budget=budget, rounds=self._settings.rounds)
        return params.round_sizes()

    def _unfetched(self, pending: tuple[tuple[int, str], ...]) -> tuple[tuple[int, str], ...]:
        """The pending pages the store shows not fetched yet (still known as links only)."""
        ids = [i for i, _ in pending]
        waiting: set[int] = set()
        conn = self._store.read_connection()
        try:
            for at in range(0, len(ids), ID_CHUNK):
                chunk = ids[at:at + ID_CHUNK]
                waiting.update(row[0] for row in conn.execute(
                    f"SELECT id FROM urls WHERE id IN ({','.join('?' * len(chunk))}) "
                    "AND type IN ('unread', 'refused')", chunk))
        finally:
            conn.close()
        return tuple(p for p in pending if p[0] in waiting)

    def _finish(self, state: RoundState, why: str, local: np.ndarray,
                estimate: np.ndarray) -> RoundState:
        self._keep_estimate(local, estimate)
        log.info("global estimate finished (%s): %d extra pages fetched in %d rounds; the "
                 "estimate is %.3g from local PageRank (L1)", why, state.spent, state.round,
                 state.estimate_change_l1 or 0.0)
        return self._save(replace(state, finished=True))

    def _save(self, state: RoundState) -> RoundState:
        self.state = state = replace(state, updated_at=self._clock.now(),
                                     selector=self._settings.selector,
                                     out_degree=self._settings.out_degree)
        self._record(SetState(STATE_KEY, state.to_json()))
        return state


def finished_importance(settings: GlobalEstimateConfig, damping: float, scope: Scope,
                        store: MetadataStore) -> tuple[np.ndarray, np.ndarray] | None:
    """(URL ids, importance n·f_i) of the in-scope pages, from the estimate of the stored
    domain, when the rounds saved in ``store`` finished under ``scope`` and ``settings``
    make the estimate the importance (``enabled``, ``importance: global``); else None.

    A ranking run writes PageRank over every page: it calls this after its own write-back,
    so the in-scope pages keep the estimate whoever ran it (the daemon, ``xyro rank``)."""
    if not (settings.enabled and settings.importance == "global"):
        return None
    try:
        state = RoundState.from_stored(store.get_state(STATE_KEY))
    except ValueError:
        return None   # the daemon says so and starts the rounds again
    if not state.finished or state.scope != scope.fingerprint():
        return None
    stored = stored_domain(store, scope)
    return _importance(stored.local, _score(stored, settings, damping).estimate)


def _score(stored: StoredDomain, settings: GlobalEstimateConfig,
           damping: float) -> StoredRound:
    return score_stored(stored, settings.selector, settings.out_degree, damping)


def _importance(local: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """r_i = n·f_i (mean 1 over L) by URL id (node id = URL id - 1)."""
    return local + 1, estimate * len(local)
