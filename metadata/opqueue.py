"""The writer's bounded op queue: producers put one op at a time, the writer takes many.

``queue.Queue`` costs a lock round-trip and a condition notify per ``get``; the writer takes
tens of thousands of ops per batch, so here it takes all it wants in one round-trip. Marker
items (flush and stop requests) end a take, so the writer sees them exactly where they were
put and ops queued after a marker stay for the next batch.

Producers blocked on a full queue are woken when the writer chooses (:meth:`OpQueue.wake`),
not as soon as it takes a batch. Measured in the ingest benchmark: a producer woken at the
take runs Python while the writer runs Python and short SQLite calls; each call hands the
GIL to the producer, which keeps it for a whole switch interval (5 ms), so the writer's
first phase took 25 µs per page of wall time for 5 µs of work. The writer instead wakes
producers just before a long SQLite call (which releases the GIL throughout), so the two
threads overlap instead of taking turns. It also wakes them before it waits for a lock
(one of them may hold it), and after every batch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable


class OpQueue:
    """FIFO of at most ``maxsize`` items; :meth:`put` blocks while it is full."""

    def __init__(self, maxsize: int, is_marker: Callable[[object], bool]) -> None:
        if maxsize < 1:
            raise ValueError(f"queue maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._is_marker = is_marker
        self._items: deque[object] = deque()
        self._waiting = 0  # consumers waiting in take(): only then does put() notify
        lock = threading.Lock()
        self._not_full = threading.Condition(lock)
        self._not_empty = threading.Condition(lock)

    def put(self, item: object) -> None:
        with self._not_full:
            while len(self._items) >= self.maxsize:
                self._not_full.wait()
            self._items.append(item)
            if self._waiting:
                self._not_empty.notify()

    def take(self, limit: int, timeout: float | None) -> list[object]:
        """Up to ``limit`` items, oldest first, ending early after a marker.

        Waits for the first item up to ``timeout`` seconds (None: forever, 0: not at all);
        returns ``[]`` if none came. Producers blocked on a full queue are woken only when
        this has to wait, or by :meth:`wake`: the consumer chooses when they may run.
        """
        with self._not_empty:
            items = self._items
            if not items and timeout != 0:
                self._not_full.notify_all()
                deadline = None if timeout is None else time.monotonic() + timeout
                while not items:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._waiting += 1
                    try:
                        self._not_empty.wait(left)
                    finally:
                        self._waiting -= 1
            out: list[object] = []
            popleft, append, is_marker = items.popleft, out.append, self._is_marker
            while items and len(out) < limit:
                item = popleft()
                append(item)
                if is_marker(item):
                    break
            return out

    def wake(self) -> None:
        """Let producers blocked on a full queue fill the room taken since."""
        with self._not_full:
            self._not_full.notify_all()

    def qsize(self) -> int:
        return len(self._items)
