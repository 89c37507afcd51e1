"""The one clock every component reads time from (DESIGN.md §3).

Real runs use :class:`WallClock`. Tests and ``xyro demo`` use :class:`AcceleratedClock`
(simulated time = start + speed × elapsed), so a simulated day passes in seconds while
politeness delays, time units and change processes stay consistent. :class:`ManualClock`
is for single-threaded unit tests: time moves only when told to.

All times are POSIX seconds (float) on the clock's own time line; all durations are
seconds of that time line. No other module calls ``time.time()`` or ``time.sleep()``.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


def unit_index(t_s: float, unit_s: float) -> int:
    """The refresh time unit (folder number) that time ``t_s`` falls in: ⌊t/unit⌋.

    The one definition of "the current unit" (DESIGN.md §6): the planner, ``xyro status``
    and the trap guard's per-unit page budget all ask here.
    """
    if not unit_s > 0:
        raise ValueError(f"unit_s {unit_s!r} must be positive")
    return int(t_s // unit_s)


class Clock(Protocol):
    """What components need of time: read it, and wait on it interruptibly."""

    def now(self) -> float:
        """Current time, POSIX seconds on this clock's time line."""
        ...

    def wait(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Wait ``seconds`` of clock time; return True early if ``stop`` gets set."""
        ...


class WallClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def wait(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if seconds <= 0:
            return bool(stop and stop.is_set())
        if stop is None:
            time.sleep(seconds)
            return False
        return stop.wait(seconds)


class AcceleratedClock:
    """Simulated time running ``speed`` times faster than the wall clock.

    ``start`` is the simulated POSIX time at construction. Waiting ``s`` simulated seconds
    takes ``s / speed`` real seconds, so every component keeps the same proportions.
    """

    def __init__(self, start: float, speed: float) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be > 0, got {speed}")
        self._start = float(start)
        self._speed = float(speed)
        self._t0 = time.monotonic()

    @classmethod
    def from_epoch(cls, epoch: float, speed: float, sim_start: float | None = None,
                   ) -> AcceleratedClock:
        """The time line that reads ``sim_start`` (default: ``epoch`` itself) at wall-clock
        POSIX time ``epoch`` and runs ``speed`` times faster: the same line in every process
        given the same values (``xyro run`` and ``python -m xyro.synthweb`` with the same
        ``--speed --epoch --sim-start`` share one simulated time)."""
        start = epoch if sim_start is None else sim_start
        return cls(start + speed * (time.time() - epoch), speed)

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        return self._start + self._speed * (time.monotonic() - self._t0)

    def wait(self, seconds: float, stop: threading.Event | None = None) -> bool:
        real = max(0.0, seconds) / self._speed
        if stop is None:
            if real > 0:
                time.sleep(real)
            return False
        return stop.wait(real) if real > 0 else stop.is_set()


class ManualClock:
    """A clock that moves only when advanced; ``wait`` advances it (no real sleeping).

    Thread-safe, for unit tests that need exact, repeatable times.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._t = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._t += seconds

    def set(self, t: float) -> None:
        with self._lock:
            if t < self._t:
                raise ValueError("a clock cannot go backwards")
            self._t = t

    def wait(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if stop is not None and stop.is_set():
            return True
        self.advance(max(0.0, seconds))
        return bool(stop and stop.is_set())
