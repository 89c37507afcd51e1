"""The saved state of the daemon's global PageRank estimate: a round trip, and a clear error
naming the way out when the saved row is not a round state."""

from __future__ import annotations

import pytest

from xyro.jobs.global_round_state import STATE_KEY, RoundState


def test_the_state_survives_its_json() -> None:
    state = RoundState(round=2, rounds=4, local_pages=85, budget=85, spent=42,
                       pending=((7, "http://a.example/x"),), estimate_change_l1=0.25,
                       updated_at=1.5)
    assert RoundState.from_stored(state.to_json()) == state
    assert RoundState.from_stored(None) == RoundState() and not RoundState().started
    assert state.started and state.pending_urls == frozenset({"http://a.example/x"})


@pytest.mark.parametrize("value", ['{"round": 1, "colour": 2}', '{"pending": [[1]]}', '[1]'])
def test_a_saved_row_that_is_no_round_state_is_named(value: str) -> None:
    with pytest.raises(ValueError, match=f"{STATE_KEY}.*delete that row of the state table"):
        RoundState.from_stored(value)
