"""The water level K kept up to date from one time unit to the next (DESIGN.md §6; 003 §6.6).

With clamps t_min ≤ t_i ≤ t_max the optimal refresh rates are x_i = 1/t_i =
clip(w_i/K, 1/t_max, 1/t_min) with Σ x_i = G (:mod:`refresh.intervals`, water-filling). A
full solve sorts all N weights w_i = √(r_i·λ_i). Between two units only the pages
re-estimated change their weight, and K moves a little; so, instead of the weights, we keep
three *bands* of them: low (w ≤ K/t_max: refreshed every t_max), mid (free: t_i = K/w_i) and
high (w ≥ K/t_min: every t_min), each as its count, Σw and Σw² (compensated sums,
:class:`refresh.intervals.RateSum`, the paper's incremental S split three ways). Then

    f(K) = n_low/t_max + n_high/t_min + Σ_mid w / K

and, for a fixed banding, f(K) = G has the closed form K = Σ_mid w / (G − n_low/t_max −
n_high/t_min): K = S/G of eq. 19 with the clamp correction. Moving K moves the band edges;
the pages between an old and a new edge are asked for (:class:`KeySource`; the planner
answers from the index on ``urls.weight``), so a unit costs the pages re-estimated plus the
pages that cross an edge, not N. The result is the water level of
:func:`refresh.intervals.refresh_intervals` over all the weights (the full-scan check).

Families: a page's weight is ``scale × key``. A family shares one scale, so a change of
scale moves the family's edges in key space and costs only the pages that cross. The planner
keeps pages with an estimated rate (key √(r·λ), scale 1) apart from pages on the prior rate,
the mean of the estimated rates that moves every unit (key √r, scale √prior).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from refresh.intervals import RateSum

LOW, MID, HIGH = 0, 1, 2
#: Safeguarded closed-form steps per solve; a unit's K moves so little that two suffice.
MAX_STEPS = 200


class KeySource(Protocol):
    """Where the keys of every page live (for the planner: an index of the store)."""

    def keys_between(self, family: str, low: float, high: float) -> NDArray[np.float64]:
        """Every key k of ``family`` with low ≤ k ≤ high (``high`` may be +inf)."""
        ...

    def max_key(self, family: str) -> float:
        """The largest key of ``family`` (0.0 when it has none)."""
        ...


def _keys(values: ArrayLike) -> NDArray[np.float64]:
    k = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if k.ndim != 1 or not (np.isfinite(k).all() and (k > 0).all()):
        raise ValueError("keys must be a 1-D array of finite numbers > 0")
    return k


class Band:
    """Count, Σk and Σk² of the keys in one band (compensated sums)."""

    __slots__ = ("n", "s", "q")

    def __init__(self, n: int = 0, s: RateSum | None = None, q: RateSum | None = None) -> None:
        self.n = n
        self.s = RateSum() if s is None else s
        self.q = RateSum() if q is None else q

    def add(self, keys: NDArray[np.float64]) -> None:
        if keys.size:
            self.n += int(keys.size)
            self.s.add(keys)
            self.q.add(keys * keys)

    def remove(self, keys: NDArray[np.float64]) -> None:
        if keys.size:
            if keys.size > self.n:
                raise ValueError(f"removing {keys.size} keys from a band of {self.n}: the "
                                 "ledger no longer matches the stored keys")
            self.n -= int(keys.size)
            self.s.remove(keys)
            self.q.remove(keys * keys)

    def to_json(self) -> list[Any]:
        return [self.n, list(self.s.state()), list(self.q.state())]

    @classmethod
    def from_json(cls, data: list[Any]) -> Band:
        n, s, q = data
        return cls(int(n), RateSum.restore(s), RateSum.restore(q))


class Family:
    """The keys of one family in three bands: low = {k ≤ edge_low}, high = {k ≥ edge_high},
    mid = the rest (edge_low < edge_high)."""

    def __init__(self, edge_low: float = 0.0, edge_high: float = math.inf,
                 bands: tuple[Band, Band, Band] | None = None) -> None:
        if not 0.0 <= edge_low < edge_high:
            raise ValueError(f"band edges {edge_low!r} < {edge_high!r} must be >= 0 and ordered")
        self.edge_low = float(edge_low)
        self.edge_high = float(edge_high)
        self.bands = bands if bands is not None else (Band(), Band(), Band())

    @property
    def n(self) -> int:
        return sum(b.n for b in self.bands)

    def band_of(self, keys: NDArray[np.float64]) -> NDArray[np.int8]:
        return np.where(keys <= self.edge_low, LOW,
                        np.where(keys >= self.edge_high, HIGH, MID)).astype(np.int8)

    def add(self, keys: ArrayLike) -> None:
        k = _keys(keys)
        where = self.band_of(k)
        for band in (LOW, MID, HIGH):
            self.bands[band].add(k[where == band])

    def remove(self, keys: ArrayLike) -> None:
        k = _keys(keys)
        where = self.band_of(k)
        for band in (LOW, MID, HIGH):
            self.bands[band].remove(k[where == band])

    def _shift(self, keys: NDArray[np.float64], src: int, dst: int) -> int:
        self.bands[src].remove(keys)
        self.bands[dst].add(keys)
        return int(keys.size)

    def move_edges(self, name: str, low: float, high: float, source: KeySource) -> int:
        """Put the edges at ``low`` < ``high``, moving the keys that cross (asked for from
        ``source``); returns how many moved. Widening steps first, so bands stay disjoint."""
        if not 0.0 <= low < high:
            raise ValueError(f"band edges {low!r} < {high!r} must be >= 0 and ordered")
        if self.n == 0:
            self.edge_low, self.edge_high = low, high
            return 0
        moved = 0
        if high > self.edge_high:  # [old, new) leaves high
            k = source.keys_between(name, self.edge_high, high)
            moved += self._shift(k[(k >= self.edge_high) & (k < high)], HIGH, MID)
            self.edge_high = high
        if low < self.edge_low:  # (new, old] leaves low
            k = source.keys_between(name, low, self.edge_low)
            moved += self._shift(k[(k > low) & (k <= self.edge_low)], LOW, MID)
            self.edge_low = low
        if low > self.edge_low:  # (old, new] joins low
            k = source.keys_between(name, self.edge_low, low)
            moved += self._shift(k[(k > self.edge_low) & (k <= low)], MID, LOW)
            self.edge_low = low
        if high < self.edge_high:  # [new, old) joins high
            k = source.keys_between(name, high, self.edge_high)
            moved += self._shift(k[(k >= high) & (k < self.edge_high)], MID, HIGH)
            self.edge_high = high
        return moved

    def to_json(self) -> dict[str, Any]:
        return {"edges": [self.edge_low, self.edge_high],
                "bands": [b.to_json() for b in self.bands]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Family:
        low, high = data["edges"]
        bands = tuple(Band.from_json(b) for b in data["bands"])
        if len(bands) != 3:
            raise ValueError("a family has exactly three bands")
        return cls(float(low), float(high), bands)  # type: ignore[arg-type]


@dataclass(frozen=True)
class WaterLevel:
    """A solved unit: K, the clamp rates lo = 1/t_max and hi = 1/t_min, and whether every
    page sits at t_min (the bandwidth covers them all: K is then max w · t_min, as in
    :func:`refresh.intervals.refresh_intervals`)."""

    k: float
    lo: float
    hi: float
    all_at_min: bool

    def intervals(self, weights: ArrayLike) -> NDArray[np.float64]:
        """t_i = 1/clip(w_i/K, lo, hi) for pages in the plan (same arithmetic as
        :func:`refresh.intervals.refresh_intervals`)."""
        w = np.asarray(weights, dtype=np.float64)
        if self.all_at_min:
            return 1.0 / np.full(w.shape, self.hi)
        return 1.0 / np.clip(w / self.k, self.lo, self.hi)


class WaterLedger:
    """Bands of every family, and the solve of K (module doc). Pure: the keys themselves
    stay with the caller's :class:`KeySource`."""

    def __init__(self, families: Mapping[str, Family] | None = None) -> None:
        self.families: dict[str, Family] = dict(families or {})

    def family(self, name: str) -> Family:
        if name not in self.families:
            self.families[name] = Family()
        return self.families[name]

    @property
    def n(self) -> int:
        return sum(f.n for f in self.families.values())

    def _scaled(self, scales: Mapping[str, float], band: int, moment: str) -> float:
        return math.fsum(scales[name] ** (2 if moment == "q" else 1)
                         * getattr(f.bands[band], moment).value
                         for name, f in self.families.items())

    def weight_sum(self, scales: Mapping[str, float]) -> float:
        """S = Σ w over every page in the ledger."""
        return math.fsum(self._scaled(scales, b, "s") for b in (LOW, MID, HIGH))

    def _count(self, band: int) -> int:
        return sum(f.bands[band].n for f in self.families.values())

    def place(self, k: float, scales: Mapping[str, float], lo: float, hi: float,
              source: KeySource) -> int:
        """Band every family at water level ``k``; returns how many keys changed band."""
        moved = 0
        for name, fam in self.families.items():
            c = scales[name]
            if not (math.isfinite(c) and c > 0):
                raise ValueError(f"scale of family {name!r} must be finite and > 0, got {c!r}")
            moved += fam.move_edges(name, k * lo / c, k * hi / c, source)
        return moved

    def used(self, k: float, scales: Mapping[str, float], lo: float, hi: float) -> float:
        """f(K) = Σ x_i for the banding in place (exact when placed at ``k``)."""
        return (lo * self._count(LOW) + hi * self._count(HIGH)
                + self._scaled(scales, MID, "s") / k)

    def _closed_form(self, scales: Mapping[str, float], lo: float, hi: float,
                     bandwidth: float) -> float | None:
        budget = bandwidth - lo * self._count(LOW) - hi * self._count(HIGH)
        free = self._scaled(scales, MID, "s")
        return free / budget if budget > 0 and free > 0 else None

    def solve(self, scales: Mapping[str, float], bandwidth: float, t_min: float,
              t_max: float, source: KeySource, start: float | None = None) -> WaterLevel:
        """K such that Σ clip(w_i/K, 1/t_max, 1/t_min) = G over every page (module doc),
        starting from ``start`` (the previous unit's K); leaves the bands placed at K."""
        if not (math.isfinite(bandwidth) and bandwidth > 0):
            raise ValueError(f"bandwidth G={bandwidth!r} must be a positive number of pages "
                             "per unit")
        if not (math.isfinite(t_min) and t_min > 0 and t_max >= t_min):
            raise ValueError(f"need 0 < t_min={t_min!r} <= t_max={t_max!r}")
        lo, hi = (0.0 if math.isinf(t_max) else 1.0 / t_max), 1.0 / t_min
        n = self.n
        if n == 0:
            return WaterLevel(math.inf, lo, hi, False)
        if n * lo > bandwidth * (1 + 1e-12):
            raise ValueError(f"{n} pages refreshed at least every t_max={t_max} units need "
                             f"{n * lo:.6g} pages/unit > G={bandwidth}")
        if n * hi <= bandwidth or hi == lo:
            top = max(scales[name] * source.max_key(name)
                      for name, f in self.families.items() if f.n)
            return WaterLevel(top * t_min, lo, hi, True)
        k = start if start is not None and math.isfinite(start) and start > 0 else \
            self.weight_sum(scales) / bandwidth
        return WaterLevel(self._iterate(k, scales, bandwidth, lo, hi, source), lo, hi, False)

    def _iterate(self, k: float, scales: Mapping[str, float], bandwidth: float, lo: float,
                 hi: float, source: KeySource) -> float:
        """Closed-form steps on the banding at K, safeguarded by a bracket [below, above]
        of the root (f decreases in K); exact once a step moves no key."""
        below, above = 0.0, math.inf
        self.place(k, scales, lo, hi, source)
        for _ in range(MAX_STEPS):
            if self.used(k, scales, lo, hi) >= bandwidth:
                below = max(below, k)
            else:
                above = min(above, k)
            cand = self._closed_form(scales, lo, hi, bandwidth)
            # Rounding may put the root just outside the bracket by an ulp or so.
            if cand is not None and below * (1 - 1e-12) <= cand <= above * (1 + 1e-12):
                nxt = cand
            elif below > 0 and math.isfinite(above):
                nxt = math.sqrt(below * above)
            else:
                nxt = k * 2.0 if math.isinf(above) else k / 2.0
            moved = self.place(nxt, scales, lo, hi, source)
            if nxt == cand and (moved == 0 or self._settled(nxt, scales, lo, hi, bandwidth)):
                return cand
            k = nxt
        raise RuntimeError(f"water level did not settle in {MAX_STEPS} steps (K ≈ {k!r})")

    def _settled(self, k: float, scales: Mapping[str, float], lo: float, hi: float,
                 bandwidth: float) -> bool:
        """f(k) = G to rounding: the keys that moved sat on an edge (w = K/t exactly), where
        both sides give them the same rate, and rounding of K only flipped their band."""
        return abs(self.used(k, scales, lo, hi) - bandwidth) <= 1e-12 * bandwidth

    def omega(self, level: WaterLevel, scales: Mapping[str, float], t_min: float,
              t_max: float) -> float:
        """Σ r·λ·t/2 of the plan at ``level`` (the clamped optimum's obsolescence)."""
        if not math.isfinite(level.k):
            return 0.0
        if level.all_at_min:
            return 0.5 * t_min * math.fsum(self._scaled(scales, b, "q") for b in (LOW, MID, HIGH))
        low = self._scaled(scales, LOW, "q") * t_max if self._count(LOW) else 0.0
        return 0.5 * (low + level.k * self._scaled(scales, MID, "s")
                      + self._scaled(scales, HIGH, "q") * t_min)

    def bandwidth_used(self, level: WaterLevel, bandwidth: float) -> float:
        """Σ x_i of the plan: G, or fewer when every page already sits at t_min."""
        if not math.isfinite(level.k):
            return 0.0
        return self.n * level.hi if level.all_at_min else bandwidth

    def to_json(self) -> dict[str, Any]:
        return {name: f.to_json() for name, f in self.families.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WaterLedger:
        return cls({str(name): Family.from_json(f) for name, f in data.items()})
