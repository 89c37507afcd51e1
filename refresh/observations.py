"""Plain records of what the crawler observed about one page (003 §6.1, DESIGN.md §6).

All times and lengths are in the caller's time unit (the planner uses "time units"; the
estimators return rates per that same unit). The records validate on construction, so a
bad row from the database ends in one clear ``ValueError`` instead of a wrong rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _float_array(values: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not numeric ({exc}); pass a sequence of numbers") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence, got shape {arr.shape}")
    return arr


def _bool_array(values: ArrayLike, name: str) -> NDArray[np.bool_]:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence, got shape {arr.shape}")
    if arr.size and not (arr.dtype == np.bool_ or np.isin(arr, (0, 1)).all()):
        raise ValueError(f"{name}: expected booleans (or 0/1), got {arr[:5]!r}...")
    return arr.astype(np.bool_)


@dataclass(frozen=True)
class ChangeObservations:
    """Access intervals of one page and whether its signature (MD5) changed in each.

    ``intervals[k]`` is t_k − t_{k−1} (> 0, finite), ``changed[k]`` is True when the MD5 at
    t_k differs from the one at t_{k−1}: a "change interval" c_j, else a "no-change
    interval" v_i (003 §6.1.1). The order of intervals does not matter to the estimators.
    """

    intervals: NDArray[np.float64]
    changed: NDArray[np.bool_]

    def __init__(self, intervals: ArrayLike, changed: ArrayLike) -> None:
        iv = _float_array(intervals, "intervals")
        ch = _bool_array(changed, "changed")
        if iv.shape != ch.shape:
            raise ValueError(
                f"intervals and changed differ in length ({iv.size} vs {ch.size}); "
                "pass one changed flag per interval")
        if not np.isfinite(iv).all():
            raise ValueError(f"intervals: NaN or infinite length at index "
                             f"{int(np.flatnonzero(~np.isfinite(iv))[0])}")
        if (iv <= 0).any():
            bad = int(np.flatnonzero(iv <= 0)[0])
            raise ValueError(f"intervals: length {iv[bad]!r} at index {bad} is not positive; "
                             "access times must strictly increase")
        object.__setattr__(self, "intervals", iv)
        object.__setattr__(self, "changed", ch)

    @property
    def n_changed(self) -> int:
        """C, the number of change intervals."""
        return int(self.changed.sum())

    @property
    def n_unchanged(self) -> int:
        """V, the number of no-change intervals."""
        return int(self.changed.size - self.changed.sum())

    @property
    def change_lengths(self) -> NDArray[np.float64]:
        """c_j, lengths of the change intervals."""
        return self.intervals[self.changed]

    @property
    def unchanged_time(self) -> float:
        """Σ v_i, total length of the no-change intervals."""
        return float(self.intervals[~self.changed].sum())


@dataclass(frozen=True)
class AccessHistory:
    """Every access of one page: times, MD5 change flags and Last-Modified dates.

    ``access_times`` t_0 < … < t_N; ``changed[k]`` (k = 0…N−1) tells whether the MD5 at
    t_{k+1} differs from the one at t_k; ``last_modified[k]`` is the Last-Modified date d_k
    the server sent at t_k, NaN where it sent none. Pass the server's ``Date`` header as the
    access time when it has one, so a skewed server clock does not look like a future date.
    """

    access_times: NDArray[np.float64]
    changed: NDArray[np.bool_]
    last_modified: NDArray[np.float64]

    def __init__(self, access_times: ArrayLike, changed: ArrayLike,
                 last_modified: ArrayLike | None = None) -> None:
        t = _float_array(access_times, "access_times")
        ch = _bool_array(changed, "changed")
        if t.size == 0:
            raise ValueError("access_times is empty; a page history starts at its first access")
        if not np.isfinite(t).all():
            raise ValueError("access_times: NaN or infinite time; pass POSIX seconds or units")
        if (np.diff(t) <= 0).any():
            bad = int(np.flatnonzero(np.diff(t) <= 0)[0])
            raise ValueError(f"access_times must strictly increase: t[{bad + 1}]={t[bad + 1]!r} "
                             f"<= t[{bad}]={t[bad]!r}")
        if ch.size != t.size - 1:
            raise ValueError(f"changed has {ch.size} flags for {t.size} accesses; "
                             "expected one flag per interval (len(access_times) - 1)")
        d = (np.full(t.size, np.nan) if last_modified is None
             else _float_array(last_modified, "last_modified"))
        if d.size != t.size:
            raise ValueError(f"last_modified has {d.size} dates for {t.size} accesses; "
                             "use NaN where the server sent none")
        if np.isinf(d).any():
            raise ValueError("last_modified: infinite date; use NaN for a missing date")
        object.__setattr__(self, "access_times", t)
        object.__setattr__(self, "changed", ch)
        object.__setattr__(self, "last_modified", d)

    def change_observations(self) -> ChangeObservations:
        """The signature view of this history (intervals and MD5 change flags)."""
        return ChangeObservations(np.diff(self.access_times), self.changed)
