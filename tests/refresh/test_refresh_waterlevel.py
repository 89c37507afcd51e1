"""The incremental water level equals the full water-filling solve (DESIGN.md §6)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from refresh import WaterLedger, refresh_intervals
from refresh.waterlevel import Family


class ArrayKeys:
    """An in-memory key source that counts the keys it hands out."""

    def __init__(self) -> None:
        self.keys: dict[str, np.ndarray] = {"a": np.empty(0), "b": np.empty(0)}
        self.served = 0

    def keys_between(self, family: str, low: float, high: float) -> np.ndarray:
        k = self.keys[family]
        out = k[(k >= low) & (k <= high)]
        self.served += out.size
        return out

    def max_key(self, family: str) -> float:
        return float(self.keys[family].max()) if self.keys[family].size else 0.0


def full_solve(src: ArrayKeys, scales: dict[str, float], g: float, t_min: float,
               t_max: float):
    w = np.concatenate([src.keys[f] * scales[f] for f in ("a", "b")])
    return refresh_intervals(np.ones(w.size), w * w, g, t_min, t_max), w


def check(ledger: WaterLedger, src: ArrayKeys, scales: dict[str, float], g: float,
          t_min: float, t_max: float, start: float | None) -> float:
    level = ledger.solve(scales, g, t_min, t_max, src, start)
    plan, w = full_solve(src, scales, g, t_min, t_max)
    assert level.k == pytest.approx(plan.k, rel=1e-9)
    assert np.allclose(level.intervals(w), plan.intervals, rtol=1e-9)
    assert ledger.omega(level, scales, t_min, t_max) == pytest.approx(plan.omega, rel=1e-9)
    assert ledger.bandwidth_used(level, g) == pytest.approx(plan.bandwidth, rel=1e-9)
    total = ledger.weight_sum(scales)
    assert total * total / (2 * g) == pytest.approx(plan.omega_unclamped, rel=1e-9)
    return level.k


@pytest.mark.parametrize("seed", range(6))
def test_incremental_level_matches_the_full_solve_through_random_changes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    src, ledger = ArrayKeys(), WaterLedger()
    for name in ("a", "b"):
        keys = rng.lognormal(0.0, 1.5, 2000)
        src.keys[name] = keys
        ledger.family(name).add(keys)
    g, t_min, t_max = 400.0, 1.0, 40.0
    scales = {"a": 1.0, "b": 0.7}
    k = check(ledger, src, scales, g, t_min, t_max, None)
    for _ in range(25):
        name = "a" if rng.random() < 0.6 else "b"
        keys = src.keys[name]
        gone = rng.choice(keys.size, size=int(rng.integers(0, 60)), replace=False)
        ledger.family(name).remove(keys[gone])
        keys = np.delete(keys, gone)
        new = rng.lognormal(0.0, 1.5, int(rng.integers(0, 80)))
        if rng.random() < 0.3:  # ties, as pages with equal histories give
            new = np.concatenate((new, np.full(5, keys[0] if keys.size else 1.0)))
        ledger.family(name).add(new)
        src.keys[name] = np.concatenate((keys, new))
        scales["b"] *= float(np.exp(rng.normal(0.0, 0.05)))  # the prior moves
        g = float(np.clip(g * np.exp(rng.normal(0.0, 0.02)), 150.0, 800.0))
        if rng.random() < 0.2:
            t_max = float(rng.choice([20.0, 40.0, 80.0, math.inf]))
        src.served = 0
        k = check(ledger, src, scales, g, t_min, t_max, k)
        ledger = WaterLedger.from_json(json.loads(json.dumps(ledger.to_json())))


def test_a_small_move_of_k_reads_only_the_keys_that_cross() -> None:
    rng = np.random.default_rng(1)
    src, ledger = ArrayKeys(), WaterLedger()
    src.keys["a"] = rng.lognormal(0.0, 1.0, 200_000)
    ledger.family("a").add(src.keys["a"])
    ledger.family("b")
    scales = {"a": 1.0, "b": 1.0}
    k = check(ledger, src, scales, 20_000.0, 1.0, 30.0, None)
    new = rng.lognormal(0.0, 1.0, 500)  # one unit's new pages
    ledger.family("a").add(new)
    src.keys["a"] = np.concatenate((src.keys["a"], new))
    src.served = 0
    check(ledger, src, scales, 20_000.0, 1.0, 30.0, k)
    assert 0 < src.served < 2_000  # the keys near the two edges, not 200,000


def test_every_page_at_t_min_and_no_pages() -> None:
    src, ledger = ArrayKeys(), WaterLedger()
    assert math.isinf(ledger.solve({}, 10.0, 1.0, 5.0, src).k)
    src.keys["a"] = np.array([0.5, 2.0, 1.0])
    ledger.family("a").add(src.keys["a"])
    ledger.family("b")
    level = ledger.solve({"a": 1.0, "b": 1.0}, 10.0, 1.0, 5.0, src)
    assert level.all_at_min and level.k == 2.0
    assert level.intervals(np.array([0.5, 2.0])).tolist() == [1.0, 1.0]
    assert ledger.bandwidth_used(level, 10.0) == 3.0


def test_bad_input_is_refused() -> None:
    fam = Family()
    with pytest.raises(ValueError, match="finite numbers > 0"):
        fam.add([1.0, 0.0])
    with pytest.raises(ValueError, match="no longer matches"):
        fam.remove([1.0])
    with pytest.raises(ValueError, match="ordered"):
        Family(2.0, 1.0)
    ledger = WaterLedger({"a": Family()})
    ledger.family("a").add([1.0] * 10)
    with pytest.raises(ValueError, match="t_max"):
        ledger.solve({"a": 1.0}, 1.0, 1.0, 2.0, ArrayKeys())
