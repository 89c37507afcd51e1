"""OPIC's pure core: visits, the virtual page, estimates, Adaptive OPIC policies against
hand-computed values, growth, grants, checkpoints, selection, and input checks."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.graph import LinkGraph
from ranking.opic import OpicCheckpoint, OpicParams, OpicState
from ranking.opic_adaptive import AdaptiveParams
from ranking.opic_select import (random_pick, visit_by, visit_cycle, visit_greedy, visit_order,
                                 visit_random)

NEVER = 1e9  # virtual_flush: V keeps its cash until flush_virtual()


def small_graph(seed: int, n: int, m: int) -> LinkGraph:
    rng = np.random.default_rng(seed)
    return LinkGraph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n)


# ---- static OPIC -----------------------------------------------------------------------------

def test_start_is_uniform_cash_and_uniform_estimates() -> None:
    state = OpicState.create(4)
    assert np.array_equal(state.cash(), np.full(4, 0.25))
    assert state.clock == 0.0 and state.virtual_cash == 0.0 and state.total_cash() == 1.0
    for kind in ("inflow", "papers"):
        assert np.allclose(state.estimate(kind), 0.25)


def test_visits_by_hand() -> None:
    """c = 0.5, 4 pages of 0.25: page 0 -> {1, 2}, then page 3 without links, which fills
    V past the mean page cash (0.25) and V hands 0.375 to the 4 pages (0.09375 each)."""
    state = OpicState.create(4, OpicParams(damping=0.5))
    assert state.visit(0, [1, 2]) == 0.25
    assert np.array_equal(state.cash(), [0.0, 0.3125, 0.3125, 0.25])
    assert state.virtual_cash == 0.125 and state.clock == 0.25
    assert np.array_equal(state.history(), [0.25, 0, 0, 0])
    state.visit(3, [])
    assert state.virtual_cash == 0.0 and state.clock == 0.5
    assert np.array_equal(state.cash(), [0.09375, 0.40625, 0.40625, 0.09375])
    # inflow: H + C − C0 = [0.09375, 0.15625, 0.15625, 0.09375], sum 0.5
    assert np.allclose(state.estimate("inflow"), [0.1875, 0.3125, 0.3125, 0.1875], atol=1e-15)
    # papers: (H + C)/(G + 1), G + 1 = 1.5
    assert np.allclose(state.estimate("papers"),
                       np.array([0.34375, 0.40625, 0.40625, 0.34375]) / 1.5, atol=1e-15)
    assert np.array_equal(state.visits(), [1, 0, 0, 1])


def test_self_links_and_repeated_links_take_their_shares() -> None:
    state = OpicState.create(2, OpicParams(damping=0.5, virtual_flush=NEVER))
    state.visit(0, [0, 1, 1])  # 0.5 → 1/12 back to itself, 2/12 to page 1, 0.25 to V
    assert np.allclose(state.cash(), [0.5 / 6, 0.5 + 1.0 / 6], atol=1e-16)
    assert state.virtual_cash == pytest.approx(0.25, abs=1e-16)


def test_virtual_flush_zero_hands_out_after_every_visit() -> None:
    state = OpicState.create(2, OpicParams(damping=0.5, virtual_flush=0.0))
    state.visit(0, [1])  # V gets 0.25 and hands it out at once: 0.125 each
    assert state.virtual_cash == 0.0
    assert np.allclose(state.cash(), [0.125, 0.875], atol=1e-16)


def test_flush_virtual_and_folding_the_offset_keep_the_cash() -> None:
    state = OpicState.create(3, OpicParams(virtual_flush=NEVER))
    graph = small_graph(1, 3, 6)
    visit_cycle(state, graph, 30)
    before = state.cash() + state.virtual_cash / 3
    state.flush_virtual()
    assert state.virtual_cash == 0.0
    assert np.allclose(state.cash(), before, atol=1e-15)
    assert 0.0 <= state.checkpoint().offset < 1 / 3  # folded once past the mean page cash


def test_inflow_estimate_ignores_endowment_and_grants() -> None:
    state = OpicState.create(2, OpicParams(damping=0.5, virtual_flush=NEVER))
    state.visit(0, [1])  # V: 0.25
    state.grant([0], 0.2)
    assert state.virtual_cash == pytest.approx(0.05)
    assert np.allclose(state.endowment(), [0.7, 0.5])
    # page 0 received nothing through links; page 1 received 0.25
    assert np.allclose(state.estimate("inflow"), [0.0, 1.0])


def test_grant_beyond_the_virtual_cash_is_refused_and_changes_nothing() -> None:
    state = OpicState.create(2, OpicParams(damping=0.5, virtual_flush=NEVER))
    state.visit(0, [1])
    before = state.checkpoint().to_arrays()
    with pytest.raises(ValueError, match="virtual page V holds only"):
        state.grant([0, 1], [0.2, 0.1])
    after = state.checkpoint().to_arrays()
    assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)


def test_add_pages_from_empty_takes_cash_from_v() -> None:
    state = OpicState.create(0)
    assert state.virtual_cash == 1.0 and state.n == 0
    assert state.add_pages(2, cash=[0.5, 0.25]) == 0
    assert state.add_pages(3) == 2
    assert np.array_equal(state.cash(), [0.5, 0.25, 0, 0, 0])
    assert state.virtual_cash == 0.25 and state.total_cash() == 1.0
    state.visit(0, [4, 2])  # 0.2125 to each child; V (0.325) passes the mean cash 0.2
    assert state.virtual_cash == 0.0
    assert state.cash()[4] == pytest.approx(0.85 * 0.25 + (0.25 + 0.15 * 0.5) / 5)


def test_growth_is_amortized() -> None:
    state = OpicState.create(1)
    capacities = set()
    for _ in range(5000):
        state.add_pages(1)
        capacities.add(len(state.kernel_buffers()[0]))
    assert state.n == 5001 and len(capacities) <= 11  # doubling: 16, 32, ..., 8192


# ---- Adaptive OPIC, by hand ------------------------------------------------------------------

def adaptive_pair() -> OpicState:
    """2 pages of 0.5, c = 0.5, T = 1, n = 2, 4 records, default history ρ = 1 (r0 = 1/2)."""
    params = OpicParams(damping=0.5, virtual_flush=NEVER,
                        adaptive=AdaptiveParams(window=1.0, visits=2, measures=4,
                                                default_history=1.0))
    state = OpicState.create(2, params)
    state.visit(0, [1])  # x 0.5, all endowment: q 0 at g 0; page 1 gets 0.25; G 0.5
    state.visit(1, [0])  # x 0.75, q 0.25 at g 0.5; page 0 gets 0.375; G 1.25
    state.visit(0, [1])  # x 0.375, q 0.375 at g 1.25; page 1 gets 0.1875; G 1.625
    return state


def test_default_history_of_the_first_pages() -> None:
    params = OpicParams(adaptive=AdaptiveParams(window=2.0, default_history=1.0))
    cp = OpicState.create(4, params).checkpoint()
    assert np.array_equal(cp.bao_history, np.full(4, 0.25 * 2.0))  # r0·T, r0 = 1/4
    assert np.array_equal(cp.bao_clock, np.zeros(4))
    assert np.array_equal(cp.ring_time[:, :2], np.tile([-2.0, 0.0], (4, 1)))
    assert np.array_equal(cp.ring_cash[:, :2], np.tile([0.0, 0.5], (4, 1)))
    assert np.array_equal(cp.ring_len, [2] * 4) and np.array_equal(cp.ring_head, [2] * 4)


def test_bao_update_by_hand() -> None:
    cp = adaptive_pair().checkpoint()
    # page 0: Δ = 0 < T: H = 0.5·(1 − 0)/1 + 0 = 0.5; then Δ = 1.25 ≥ T: H = 0.375·1/1.25
    # page 1: Δ = 0.5 < T: H = 0.5·(1 − 0.5)/1 + 0.25 = 0.5
    assert np.allclose(cp.bao_history, [0.3, 0.5], atol=1e-15)
    assert np.array_equal(cp.bao_clock, [1.25, 0.5])


def test_bao_estimate_by_hand() -> None:
    state = adaptive_pair()
    # at G = 1.625 page 0 holds 0, page 1 holds 0.1875 (all inflow)
    # page 0: Δ = 0.375 < T: 0.3·0.625 + 0 = 0.1875; page 1: Δ = 1.125 ≥ T: 0.1875/1.125
    rates = [0.1875, 0.1875 / 1.125]
    assert np.allclose(state.adaptive_rates("bao"), rates, atol=1e-15)
    assert np.allclose(state.estimate("bao"), np.array(rates) / sum(rates), atol=1e-15)


def test_variable_window_by_hand() -> None:
    state = adaptive_pair()
    # page 0 records (0, −1) (0.5, 0) (0, 0) (0.375, 1.25): the newest 2 start at g = 0,
    # hold 0.375, plus 0 held now, over 1.625. page 1: (0.5, 0) (0.25, 0.5) → from g = 0,
    # 0.25 + 0.1875 held now, over 1.625.
    rates = [0.375 / 1.625, 0.4375 / 1.625]
    assert np.allclose(state.adaptive_rates("variable_window"), rates, atol=1e-15)
    assert np.allclose(state.estimate("variable_window"), np.array(rates) / sum(rates))


def test_fixed_window_by_hand() -> None:
    state = adaptive_pair()
    # window (0.625, 1.625]. page 0: (0, 1.25] brought 0.375, half of it after 0.625
    # (0.1875); nothing since. page 1: (0, 0.5] lies before; (0.5, 1.625] brought 0.1875,
    # 1/1.125 of it in the window. Both windows are covered over their full length 1.
    rates = [0.1875, 0.1875 / 1.125]
    assert np.allclose(state.adaptive_rates("fixed_window"), rates, atol=1e-15)


def test_full_ring_drops_a_record_outside_the_window() -> None:
    state = adaptive_pair()  # page 0's ring is full: records at −1, 0, 0, 1.25
    state.flush_virtual()  # V 0.8125 → 0.40625 to each page
    state.visit(0, [1])  # g = 1.625: (t1, t2] = (−1, 0] is before 0.625: drop it
    cp = state.checkpoint()
    assert cp.ring_len[0] == 4 and cp.ring_head[0] == 1
    order = [(cp.ring_head[0] + k) % 4 for k in range(4)]  # oldest first
    assert np.array_equal(cp.ring_time[0, order], [0.0, 0.0, 1.25, 1.625])
    assert np.allclose(cp.ring_cash[0, order[1:]], [0.0, 0.375, 0.40625])


def test_full_ring_groups_intervals_inside_the_window() -> None:
    """One page, c = 0.5, V handed out after every visit: every visit collects 1.0 (0 at the
    first: the endowment). T = 100 keeps everything in the window, so a full ring groups
    the two oldest intervals after the straddling one."""
    params = OpicParams(damping=0.5, virtual_flush=0.0, adaptive=AdaptiveParams(
        window=100.0, visits=2, measures=4, default_history=1.0))
    state = OpicState.create(1, params)
    for _ in range(4):
        state.visit(0, [0])  # at g = 0, 1, 2, 3
    cp = state.checkpoint()
    order = [(cp.ring_head[0] + k) % 4 for k in range(4)]
    # records were (·, −100) (100, 0) (0, 0) (1, 1) (1, 2): the 3rd visit grouped (0, 0] and
    # (0, 1]; the 4th grouped (0, 1] and (1, 2] into one interval holding 2.0.
    assert np.array_equal(cp.ring_time[0, order], [-100.0, 0.0, 2.0, 3.0])
    assert np.array_equal(cp.ring_cash[0, order[1:]], [100.0, 2.0, 1.0])
    # fixed window (−96, 4]: 100·96/100 of the prior + 2 + 1 + 1 held now, over 100
    assert np.allclose(state.adaptive_rates("fixed_window"), [1.0])
    # variable window n = 2: from g = 2, 1.0 collected at g = 3 + 1.0 held now, over 2
    assert np.allclose(state.adaptive_rates("variable_window"), [1.0])


def test_default_history_is_learnt_from_first_visits() -> None:
    params = OpicParams(damping=0.5, virtual_flush=NEVER, adaptive=AdaptiveParams(
        window=2.0, recent_weight=0.5))
    state = OpicState.create(3, params, total=0.9)
    state.visit(0, [1])  # first visit at g = 0: age 0, nothing learnt
    assert state.checkpoint().recent_default == 1.0
    state.visit(1, [2])  # first visit at g = 0.3: inflow 0.15 over 0.3, × 3 pages = 1.5
    assert state.checkpoint().recent_default == pytest.approx(1.25)
    state.visit(1, [2])  # not a first visit
    assert state.checkpoint().recent_default == pytest.approx(1.25)
    g = state.clock
    first = state.add_pages(1)
    cp = state.checkpoint()
    r0 = 1.25 / 4
    assert state.default_rate() == pytest.approx(r0)
    assert cp.bao_history[first] == pytest.approx(r0 * 2.0) and cp.bao_clock[first] == g
    assert cp.born[first] == g
    assert np.allclose(cp.ring_time[first, :2], [g - 2.0, g])
    assert np.allclose(cp.ring_cash[first, :2], [0.0, r0 * 2.0])
    # a page never visited: its rate is its default while it has received nothing
    assert state.adaptive_rates("bao")[first] == pytest.approx(r0)
    assert state.adaptive_rates("fixed_window")[first] == pytest.approx(r0)


# ---- batches, selection, checkpoints ---------------------------------------------------------

@pytest.mark.parametrize("adaptive", [None, AdaptiveParams(window=3.0)])
def test_greedy_batch_is_one_greedy_pick_at_a_time(adaptive: AdaptiveParams | None) -> None:
    graph = small_graph(3, 60, 400)
    params = OpicParams(adaptive=adaptive)
    batch, single = OpicState.create(60, params), OpicState.create(60, params)
    visit_greedy(batch, graph, 3000)
    for _ in range(3000):
        page = single.greedy_pick()
        single.visit(page, graph.indices[graph.indptr[page]:graph.indptr[page + 1]])
    a, b = batch.checkpoint().to_arrays(), single.checkpoint().to_arrays()
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def test_order_batch_rows_and_single_visits_agree() -> None:
    graph = small_graph(4, 30, 150)
    order = np.random.default_rng(0).integers(0, 30, 500)
    by_order, by_rows, single = (OpicState.create(30) for _ in range(3))
    visit_order(by_order, graph, order)
    rows = [graph.indices[graph.indptr[p]:graph.indptr[p + 1]] for p in order]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    by_rows.visit_rows(order, indptr, np.concatenate(rows))
    for page, row in zip(order, rows):
        single.visit(int(page), row)
    for other in (by_rows, single):
        assert np.array_equal(by_order.cash(), other.cash())
        assert np.array_equal(by_order.history(), other.history())
        assert by_order.clock == other.clock


def test_greedy_pick_among_candidates() -> None:
    state = OpicState.create(5, OpicParams(damping=0.5))
    state.visit(0, [3, 4, 4])
    assert state.greedy_pick() == 4
    assert state.greedy_pick([0, 1, 3]) == 3
    assert state.greedy_pick([2, 1]) == 2  # equal cash: the first candidate
    assert state.greedy_pick(np.array([0])) == 0


def test_random_and_cycle_are_seeded_and_resumable() -> None:
    graph = small_graph(5, 20, 80)
    a, b = OpicState.create(20), OpicState.create(20)
    visit_random(a, graph, 100, np.random.default_rng(9))
    visit_random(b, graph, 100, np.random.default_rng(9))
    assert np.array_equal(a.cash(), b.cash())
    c, d = OpicState.create(20), OpicState.create(20)
    cursor = visit_cycle(c, graph, 13)
    assert cursor == 13 and visit_cycle(c, graph, 17, cursor) == 10
    visit_order(d, graph, np.arange(30) % 20)
    assert np.array_equal(c.cash(), d.cash())
    assert np.array_equal(c.visits(), [2] * 10 + [1] * 10)
    picks = {random_pick(a, np.random.default_rng(s), [3, 7]) for s in range(20)}
    assert picks == {3, 7}


@pytest.mark.parametrize("adaptive", [None, AdaptiveParams(window=2.0)])
def test_checkpoint_restores_exactly(tmp_path, adaptive: AdaptiveParams | None) -> None:
    graph = small_graph(6, 40, 200)
    state = OpicState.create(40, OpicParams(virtual_flush=3.0, adaptive=adaptive))
    visit_greedy(state, graph, 777)
    np.savez(tmp_path / "opic.npz", **state.checkpoint().to_arrays())
    with np.load(tmp_path / "opic.npz") as z:
        restored = OpicState.restore(OpicCheckpoint.from_arrays(dict(z)))
    assert restored.params == state.params
    for s in (state, restored):
        visit_greedy(s, graph, 555)
        s.add_pages(3)
        s.visit(41, [0, 42])
    a, b = state.checkpoint().to_arrays(), restored.checkpoint().to_arrays()
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    for kind in ("inflow", "papers") + (("bao", "fixed_window") if adaptive else ()):
        assert np.array_equal(state.estimate(kind), restored.estimate(kind))


# ---- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [0.0, 1.0, -0.5, 1.5, float("nan"), True, "0.85"])
def test_damping_outside_open_unit_interval_is_refused(c: object) -> None:
    with pytest.raises(ValueError, match=r"outside \(0, 1\)"):
        OpicParams(damping=c)


@pytest.mark.parametrize("call, message", [
    (lambda s: s.visit(-1, []), "page id -1 is not a known page"),
    (lambda s: s.visit(5, []), "page id 5 is not a known page"),
    (lambda s: s.visit(1.0, []), "must be an integer"),
    (lambda s: s.visit(0, [1, -2]), "negative page id"),
    (lambda s: s.visit(0, [1, 5]), "page id 5 but only 5 pages are known; add_pages"),
    (lambda s: s.visit(0, [0.5]), "integer page ids"),
    (lambda s: s.visit(0, [[1]]), "1-D"),
    (lambda s: s.grant([7], 0.1), "page id 7"),
    (lambda s: s.grant([0], -0.1), "finite and >= 0"),
    (lambda s: s.grant([0, 1], [0.1]), "one number or 2 numbers"),
    (lambda s: s.add_pages(-1), "non-negative integer"),
    (lambda s: s.add_pages(1, cash=2.0), "virtual page V holds only"),
    (lambda s: s.greedy_pick([]), "candidates is empty"),
    (lambda s: s.greedy_pick([9]), "page id 9"),
    (lambda s: s.estimate("pagerank"), "unknown"),
    (lambda s: s.estimate("bao"), "needs the Adaptive OPIC histories"),
    (lambda s: s.visit_rows([0, 1], [0, 2], [1, 2]), "indptr must be 3 integers"),
    (lambda s: s.visit_rows([0], [0, 3], [1, 2]), "rise from 0 to len"),
    (lambda s: s.visit_rows([0], [0, 1], [6]), "page id 6"),
])
def test_bad_input_is_refused_clearly(call, message: str) -> None:
    state = OpicState.create(5)
    before = state.checkpoint().to_arrays()
    with pytest.raises(ValueError, match=message):
        call(state)
    after = state.checkpoint().to_arrays()
    assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)


def test_bad_batch_input_is_refused_clearly() -> None:
    state = OpicState.create(5)
    with pytest.raises(ValueError, match="graph has 6 pages but the OPIC state knows 5"):
        visit_greedy(state, small_graph(0, 6, 10), 3)
    graph = small_graph(0, 5, 10)
    with pytest.raises(ValueError, match="count=-1"):
        visit_greedy(state, graph, -1)
    with pytest.raises(ValueError, match="needs rng"):
        visit_by(state, graph, "random", 3)
    with pytest.raises(ValueError, match="unknown"):
        visit_by(state, graph, "breadth-first", 3)
    with pytest.raises(ValueError, match="permutation"):
        visit_cycle(state, graph, 3, order=np.array([0, 0, 1, 2, 3]))
    with pytest.raises(ValueError, match="negative page id"):
        visit_order(state, graph, [0, -3])
    with pytest.raises(ValueError, match="no known pages"):
        visit_greedy(OpicState.create(0), LinkGraph(np.zeros(1, np.int64),
                                                    np.zeros(0, np.int32)), 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"window": 0.0}, "positive finite"), ({"window": float("inf")}, "positive finite"),
    ({"visits": 1}, "n >= 2"), ({"measures": 1}, "integer >= 2"),
    ({"default_history": -1.0}, "relative rate >= 0"), ({"recent_weight": 0.0}, r"\(0, 1\]"),
])
def test_bad_adaptive_params_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveParams(**kwargs)


def test_bad_state_params_and_checkpoints_are_refused() -> None:
    with pytest.raises(ValueError, match="virtual_flush"):
        OpicParams(virtual_flush=-1.0)
    with pytest.raises(ValueError, match="total cash"):
        OpicState.create(3, total=0.0)
    with pytest.raises(ValueError, match="non-negative integer"):
        OpicState.create(-2)
    arrays = OpicState.create(3).checkpoint().to_arrays()
    with pytest.raises(ValueError, match="lack"):
        OpicCheckpoint.from_arrays({k: v for k, v in arrays.items() if k != "pending"})
    arrays["history"] = np.zeros(4)
    with pytest.raises(ValueError, match="field history has shape"):
        OpicState.restore(OpicCheckpoint.from_arrays(arrays))
