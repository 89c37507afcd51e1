"""What the refresh planner keeps between units (DESIGN.md §6, 003 §6.6): the ledger, and
the water-level bookkeeping of the pages' weight keys (:mod:`refresh.waterlevel`).

The ledger is one JSON value of the ``state`` table: the observation watermark, Σλ of the
estimated pages whose mean is the prior, the water-level bands, K, and the settings they
were built with. Each page's weight key is ``urls.weight`` (schema v4): √(r·λ) for an
estimated rate, −√r for a page on the prior (its weight is √(r·prior)); the two families'
bands let a unit solve K over every page without reading them all.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from metadata import refresh_queries as q
from refresh import RateSum
from refresh.waterlevel import Family, WaterLedger, WaterLevel
from xyro.jobs.plan_scan import Plan
from xyro.jobs.plan_settings import PlannerSettings

#: Weight-key families (refresh.waterlevel): estimated rates (key √(r·λ), stored as is) and
#: pages on the prior (key √r, stored negated; their weight is √(r·prior)).
ESTIMATED, PRIOR = "estimated", "prior"
_LEDGER_FORMAT = 1


@dataclass(eq=False)
class Ledger:
    """What the planner keeps between units (module doc), stored as one JSON value.

    ``rate_sum``/``rate_count``: Σλ (changes per unit, as stored) and the number of planned
    pages with an estimated rate, whose mean is the prior; ``planned``: pages in the plan
    (with a rate), below the floor included; ``water``: the bands of the weight keys.
    """

    token: str
    unit: int
    watermark: int
    jobs_seen: int
    unit_s: float
    importance_source: str
    importance_floor: float
    k: float
    planned: int
    rate_sum: RateSum
    rate_count: int
    water: WaterLedger

    def prior(self, default: float = 1.0) -> float:
        """The mean estimated rate (changes per unit), ``default`` without any."""
        return self.rate_sum.value / self.rate_count if self.rate_count > 0 else default

    def to_json(self) -> str:
        return json.dumps({
            "format": _LEDGER_FORMAT, "token": self.token, "unit": self.unit,
            "watermark": self.watermark, "jobs_seen": self.jobs_seen, "unit_s": self.unit_s,
            "importance_source": self.importance_source,
            "importance_floor": self.importance_floor, "k": self.k, "planned": self.planned,
            "rate_sum": list(self.rate_sum.state()), "rate_count": self.rate_count,
            "water": self.water.to_json()})

    @classmethod
    def from_json(cls, text: str) -> Ledger | None:
        """The ledger, or None for a value this version cannot read (then: rebuild)."""
        try:
            d = json.loads(text)
            if d.get("format") != _LEDGER_FORMAT:
                return None
            return cls(str(d["token"]), int(d["unit"]), int(d["watermark"]),
                       int(d["jobs_seen"]), float(d["unit_s"]), str(d["importance_source"]),
                       float(d["importance_floor"]), float(d["k"]), int(d["planned"]),
                       RateSum.restore(d["rate_sum"]), int(d["rate_count"]),
                       WaterLedger.from_json(d["water"]))
        except (TypeError, ValueError, KeyError, AttributeError):
            return None


class StoredKeys:
    """The weight keys of every page for :mod:`refresh.waterlevel`: the index ``urls_weight``
    of the store, with this unit's new keys (not written yet) laid over it."""

    def __init__(self, conn: sqlite3.Connection, weights: dict[int, float]) -> None:
        self._conn = conn
        self._changed = np.fromiter(weights, dtype=np.int64, count=len(weights))
        w = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
        w = w[~np.isnan(w)]
        self._new = {ESTIMATED: np.sort(w[w > 0]), PRIOR: np.sort(-w[w < 0])}

    def keys_between(self, family: str, low: float, high: float) -> np.ndarray:
        if family == ESTIMATED:
            ids, keys = q.weights_between(self._conn, low, high)
        else:
            ids, keys = q.weights_between(self._conn, -high, -low)
            keys = -keys
        keys = keys[~np.isin(ids, self._changed)]
        new = self._new[family]
        return np.concatenate((keys, new[(new >= low) & (new <= high)]))

    def max_key(self, family: str) -> float:
        changed = set(self._changed.tolist())
        rows = q.weights_top(self._conn, family == ESTIMATED, len(changed) + 1)
        stored = [abs(w) for i, w in rows if i not in changed]
        return max(stored[:1] + self._new[family][-1:].tolist() or [0.0])


def solve(conn: sqlite3.Connection, s: PlannerSettings, led: Ledger, prior: float,
          overlay: dict[int, float]) -> tuple[WaterLevel, float, float]:
    """K over every page in the ledger (the stored keys read through ``conn``, ``overlay``
    laid over them); also Ω(G) unclamped and Ω of the plan."""
    g = s.refresh_bandwidth
    water = led.water
    water.family(ESTIMATED)
    water.family(PRIOR)
    scales = {ESTIMATED: 1.0, PRIOR: math.sqrt(prior)}
    t_max = s.t_max_for(water.n)
    if g <= 0 or water.n == 0:
        return WaterLevel(math.inf, 0.0, 1.0 / s.min_interval_units, False), 0.0, 0.0
    level = water.solve(scales, g, s.min_interval_units, t_max, StoredKeys(conn, overlay),
                        led.k)
    total = water.weight_sum(scales)
    return (level, total * total / (2.0 * g),
            water.omega(level, scales, s.min_interval_units, t_max))


def level_of(s: PlannerSettings, plan: Plan, kept: np.ndarray) -> WaterLevel:
    """The full scan's K as a :class:`WaterLevel` (where the ledger's bands go)."""
    n = int(kept.sum())
    lo = 0.0 if math.isinf(plan.t_max_used) else 1.0 / plan.t_max_used
    hi = 1.0 / s.min_interval_units
    all_at_min = n * hi <= s.refresh_bandwidth or hi == lo
    return WaterLevel(plan.k, lo, hi, all_at_min)


def family_at(level: WaterLevel, scale: float) -> Family:
    """An empty family with its band edges at ``level`` (anywhere when K is not a
    water level: the next unit's solve places them)."""
    if math.isfinite(level.k) and not level.all_at_min:
        return Family(level.k * level.lo / scale, level.k * level.hi / scale)
    return Family()


def forget_rates(led: Ledger, lam: np.ndarray) -> None:
    """Take estimated rates (changes per unit, as stored) out of the prior's sum."""
    if lam.size:
        led.rate_sum.remove(lam)
        led.rate_count -= int(lam.size)


def stored_keys(r: np.ndarray, lam: np.ndarray, on_prior: np.ndarray, kept: np.ndarray,
                before: np.ndarray) -> np.ndarray:
    """Weight keys as ``urls.weight`` stores them (NaN: not refreshed): √(r·λ), or −√r on
    the prior. A stored key equal to rounding (the rate was stored per second, so √(r·λ)
    of the stored rate can differ in the last bit) is kept, not rewritten."""
    keys = np.where(on_prior, -np.sqrt(r), np.sqrt(r * lam))
    new = np.where(kept, keys, np.nan)
    close = np.isclose(new, before, rtol=1e-12, atol=0.0)
    return np.where(close, before, new)


def _by_family(stored: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
    """Stored weight keys (NaN: none) split into (family, keys) (module constants)."""
    stored = stored[~np.isnan(stored)]
    for name, keys in ((ESTIMATED, stored[stored > 0]), (PRIOR, -stored[stored < 0])):
        if keys.size:
            yield name, keys


def forget_keys(water: WaterLedger, stored: np.ndarray) -> None:
    """Take stored weight keys out of their families' bands."""
    for name, keys in _by_family(stored):
        water.family(name).remove(keys)


def add_keys(water: WaterLedger, stored: np.ndarray) -> None:
    """Put stored weight keys into their families' bands."""
    for name, keys in _by_family(stored):
        water.family(name).add(keys)
