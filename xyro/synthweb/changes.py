"""Page changes: one Poisson process per page on the injected clock's time line.

Page i with rate lambda_i (changes per clock second) changes at t0 + S_1, t0 + S_2, ... with
S_k the partial sums of Exp(lambda_i) gaps, drawn lazily in fixed chunks from a generator
seeded by (seed, i), so the event times never depend on the order of the queries. The
version at time t is the number of events in (t0, t]; version 0 is the page as created,
some time before t0 (its "birth", used as Last-Modified until the first change).
"""

from __future__ import annotations

import bisect
import threading

import numpy as np

CHUNK = 64  # events drawn at a time; fixed so results are query-order independent
MAX_AGE = 30 * 86400.0  # pages were created up to 30 clock days before t0


class ChangeProcess:
    """Lazily generated change times of every page; thread-safe."""

    def __init__(self, seed: int, rates: np.ndarray, t0: float) -> None:
        self._seed = seed
        self._rates = np.asarray(rates, dtype=float)
        self.t0 = float(t0)
        self._events: dict[int, list[float]] = {}
        self._rngs: dict[int, np.random.Generator] = {}
        self._lock = threading.Lock()
        created = np.random.default_rng([seed, 2]).random(len(self._rates)) * MAX_AGE
        since_change = np.full(len(self._rates), np.inf)
        changing = self._rates > 0
        since_change[changing] = (np.random.default_rng([seed, 3])
                                  .standard_exponential(len(self._rates))[changing]
                                  / self._rates[changing])
        self._births = (self.t0 - np.minimum(created, since_change)).tolist()

    def rate(self, page: int) -> float:
        return float(self._rates[page])

    def birth(self, page: int) -> float:
        """When version 0 was written (clock seconds), deterministic per page."""
        return self._births[page]

    def _extend(self, page: int, until: float) -> list[float]:
        events = self._events.setdefault(page, [])
        rate = self._rates[page]
        if rate <= 0:
            return events
        rng = self._rngs.get(page)
        if rng is None:
            rng = self._rngs[page] = np.random.default_rng([self._seed, page, 1])
        last = events[-1] if events else self.t0
        while last <= until:
            gaps = rng.standard_exponential(CHUNK) / rate
            times = last + np.cumsum(gaps)
            events.extend(times.tolist())
            last = events[-1]
        return events

    def events(self, page: int, start: float, end: float) -> list[float]:
        """Change times in (start, end], clock seconds, ascending."""
        with self._lock:
            ev = self._extend(page, end)
            return ev[bisect.bisect_right(ev, start):bisect.bisect_right(ev, end)]

    def changes_between(self, page: int, start: float, end: float) -> int:
        """Number of changes in (start, end]: what a fetch at ``end`` after one at
        ``start`` could at most have detected."""
        return len(self.events(page, start, end))

    def state(self, page: int, t: float) -> tuple[int, float]:
        """(version, time of the last change or birth) of ``page`` at clock time ``t``."""
        with self._lock:
            ev = self._extend(page, t)
            v = bisect.bisect_right(ev, t)
        return v, (ev[v - 1] if v else self.birth(page))

    def version(self, page: int, t: float) -> int:
        return self.state(page, t)[0]
