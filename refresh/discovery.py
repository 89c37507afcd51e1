"""One time unit's fetch list: discovery versus maintenance (003 §6.5; DESIGN.md §6).

A share ρ of the G fetches of a unit goes to unread pages, best ranked first (OPIC cash,
or importance until OPIC lands); the rest refreshes the pages due, most valuable first
(highest √(r·λ), the pages whose obsolescence grows fastest), but a page that has waited
past t_max since its last read goes before every page that has not: the folders hold about
as many pages a unit as there are slots, so without it the lowest-weight pages could be
deferred unit after unit, and t_max is what bounds a page's wait. The split is
work-conserving: slots one side cannot use go to the other. Due pages that do not fit are
deferred: the caller leaves them in their folder, read again at the next unit.

ρ·G is rounded to whole fetches by :func:`discovery_slots`, the one rule the planner's
refresh bandwidth (the intervals are planned for G − round(ρ·G)), this split and the crawl's
unit budget share: planned for a fractional (1 − ρ)·G above the slots a unit has, the
folders would fill faster than they empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True)
class UnitFetchList:
    """Page ids to fetch this unit, and the due ones left for the next."""

    maintenance: NDArray[np.int64]
    discovery: NDArray[np.int64]
    deferred: NDArray[np.int64]


def discovery_slots(bandwidth: int, discovery_share: float) -> int:
    """ρ·G in whole fetches: the unread pages' slots of a unit (module doc). Python's
    rounding, half to even, as the planner and the unit budget have always rounded it."""
    return int(round(discovery_share * bandwidth))


def compose_unit(due_ids: ArrayLike, due_priority: ArrayLike, unread_ranked: ArrayLike,
                 bandwidth: int, discovery_share: float,
                 overdue: ArrayLike | None = None) -> UnitFetchList:
    """Split ``bandwidth`` (G fetches this unit) between due and unread pages.

    ``due_priority`` (one per due id, higher first, e.g. √(r·λ)); ``unread_ranked``: unread
    ids already in rank order (best first); ``discovery_share`` ρ in [0, 1]; ``overdue``
    (one bool per due id, None: none): the due pages that have waited past t_max, which go
    before the others whatever their priority (module doc).
    """
    due = np.atleast_1d(np.asarray(due_ids)).astype(np.int64)
    prio = np.atleast_1d(np.asarray(due_priority, dtype=np.float64))
    unread = np.atleast_1d(np.asarray(unread_ranked)).astype(np.int64)
    late = np.zeros(due.shape, dtype=bool) if overdue is None else \
        np.atleast_1d(np.asarray(overdue, dtype=bool))
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, np.integer)) or bandwidth < 0:
        raise ValueError(f"bandwidth {bandwidth!r} must be a whole number of fetches >= 0")
    if not (math.isfinite(discovery_share) and 0.0 <= discovery_share <= 1.0):
        raise ValueError(f"discovery share {discovery_share!r} must lie in [0, 1] (ρ% / 100)")
    if prio.shape != due.shape:
        raise ValueError(f"{due.size} due ids but {prio.size} priorities; pass one per id")
    if late.shape != due.shape:
        raise ValueError(f"{due.size} due ids but {late.size} overdue flags; pass one per id")
    if np.isnan(prio).any():
        raise ValueError("due priorities contain NaN")
    g = int(bandwidth)
    n_disc = min(discovery_slots(g, discovery_share), unread.size)
    n_maint = min(g - n_disc, due.size)
    n_disc = min(g - n_maint, unread.size)  # give unused maintenance slots to discovery
    order = np.lexsort((-prio, ~late))  # overdue first; then by priority; ties by position
    return UnitFetchList(maintenance=due[order[:n_maint]], discovery=unread[:n_disc],
                         deferred=due[order[n_maint:]])
