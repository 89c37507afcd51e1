from __future__ import annotations

import threading

import pytest

from xyro.clock import AcceleratedClock, ManualClock, WallClock


def test_manual_clock_moves_only_when_told() -> None:
    c = ManualClock(100.0)
    assert c.now() == 100.0
    c.wait(5.0)
    assert c.now() == 105.0
    c.advance(1.5)
    assert c.now() == 106.5
    with pytest.raises(ValueError):
        c.set(1.0)


def test_accelerated_clock_runs_fast_and_waits_scaled() -> None:
    c = AcceleratedClock(start=0.0, speed=10_000.0)
    t0 = c.now()
    c.wait(50.0)  # 5 ms real
    assert c.now() - t0 >= 50.0


def test_wait_returns_early_on_stop() -> None:
    stop = threading.Event()
    stop.set()
    assert AcceleratedClock(0.0, 1.0).wait(3600.0, stop) is True
    assert WallClock().wait(3600.0, stop) is True
    assert ManualClock().wait(10.0, stop) is True


def test_unit_index_is_the_floor_of_time_over_the_unit() -> None:
    from xyro.clock import unit_index

    assert unit_index(86_399.9, 86_400.0) == 0 and unit_index(86_400.0, 86_400.0) == 1
    assert unit_index(-0.5, 1.0) == -1
    import pytest
    with pytest.raises(ValueError, match="unit_s"):
        unit_index(1.0, 0.0)
