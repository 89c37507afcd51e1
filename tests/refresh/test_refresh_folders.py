"""Folders select exactly what the full scan selects; the unit's fetch list composition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refresh import NOT_FILED, Folders, compose_unit, due_by_scan, due_folders

operation = st.one_of(
    st.tuples(st.just("file"), st.lists(st.tuples(st.integers(0, 60), st.integers(-5, 40)),
                                        max_size=20, unique_by=lambda p: p[0])),
    st.tuples(st.just("remove"), st.lists(st.integers(0, 70), max_size=10)),
    st.tuples(st.just("pop"), st.integers(-3, 45)),
)


@given(st.lists(operation, max_size=60))
@settings(max_examples=200, deadline=None)
def test_folders_pop_exactly_what_the_full_scan_selects(ops: list) -> None:
    folders = Folders()
    model = np.full(80, NOT_FILED, dtype=np.int64)  # the full-scan state: due folder per id
    popped_up_to: int | None = None
    for kind, arg in ops:
        if kind == "file" and arg:
            ids = np.array([p[0] for p in arg])
            due = np.array([p[1] for p in arg])
            folders.file(ids, due)
            model[ids] = due if popped_up_to is None else np.maximum(due, popped_up_to + 1)
        elif kind == "remove":
            folders.remove(arg)
            model[arg] = NOT_FILED
        elif kind == "pop":
            expected = due_by_scan(model, arg)
            got = folders.pop(arg)
            assert got.tolist() == expected.tolist()
            model[expected] = NOT_FILED
            popped_up_to = arg if popped_up_to is None else max(popped_up_to, arg)
        assert len(folders) == int((model != NOT_FILED).sum())
        assert folders.folder_of(np.arange(80)).tolist() == model.tolist()


def test_steady_state_cycle_and_counts() -> None:
    rng = np.random.default_rng(0)
    n, g = 1000, 50
    t = np.full(n, n / g)
    last = -rng.uniform(0, n / g, n)
    folders = Folders(n)
    folders.file(np.arange(n), due_folders(last, t))
    assert sum(folders.counts(-1, 25).values()) == n
    fetched = 0
    for unit in range(40):
        due = folders.pop(unit)
        assert due.size < 2 * g  # about G fall due per unit (binomial spread around it)
        fetched += due.size
        now = unit + rng.uniform(0, 1, due.size)
        folders.file(due, due_folders(now, t[due]))
        assert len(folders) == n  # no page lost or duplicated
    assert fetched == pytest.approx(40 * g, rel=0.05)


def test_due_folders_floor_and_never_refreshed() -> None:
    f = due_folders([0.5, 2.0, -1.5, 3.0], [1.6, 1.0, 1.0, np.inf], unit=1.0)
    assert f.tolist() == [2, 3, -1, NOT_FILED]
    assert due_folders([0.0], [7200.0], unit=3600.0).tolist() == [2]


def test_bad_folder_inputs_raise() -> None:
    folders = Folders()
    with pytest.raises(ValueError, match="one folder per id"):
        folders.file([1, 2], [3])
    with pytest.raises(ValueError, match="duplicate"):
        folders.file([1, 1], [3, 4])
    with pytest.raises(ValueError, match=">= 0"):
        folders.file([-1], [3])
    with pytest.raises(ValueError, match="integers"):
        folders.file([1.5], [3])
    with pytest.raises(ValueError, match="never refreshed"):
        folders.file([1], [NOT_FILED])
    with pytest.raises(ValueError, match="capacity"):
        Folders(-1)
    with pytest.raises(ValueError, match="differ in shape"):
        due_folders([0.0, 1.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        due_folders([0.0], [-1.0])
    with pytest.raises(ValueError, match="NaN"):
        due_folders([float("nan")], [1.0])
    with pytest.raises(ValueError, match="unit"):
        due_folders([0.0], [1.0], unit=0.0)


def test_compose_unit_splits_and_is_work_conserving() -> None:
    due = np.arange(10)
    prio = np.arange(10, dtype=float)  # id 9 most valuable
    unread = np.array([100, 101, 102, 103, 104, 105])
    plan = compose_unit(due, prio, unread, bandwidth=8, discovery_share=0.25)
    assert plan.discovery.tolist() == [100, 101]
    assert plan.maintenance.tolist() == [9, 8, 7, 6, 5, 4]
    assert sorted(plan.deferred.tolist()) == [0, 1, 2, 3]
    few_due = compose_unit(due[:2], prio[:2], unread, bandwidth=8, discovery_share=0.25)
    assert few_due.maintenance.size == 2 and few_due.discovery.size == 6
    no_unread = compose_unit(due, prio, unread[:0], bandwidth=8, discovery_share=0.5)
    assert no_unread.maintenance.size == 8 and no_unread.deferred.size == 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(bandwidth=-1, discovery_share=0.1), "bandwidth"),
    (dict(bandwidth=2.5, discovery_share=0.1), "bandwidth"),
    (dict(bandwidth=5, discovery_share=1.5), "discovery share"),
    (dict(bandwidth=5, discovery_share=float("nan")), "discovery share"),
])
def test_compose_unit_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compose_unit([1, 2], [0.1, 0.2], [3], **kwargs)
    with pytest.raises(ValueError, match="one per id"):
        compose_unit([1, 2], [0.1], [3], bandwidth=2, discovery_share=0.0)
