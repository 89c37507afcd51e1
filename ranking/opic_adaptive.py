"""Adaptive OPIC: importance from a recent window of each page's history, with G as the clock
(000 §3 "A changing graph", "The Adaptive OPIC algorithm"; 004 §3; DESIGN.md §5).

Every policy turns a page's recorded inflow into a *rate*: cash received per unit of G. All
known pages together receive about one unit of cash per unit of G (what a visit hands out
reaches the pages, directly or through the virtual page), so the mean rate is about 1/n and
the rates, normalized to sum 1, estimate the importance. What a visit records is its inflow
q = the cash collected minus the endowment (initial cash, focus grants) still held, at the
clock value g read *before* the visit adds its own cash to G: q arrived during (g_prev, g].

Policies (000 §3, names as in the paper):

- fixed window (size T): per page a ring of ``measures`` visit records (q, g). The estimate
  sums the inflow received in (G − T, G] (the interval straddling G − T counts pro rata,
  the cash since the last visit counts in full) and divides by the part of the window the
  records cover. When the ring is full, a record whose interval lies wholly before the
  window is dropped; otherwise (a page read often) the two oldest intervals after the
  straddling one are grouped into one (000 §3: "group several consecutive measures into
  one"), so the records still cover the whole window with bounded storage. (Dropping the
  oldest instead shrank an important page's window: 5.3 % L1 against 2.2 %, 8 records,
  T = 8, 100k-page power-law graph, Greedy.)
- variable window (last n visits): from the same ring, the newest n records: the inflow of
  the n − 1 intervals between them plus the cash since the last visit, over G − g_oldest.
- BAO, interpolation (Basic Adaptive OPIC, the Xyleme production policy; DESIGN.md gives
  its update): per page H_T (inflow estimated for the last T before the last visit) and
  G_last. A visit with inflow q and Δ = g − G_last sets H_T = q·T/Δ if Δ ≥ T, else
  H_T = H_T·(T − Δ)/T + q. The estimate applies that update to the cash held now, as if the
  page were read at G; importance ∝ H_T.

Default history (000 §3 "Expanding the graph"): a page found at clock G₀ starts with a
history saying it received r₀ per unit of G during (G₀ − T, G₀]: two ring records
(0, G₀ − T) and (r₀·T, G₀), and H_T = r₀·T, G_last = G₀ for BAO. r₀ = ρ/n (n the known pages,
so ρ = 1 is an average page). ρ is ``default_history`` when given, else learnt: an
exponential average (weight ``recent_weight``) of ρ measured at the first visit of each
page (its inflow over its age, times n), so it follows the importance of recently introduced
pages, which the paper found a good guess (important pages are found first).

The ring arrays are kept by ``ranking.opic.OpicState``; the compiled visit kernel of
``ranking.opic`` appends the records. This module holds the parameters and the estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

WINDOW_ESTIMATES = ("fixed_window", "variable_window", "bao")


@dataclass(frozen=True)
class AdaptiveParams:
    """Window parameters, in units of the OPIC clock G (cash handed out by visits; with a
    total cash of 1, about 1 per read of every page under Random or Cycle, 2 under Greedy,
    which reads pages when they hold about twice the mean cash: T = 8 is ~4 Greedy reads).

    ``window``: T for the fixed window and BAO, and the span of a new page's default
    history. ``visits``: n of the variable window (n ≥ 2; the paper found n ≈ 4 a good
    compromise). ``measures``: records kept per page for the fixed window (raised to
    ``visits`` + 2 when smaller, ``ring_size``). ``default_history``: ρ, a new page's rate
    relative to an average page, or None to learn it from recently introduced pages.
    ``recent_weight``: the weight of each new measurement in that average.
    """

    window: float = 8.0
    visits: int = 4
    measures: int = 8
    default_history: float | None = None
    recent_weight: float = 0.05

    def __post_init__(self) -> None:
        if not (_is_number(self.window) and math.isfinite(self.window) and self.window > 0):
            raise ValueError(f"adaptive window={self.window!r} must be a positive finite "
                             "amount of the clock G (about 1-2 per read of every page)")
        if not (isinstance(self.visits, int) and self.visits >= 2):
            raise ValueError(f"adaptive visits={self.visits!r}: the variable window needs an "
                             "integer n >= 2 (n = 4 is the paper's compromise)")
        if not (isinstance(self.measures, int) and self.measures >= 2):
            raise ValueError(f"adaptive measures={self.measures!r} must be an integer >= 2")
        if self.default_history is not None and not (
                _is_number(self.default_history) and math.isfinite(self.default_history)
                and self.default_history >= 0):
            raise ValueError(f"default_history={self.default_history!r} must be a finite "
                             "relative rate >= 0 (1 = an average page), or None to learn it")
        if not (_is_number(self.recent_weight) and 0 < self.recent_weight <= 1):
            raise ValueError(f"recent_weight={self.recent_weight!r} must be in (0, 1]")

    @property
    def ring_size(self) -> int:
        """Records kept per page: ``measures``, and at least n + 2 so that grouping the
        oldest records never touches the variable window's newest n."""
        return max(self.measures, self.visits + 2)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def bao_rates(bao_history: np.ndarray, bao_clock: np.ndarray, inflow_now: np.ndarray,
              clock: float, window: float) -> np.ndarray:
    """H_T/T per page after BAO's update applied to the inflow held now, at clock G."""
    delta = clock - bao_clock
    late = delta >= window
    h = np.where(late, 0.0, bao_history * (window - delta) / window + inflow_now)
    np.divide(inflow_now * window, delta, out=h, where=late)
    return h / window


def window_rates(fixed: bool, clock: float, window: float, visits: int,
                 inflow_now: np.ndarray, ring_cash: np.ndarray, ring_time: np.ndarray,
                 ring_len: np.ndarray, ring_head: np.ndarray, fallback: float) -> np.ndarray:
    """Inflow per unit of G over each page's window: the fixed window of size ``window``
    (``fixed``) or the newest ``visits`` records (module doc); ``fallback`` where a window
    has no length (records all at the clock value G)."""
    out = np.empty(len(inflow_now))
    _window_rates(fixed, clock, window, visits, inflow_now, ring_cash, ring_time, ring_len,
                  ring_head, fallback, out)
    return out


@njit(cache=True, nogil=True)
def _window_rates(fixed, clock, window, visits, inflow_now, ring_cash, ring_time,  # noqa: ANN001
                  ring_len, ring_head, fallback, out):  # noqa: ANN001
    m = ring_cash.shape[1]
    start_of_window = clock - window if fixed else -np.inf
    for i in range(out.shape[0]):
        used = ring_len[i] if fixed else min(visits, ring_len[i])
        first = (ring_head[i] - used + m) % m
        previous = ring_time[i, first]
        cash = 0.0
        for s in range(1, used):
            k = (first + s) % m
            cash += _in_window(ring_cash[i, k], previous, ring_time[i, k], start_of_window)
            previous = ring_time[i, k]
        cash += _in_window(inflow_now[i], previous, clock, start_of_window)
        span = clock - max(start_of_window, ring_time[i, first])
        out[i] = cash / span if span > 0 else fallback


@njit(cache=True, nogil=True, inline="always")
def _in_window(cash, begin, end, start_of_window):  # noqa: ANN001
    """The part of ``cash`` received in (begin, end] that falls after ``start_of_window``,
    pro rata (cash arrives evenly in G between two visits, the paper's interpolation)."""
    if end <= start_of_window:
        return 0.0
    if begin >= start_of_window:
        return cash
    return cash * (end - start_of_window) / (end - begin)
