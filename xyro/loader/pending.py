"""Status data in memory: documents waiting for their DTDs/entities (paper 003 §4).

Only the crawl dispatcher thread touches it. Bodies are held in memory, at most
``max_bytes`` in total; the database's ``pending`` table (SetPending/ClearPending) shows them
while the crawl runs, and the document's own frontier row (no FetchRecord is written while
it waits) is what survives a restart: a restarted crawler empties ``pending`` and fetches
the document again, and its DTDs, at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Held:
    """One waiting document: the frontier item and fetch it came from, and what it needs."""

    item: Any              # xyro.crawl.frontier_queues.FrontierItem
    result: Any            # xyro.records.FetchResult (the body is held here)
    since: float
    needs: set[str] = field(default_factory=set)
    rounds: int = 0        # loads so far (a DTD may reveal more entities each round)
    asked: set[str] = field(default_factory=set)  # every need of every round


class PendingDocuments:
    """url → :class:`Held`, and need → waiting urls."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._docs: dict[str, Held] = {}
        self._waiting: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, url: object) -> bool:
        return url in self._docs

    def fits(self, held: Held) -> bool:
        old = self._docs.get(held.item.url)
        extra = len(held.result.body) - (len(old.result.body) if old else 0)
        return self.bytes + extra <= self.max_bytes

    def wait(self, held: Held, needs: tuple[str, ...]) -> None:
        """(Re)register ``held`` as waiting for ``needs`` (replacing what it waited for)."""
        self.release(held.item.url)
        held.needs = set(needs)
        self._docs[held.item.url] = held
        self.bytes += len(held.result.body)
        for need in needs:
            self._waiting.setdefault(need, set()).add(held.item.url)

    def release(self, url: str) -> Held | None:
        held = self._docs.pop(url, None)
        if held is None:
            return None
        self.bytes -= len(held.result.body)
        for need in held.needs:
            waiters = self._waiting.get(need)
            if waiters is not None:
                waiters.discard(url)
                if not waiters:
                    del self._waiting[need]
        return held

    def wanted(self, url: str) -> bool:
        return url in self._waiting

    def satisfied(self, need: str) -> list[Held]:
        """``need`` arrived: the documents that now wait for nothing (released)."""
        ready = []
        for url in sorted(self._waiting.pop(need, ())):
            held = self._docs[url]
            held.needs.discard(need)
            if not held.needs:
                ready.append(self.release(url))
        return [h for h in ready if h is not None]

    def failed(self, need: str) -> list[Held]:
        """``need`` cannot be had: every document waiting for it (released)."""
        out = [self.release(url) for url in sorted(self._waiting.get(need, ()))]
        return [h for h in out if h is not None]

    def expired(self, deadline_before: float) -> list[Held]:
        """Documents waiting since before ``deadline_before`` (released)."""
        old = [url for url, h in self._docs.items() if h.since < deadline_before]
        out = [self.release(url) for url in old]
        return [h for h in out if h is not None]

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._docs.values()))
