"""The crawl bandwidth as a budget: G page fetches per refresh time unit (DESIGN.md §6).

The refresh planner divides a bandwidth of G fetches per time unit between due pages and
unread ones (003 §6, ``refresh.compose_unit``); this is where the daemon's crawl keeps to
it. Before it takes work from the frontier, the dispatcher asks
:meth:`UnitBudget.max_level` which levels it may take from: within a unit it dispatches page
fetches until G are spent, then waits for the next unit (:meth:`next_unit_at`), whatever is
still queued.

The split: unread pages (DISCOVERY, BACKGROUND: Greedy by OPIC cash) get their share ρ·G,
less the unplanned URGENT fetches (seeds, operator requests, sitemap and feed re-reads), so
that the planner's refresh share stays whole. Urgent fetches come when they come (re-reads
with the unit's plan, just after unread pages have started on their share), so unread pages
leave room for as many as the previous unit had. Beyond it they take only what the unit's
budget has left over the due pages (REFRESH) still queued, and only once the unit's plan is
in (:meth:`planned`: the daemon plans each unit just after it starts): due pages waiting for
their due time or for their host's politeness delay, or not yet planned, are not crowded
out by the unread pages of ready hosts, and neither share stays idle while the other has
work (``refresh.compose_unit`` plans the same split). In the unit's last fifth (the planner
has released every due page by then) the hold counts only the due pages their hosts can still
start before its last tenth (``servable``: politeness, Crawl-delay, back-off), and in the
last tenth nothing holds: what due pages cannot use goes to unread pages, so G is spent, and
unread pages on ready hosts do not take the fetches that due pages released together on one
host still need.

Not counted against G: fetches at the LOADER level (the DTDs and entities of a document
already fetched are part of loading it, and a document waiting for them must not wait a
whole unit) and robots.txt (not a page; it waits with the pages it is for).

What a unit did is a :class:`metadata.UnitSpent` row (table ``fetch_units``, view
``v_fetch_units``): written when the unit ends, with the refresh-level pages still queued
then (``carried_over``: they stay queued and go first in the next unit, never dropped), and
while it runs (``record``: at a stop, and from the daemon's status job) so that a restart
within the unit continues its count (:meth:`resume`) rather than granting G again.

A crash (SIGKILL) keeps what the metadata writer committed (DESIGN.md §4), so the count that
survives must cover every page record that survives: the dispatcher writes the running row
(:meth:`record_spent`) after each round of dispatches, before any of their records can be
submitted. The row goes to the same writer queue, which commits in submission order, so it
lands in the transaction of the first of those records or an earlier one; the writer keeps
one row per unit and batch (``metadata.apply``), so this costs one upsert per batch.
The servers see more than the records, though: the requests in flight and those whose
records were still in the writer's queue at the kill reached them, and the restarted crawl
fetches them again. So page fetches are also *reserved* ahead (``reserve``: a committed
write, waited for), :data:`RESERVE_SHARE` of G at a time, before the first request beyond
the last reservation goes out; a restart in the unit counts at least the reservation as
spent. A crash then costs up to that share of G unspent, and never sends a server more than
G requests in a unit: G is never overspent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from metadata import UnitSpent
from refresh.discovery import discovery_slots
from xyro.clock import unit_index
from xyro.crawl.frontier import BACKGROUND, LOADER, REFRESH, URGENT


#: The last share of a unit, in which the hold counts only the due pages their hosts can
#: still start in it: due pages are all released by then (the planner's LATEST_IN_UNIT, 0.8).
FREE_AT_END = 0.2
#: The last share of a unit in which nothing holds unread pages back, so G is spent.
HOLD_TO_END = 0.1
#: The share of G reserved by one committed write (module doc): twenty writes a unit, and
#: at most this much of G left unspent by a crash.
RESERVE_SHARE = 0.05


class UnitBudget:
    """G page fetches per time unit of ``unit_s`` clock seconds (module doc).

    ``queued_refresh``: how many refresh-level pages the frontier holds now (read when a
    unit ends); ``servable(until, cap)``: how many of them their hosts can start before
    ``until``, counted up to ``cap`` (``Frontier.servable``; None: all of them until the
    last fifth of the unit, none in it); ``record``: where :class:`UnitSpent` rows go (the
    metadata writer); ``reserve(unit, unit_s, count)``: commit that up to ``count`` page
    fetches of the unit may have been sent, and return once it is committed (None: no
    reservation, as in ``xyro crawl``, which keeps no budget).
    The dispatcher thread counts; :meth:`record` (the daemon's status job) and
    :meth:`snapshot` may run in any thread: a lock keeps a unit's rows in the order written,
    so a running row never lands after the unit's final one.
    """

    def __init__(self, bandwidth: int, unit_s: float, discovery_share: float,
                 queued_refresh: Callable[[], int],
                 record: Callable[[UnitSpent], object], planner: bool = False,
                 servable: Callable[[float, int], int] | None = None,
                 reserve: Callable[[int, float, int], object] | None = None) -> None:
        if bandwidth < 1 or not unit_s > 0 or not 0.0 <= discovery_share <= 1.0:
            raise ValueError(f"a fetch budget needs bandwidth >= 1 (got {bandwidth}), a "
                             f"positive time unit (got {unit_s} s) and a discovery share in "
                             f"[0, 1] (got {discovery_share})")
        self.bandwidth = bandwidth
        self.unit_s = unit_s
        # ρ·G by the rule the planner plans its refresh bandwidth with, and compose_unit
        # splits by: the refresh share held here is the one the intervals were planned for.
        self.discovery = discovery_slots(bandwidth, discovery_share)
        self._queued_refresh = queued_refresh
        self._servable = servable
        self._record = record
        self._lock = threading.Lock()
        self._planner = planner  # a planner queues each unit's due pages (the daemon)
        self._planned: int | None = None  # the last unit whose due pages were queued
        self.unit: int | None = None
        self._spent = [0, 0, 0]  # refresh, discovery, urgent
        self._saved = 0  # the unit's count in the last row written (record_spent)
        self._reserve = reserve
        self._reserved = 0  # the unit's page fetches covered by the last reservation
        self._chunk = max(1, round(RESERVE_SHARE * bandwidth))
        self._urgent_forecast = 0  # the previous unit's urgent fetches (module doc)
        self.previous: UnitSpent | None = None

    def resume(self, row: UnitSpent | None, now: float,
               reserved: tuple[int, float, int] | None = None) -> None:
        """Continue the count of the unit a previous run stopped in: its stored row, and its
        last reservation (unit, unit_s, count) when that is larger (module doc: fetches a
        kill left without records count as unread pages' share, the most it may have been)."""
        self._roll(now)
        ran = row if row is not None and row.unit == self.unit else None  # this unit's row
        if ran is not None and not ran.ended:
            self._spent = [ran.refresh, ran.discovery, ran.urgent]
            self._saved = ran.fetched
        if reserved is not None and tuple(reserved[:2]) == (self.unit, self.unit_s) \
                and not (ran is not None and ran.ended):
            self._spent[1] += max(0, min(int(reserved[2]), self.bandwidth) - self.fetched)
            self._reserved = self.fetched

    @property
    def fetched(self) -> int:
        return sum(self._spent)

    def allows(self, now: float) -> bool:
        """True while this unit's G page fetches are not all dispatched."""
        if self.unit is None or unit_index(now, self.unit_s) != self.unit:
            self._roll(now)
        return self.fetched < self.bandwidth

    def max_level(self, now: float) -> int:
        """The last frontier level the dispatcher may take from now (module doc): LOADER
        once G is spent, REFRESH while unread pages have had their share and due pages
        wait, else BACKGROUND (every level)."""
        if not self.allows(now):
            return LOADER
        if self._spent[1] + max(self._spent[2], self._urgent_forecast) < self.discovery:
            return BACKGROUND
        left = self.bandwidth - self.fetched
        end = self.next_unit_at()
        if now < end - FREE_AT_END * self.unit_s:
            if self._planner and self._planned != self.unit:
                return REFRESH
            return REFRESH if self._queued_refresh() >= left else BACKGROUND
        # The last tenth holds nothing: on an accelerated clock (the demo, the tests) a due
        # page its host could start in time may still miss the end in real time.
        last_hold = end - HOLD_TO_END * self.unit_s
        if self._servable is None or now >= last_hold or self._queued_refresh() < left:
            return BACKGROUND  # cheap test first: every queued due page fits in what is left
        return REFRESH if self._servable(last_hold, left) >= left else BACKGROUND

    def planned(self, unit: int) -> None:
        """The planner queued ``unit``'s due pages (or gave up): unread pages beyond their
        share no longer wait for them."""
        self._planned = unit

    def spend(self, level: int) -> None:
        """One page fetch at frontier ``level`` is about to be sent: counted, and reserved
        (committed) first when it goes past the last reservation (module doc)."""
        if level == LOADER:
            return
        self._spent[0 if level == REFRESH else 2 if level == URGENT else 1] += 1
        if self._reserve is not None and self.fetched > self._reserved and self.unit is not None:
            self._reserved = min(self.bandwidth, self.fetched + self._chunk - 1)
            self._reserve(self.unit, self.unit_s, self._reserved)

    def next_unit_at(self) -> float:
        """When the next unit starts (clock seconds)."""
        return ((self.unit or 0) + 1) * self.unit_s

    def record(self, now: float) -> UnitSpent | None:
        """Write the running unit's row now (None before the first unit)."""
        with self._lock:
            return self._write(now, ended=False)

    def close(self, now: float) -> UnitSpent | None:
        """The crawl stopped (its fetches all dispatched): write the running row, and bring
        the reservation down to the fetches made, so that a restart in the unit does not
        count the reserved rest as spent (only a kill leaves it so)."""
        row = self.record(now)
        if self._reserve is not None and self.unit is not None \
                and self._reserved > self.fetched:
            self._reserved = self.fetched
            self._reserve(self.unit, self.unit_s, self.fetched)
        return row

    def record_spent(self, now: float) -> UnitSpent | None:
        """Write the running row if page fetches were dispatched since the last row (None
        otherwise). The dispatcher calls it after a round of dispatches, before their
        records can be submitted: the count committed is never below the records committed
        (module doc)."""
        with self._lock:
            if self.fetched == self._saved:
                return None
            return self._write(now, ended=False)

    def _write(self, now: float, ended: bool) -> UnitSpent | None:
        if self.unit is None:
            return None
        refresh, discovery, urgent = self._spent
        row = UnitSpent(self.unit, self.unit_s, self.bandwidth, refresh + discovery + urgent,
                        refresh, discovery, urgent,
                        self._queued_refresh() if ended else None, ended, now)
        self._record(row)
        self._saved = row.fetched  # after the submit: a row with this count is queued
        return row

    def _roll(self, now: float) -> None:
        unit = unit_index(now, self.unit_s)
        with self._lock:  # the ended row and the new count, with no record() between
            if self.unit is not None and unit != self.unit:
                self.previous = self._write(now, ended=True)
                self._urgent_forecast = self._spent[2] if unit == self.unit + 1 else 0
            self.unit = unit
            self._spent = [0, 0, 0]
            self._saved = 0
            self._reserved = 0

    def snapshot(self) -> dict[str, int | float | None]:
        """The current unit's spending (and the previous unit's end), for status/metrics."""
        refresh, discovery, urgent = self._spent
        prev = self.previous
        return {"unit": self.unit, "bandwidth": self.bandwidth,
                "fetched": refresh + discovery + urgent, "refresh": refresh,
                "discovery": discovery, "urgent": urgent,
                "previous_fetched": None if prev is None else prev.fetched,
                "previous_carried_over": None if prev is None else prev.carried_over}
