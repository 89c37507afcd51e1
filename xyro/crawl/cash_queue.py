"""A host's queue of unread URLs in Greedy order: highest OPIC cash first (000 §2 "Greedy").

The frontier keeps one FIFO per host and level; for the levels of unread pages (discovery,
background) it uses this queue instead when OPIC runs in the crawl, so that within
politeness the crawler fetches the unread page holding the most cash, as the papers' Greedy
policy does (DESIGN.md §5: "Greedy selection orders discovery").

A lazy max-heap of (−cash, arrival), the items beside it by arrival. An unread page's cash only grows (its parents are
visited, V is handed out, focus grants), so the frontier calls :meth:`rekey` when a queued
page gains cash: a new entry with the higher key goes in and the old one stays behind, to
be dropped by the frontier's staleness check once the item left the queue. Entries beyond
twice the live ones are compacted away. The interface is the slice of ``collections.deque``
the frontier uses: ``append``, ``[0]``, ``popleft``, iteration, ``len``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any

CashOf = Callable[[str], float]


class CashQueue:
    """Items (with a ``url``) by decreasing cash, ties in arrival order.

    The heap holds (−cash, arrival) pairs and the items sit in a dict by arrival number:
    pairs of numbers leave the garbage collector's tracking, so a frontier of many queued
    pages does not make every full collection walk one more tuple per page.
    """

    __slots__ = ("_cash", "_heap", "_items", "_seq", "_compact_at")

    def __init__(self, cash: CashOf, items: Iterator[Any] | None = None) -> None:
        self._cash = cash
        self._heap: list[tuple[float, int]] = []
        self._items: dict[int, Any] = {}
        self._seq = itertools.count()
        self._compact_at = 64
        for item in items or ():
            self.append(item)

    def append(self, item: Any) -> None:
        seq = next(self._seq)
        self._items[seq] = item
        heapq.heappush(self._heap, (-self._cash(item.url), seq))

    def rekey(self, item: Any, live: Callable[[Any], bool]) -> None:
        """``item`` (queued here) gained cash: file it again under its current cash.
        ``live`` tells queued items from stale entries, for compaction."""
        self.append(item)
        if len(self._heap) > self._compact_at:
            self._compact(live)

    def top_cash(self) -> float:
        """The cash key of the head entry (0.0 when empty)."""
        return -self._heap[0][0] if self._heap else 0.0

    def __getitem__(self, index: int) -> Any:
        if index != 0:
            raise IndexError("a CashQueue only shows its head ([0])")
        return self._items[self._heap[0][1]]

    def popleft(self) -> Any:
        return self._items.pop(heapq.heappop(self._heap)[1])

    def __iter__(self) -> Iterator[Any]:
        """Entries in no particular order (stale and repeated ones included)."""
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._heap)

    def _compact(self, live: Callable[[Any], bool]) -> None:
        best: dict[int, tuple[float, int]] = {}
        items = self._items
        for entry in self._heap:
            item = items[entry[1]]
            if live(item):
                kept = best.get(id(item))
                if kept is None or entry < kept:
                    best[id(item)] = entry
        self._heap = list(best.values())
        heapq.heapify(self._heap)
        self._items = {entry[1]: items[entry[1]] for entry in self._heap}
        self._compact_at = max(64, 2 * len(self._heap))
