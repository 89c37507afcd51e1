"""A host's queue of unread URLs in Greedy order: highest OPIC cash first (000 §2 "Greedy").

The frontier keeps one FIFO per host and level; for the levels of unread pages (discovery,
background) it uses this queue instead when OPIC runs in the crawl, so that within
politeness the crawler fetches the unread page holding the most cash, as the papers' Greedy
policy does (DESIGN.md §5: "Greedy selection orders discovery").

A lazy max-heap of (−key, arrival), the items beside it by arrival. The key is the cash
function's ``key`` when it has one (:class:`GreedyCash`; the crawl's
:attr:`~xyro.crawl.opic_online.OnlineOpic.cash`), else the cash itself. OPIC's cash is not a
key that stays put: each time the virtual page V hands out its cash, every page's cash rises
by the same share (DESIGN.md §5, "one running offset"), so an entry filed under its cash
long ago would look poorer than one filed now with less. The crawl's key is the cash less
the running total of those shares (never reset): it differs from the cash by an amount
common to all pages, so it orders them exactly as their current cash does, and V's handouts
leave it unchanged. What still changes a queued page's key is its own gains (its parents are
visited, focus grants), and then the frontier calls :meth:`rekey`: a new entry with the
higher key goes in and the old one stays behind, to be dropped by the frontier's staleness
check once the item left the queue. Entries beyond twice the live ones are compacted away.
The interface is the slice of ``collections.deque`` the frontier uses: ``append``, ``[0]``,
``popleft``, iteration, ``len``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any, Protocol

CashOf = Callable[[str], float]


class GreedyCash(Protocol):
    """A cash function with an ordering key that V's handouts leave unchanged."""

    def __call__(self, url: str) -> float:
        """The cash of ``url`` now."""

    def key(self, url: str) -> float:
        """The cash of ``url`` less an amount common to all URLs at any moment (module doc)."""


def greedy_key(cash: CashOf) -> CashOf:
    """What Greedy order files a URL under: ``cash.key`` if ``cash`` has one, else ``cash``."""
    key = getattr(cash, "key", None)
    return key if callable(key) else cash


class CashQueue:
    """Items (with a ``url``) by decreasing cash, ties in arrival order.

    ``cash``: the cash of a URL, or a :class:`GreedyCash` (filed under its ``key``). The
    heap holds (−key, arrival) pairs and the items sit in a dict by arrival number:
    pairs of numbers leave the garbage collector's tracking, so a frontier of many queued
    pages does not make every full collection walk one more tuple per page.
    """

    __slots__ = ("_key", "_heap", "_items", "_seq", "_compact_at")

    def __init__(self, cash: CashOf, items: Iterator[Any] | None = None) -> None:
        self._key = greedy_key(cash)
        self._heap: list[tuple[float, int]] = []
        self._items: dict[int, Any] = {}
        self._seq = itertools.count()
        self._compact_at = 64
        for item in items or ():
            self.append(item)

    def append(self, item: Any) -> None:
        seq = next(self._seq)
        self._items[seq] = item
        heapq.heappush(self._heap, (-self._key(item.url), seq))

    def rekey(self, item: Any, live: Callable[[Any], bool]) -> None:
        """``item`` (queued here) gained cash: file it again under its current key.
        ``live`` tells queued items from stale entries, for compaction."""
        self.append(item)
        if len(self._heap) > self._compact_at:
            self._compact(live)

    def top_cash(self) -> float:
        """The key of the head entry (0.0 when empty): comparable with the keys
        :func:`greedy_key` gives now, not with the cash."""
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
