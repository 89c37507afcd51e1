"""The frontier: five priority levels, per-host FIFO queues, robots.txt first (issue 3, item 3).

Levels (003 §3: "five levels of priority ... loading subtasks must be given high priority"):

    0 LOADER     DTDs and external entities a loader is blocked on
    1 URGENT     explicit requests (seeds, operator, loader documents)
    2 REFRESH    pages due in the refresh planner's current folder
    3 DISCOVERY  new pages chosen by importance (OPIC cash)
    4 BACKGROUND background discovery

Each host keeps one FIFO per level. A host is *ready* when the :class:`HostScheduler` lets it
start; among ready hosts the one with the best (lowest) queued level goes first, ties in the
order they became ready; from that host the head of its best level is taken. So within
politeness, level 0 goes first globally, and a host full of level-4 links never delays
another host's level-0 DTD. Every operation is O(log H + log N): hosts move from the
scheduler's time heap into a ready heap keyed by (best level, arrival), with lazy
invalidation; items with ``not_before`` in the future wait in a time heap.

robots.txt first: when a host's next item belongs to an origin whose robots.txt is unknown,
:meth:`Frontier.pop` returns a ``kind="robots"`` item for that origin (the host's request
slot is taken) and holds the host's other items of that origin until the engine has called
``robots.store(origin, ...)`` and ``frontier.done(robots_item)``. Items the rules forbid come
out as ``kind="disallowed"`` without taking a request slot (the engine records them as
ERROR robots; ``done`` on them is a no-op). While an origin is in disallow-all (robots.txt
5xx/unreachable) its host is deferred to the end of that period.

Lifecycle for the engine: ``item = pop(now)`` → fetch → ``done(item, retry_after_s, error)``
or ``requeue(item, not_before)`` (both free the host's slot). Dedupe: a URL queued or in
progress is not queued twice; pushing it at a better level moves it up. The seen-set is the
engine's (check it before ``push`` for discovered links; refreshes bypass it).

Persistence is the engine's job (it logs push/pop through the metadata writer); the frontier
is rebuilt at restart with :meth:`Frontier.load` from rows (url, priority, depth,
not_before), and :meth:`Frontier.rows` lists what is queued.

Thread model: designed for one dispatcher thread calling ``push``/``pop``; all public
methods take one lock, so fetch workers may also call ``done``/``requeue``/``push``.
Lock order: Frontier → HostScheduler / RobotsCache (they never call back).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from xyro.clock import Clock
from xyro.hosts import HostScheduler
from xyro.robots import RobotsCache
from xyro.urls import robots_url, url_keys

LEVELS = 5
LOADER, URGENT, REFRESH, DISCOVERY, BACKGROUND = range(LEVELS)

ItemKind = Literal["fetch", "robots", "disallowed"]


@dataclass(frozen=True, slots=True)
class FrontierItem:
    """One URL to fetch; ``host`` is the politeness unit, ``origin`` the robots.txt authority."""

    url: str
    priority: int
    depth: int
    host: str
    origin: str
    not_before: float = 0.0
    kind: ItemKind = "fetch"


class _HostQueue:
    """One FIFO per level; stale entries (moved up a level) are skipped on pop."""

    __slots__ = ("levels", "live")

    def __init__(self) -> None:
        self.levels: list[deque[FrontierItem] | None] = [None] * LEVELS
        self.live = [0] * LEVELS

    def best(self) -> int | None:
        for level, n in enumerate(self.live):
            if n:
                return level
        return None

    def append(self, item: FrontierItem) -> None:
        q = self.levels[item.priority]
        if q is None:
            q = self.levels[item.priority] = deque()
        q.append(item)
        self.live[item.priority] += 1

    def __len__(self) -> int:
        return sum(self.live)


class Frontier:
    """Priority levels × per-host queues under the politeness scheduler and robots.txt."""

    def __init__(self, hosts: HostScheduler, robots: RobotsCache, clock: Clock) -> None:
        self.hosts = hosts
        self.robots = robots
        self._clock = clock
        self._queues: dict[str, _HostQueue] = {}
        self._queued: dict[str, FrontierItem] = {}  # url → its live item (queued or delayed)
        self._in_progress: dict[str, FrontierItem] = {}
        self._delayed: list[tuple[float, int, FrontierItem]] = []
        self._ready: dict[str, int] = {}  # host → level of its valid ready-heap entry
        self._ready_heap: list[tuple[int, int, str]] = []
        self._robots_inflight: dict[str, FrontierItem] = {}  # origin → robots item
        self._held: dict[str, set[str]] = {}  # origin → hosts waiting for its robots.txt
        self._level_counts = [0] * LEVELS
        self._seq = itertools.count()
        self._lock = threading.Lock()

    # -- adding ---------------------------------------------------------------------------

    def push(self, url: str, priority: int, depth: int = 0, not_before: float = 0.0) -> bool:
        """Queue canonical ``url``; False if already queued at this level or better, or in progress.

        Raises ValueError for a level outside 0..4 or a URL without http(s) host.
        """
        if not isinstance(priority, int) or not 0 <= priority < LEVELS:
            raise ValueError(f"frontier priority must be an int in 0..{LEVELS - 1}, got {priority!r}")
        host, origin = url_keys(url)
        item = FrontierItem(url, priority, int(depth), host, origin, float(not_before))
        with self._lock:
            return self._push(item, self._clock.now())

    def _push(self, item: FrontierItem, now: float) -> bool:
        if item.url in self._in_progress:
            return False
        old = self._queued.get(item.url)
        if old is not None:
            if item.priority >= old.priority:
                return False
            self._cancel(old)
        self._queued[item.url] = item
        self._level_counts[item.priority] += 1
        if item.not_before > now:
            heapq.heappush(self._delayed, (item.not_before, next(self._seq), item))
        else:
            self._release(item)
        return True

    def _cancel(self, old: FrontierItem) -> None:
        """Forget a queued item that is being replaced; its deque entry becomes stale."""
        self._level_counts[old.priority] -= 1
        q = self._queues.get(old.host)
        if q is not None and not self._is_delayed(old):
            q.live[old.priority] -= 1

    def _is_delayed(self, item: FrontierItem) -> bool:
        # Delayed items are not in a host queue yet; they carry a future not_before and
        # are released (re-created with not_before=0) when due.
        return item.not_before > 0.0

    def _release(self, item: FrontierItem) -> None:
        """Put a due item into its host's queue and let the host compete."""
        if item.not_before:
            item = replace(item, not_before=0.0)
            self._queued[item.url] = item
        q = self._queues.get(item.host)
        if q is None:
            q = self._queues[item.host] = _HostQueue()
        q.append(item)
        level = self._ready.get(item.host)
        if level is not None and item.priority < level:
            self._mark_ready(item.host, item.priority)
        elif level is None and not self._is_held(item.host):
            self.hosts.want(item.host)

    def _is_held(self, host: str) -> bool:
        return any(host in hs for hs in self._held.values()) if self._held else False

    def load(self, rows: Iterable[tuple[str, int, int, float]]) -> int:
        """Refill from persisted rows (url, priority, depth, not_before); returns how many queued."""
        n = 0
        for i, row in enumerate(rows):
            try:
                url, priority, depth, not_before = row
                n += self.push(str(url), int(priority), int(depth), float(not_before or 0.0))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"frontier row {i} {row!r} is not (url, priority, depth, "
                                 f"not_before): {exc}") from exc
        return n

    # -- taking -----------------------------------------------------------------------------

    def pop(self, now: float | None = None) -> FrontierItem | None:
        """The best item of a host that may start now, or None (see :meth:`next_ready_time`)."""
        now = self._clock.now() if now is None else now
        with self._lock:
            while self._delayed and self._delayed[0][0] <= now:
                _, _, item = heapq.heappop(self._delayed)
                if self._queued.get(item.url) is item:
                    self._release(item)
            while (host := self.hosts.ready_host(now)) is not None:
                q = self._queues.get(host)
                best = q.best() if q else None
                if best is None:
                    self.hosts.idle(host)
                else:
                    self._mark_ready(host, best)
            while self._ready_heap:
                level, _, host = heapq.heappop(self._ready_heap)
                if self._ready.get(host) != level:
                    continue  # stale: the host moved up a level or left
                del self._ready[host]
                item = self._take(host, now)
                if item is not None:
                    return item
            return None

    def _mark_ready(self, host: str, level: int) -> None:
        self._ready[host] = level
        heapq.heappush(self._ready_heap, (level, next(self._seq), host))

    def _head(self, q: _HostQueue, level: int) -> FrontierItem:
        dq = q.levels[level]
        assert dq is not None
        while self._queued.get(dq[0].url) is not dq[0]:
            dq.popleft()  # stale entry of an item moved up a level
        return dq[0]

    def _take(self, host: str, now: float) -> FrontierItem | None:
        """Serve ``host`` (ready, off both heaps): robots item, disallowed item, or fetch item."""
        q = self._queues[host]
        level = q.best()
        if level is None:
            self.hosts.idle(host)
            return None
        item = self._head(q, level)
        state = self.robots.state(item.origin, now)
        if state.kind == "needs_fetch":
            if item.origin in self._robots_inflight:
                # Only reachable with enforce=False: the host is started again before its
                # robots.txt came back. Park it until done(robots item).
                self._held.setdefault(item.origin, set()).add(host)
                self.hosts.idle(host)
                return None
            robots_item = FrontierItem(robots_url(item.origin), level, 0, host, item.origin,
                                       kind="robots")
            self._robots_inflight[item.origin] = robots_item
            self.hosts.start(host, now)
            return robots_item
        if state.kind == "disallow_all":
            self.hosts.defer(host, state.until)
            return None
        self._dequeue(q, item)
        if not self.robots.allowed(item.url, now, origin=item.origin):
            self._after_take(host, q, ready=True)
            return replace(item, kind="disallowed")
        self.hosts.set_crawl_delay(host, self.robots.crawl_delay(item.origin))
        self.hosts.start(host, now)
        self._in_progress[item.url] = item
        self._after_take(host, q, ready=False)
        return item

    def _dequeue(self, q: _HostQueue, item: FrontierItem) -> None:
        dq = q.levels[item.priority]
        assert dq is not None and dq[0] is item
        dq.popleft()
        q.live[item.priority] -= 1
        self._level_counts[item.priority] -= 1
        del self._queued[item.url]

    def _after_take(self, host: str, q: _HostQueue, ready: bool) -> None:
        best = q.best()
        if best is None:
            del self._queues[host]
            self.hosts.idle(host)
        elif ready:
            self._mark_ready(host, best)  # no request was made: the host is still ready

    # -- giving back ------------------------------------------------------------------------

    def done(self, item: FrontierItem, retry_after_s: float | None = None, error: bool = False,
             now: float | None = None, started_at: float | None = None) -> None:
        """The request of ``item`` ended; frees the host's slot (robots: after ``robots.store``).

        ``started_at``: when the request really started (see :meth:`HostScheduler.finish`).
        """
        now = self._clock.now() if now is None else now
        with self._lock:
            if item.kind == "disallowed":
                return
            if item.kind == "robots":
                if self._robots_inflight.get(item.origin) is not item:
                    raise ValueError(f"robots item for {item.origin} is not in progress")
                del self._robots_inflight[item.origin]
                self.hosts.set_crawl_delay(item.host, self.robots.crawl_delay(item.origin))
                self.hosts.finish(item.host, now, retry_after_s, error, started_at)
                for host in self._held.pop(item.origin, ()):
                    if host in self._queues:
                        self.hosts.want(host)
                return
            if self._in_progress.get(item.url) is not item:
                raise ValueError(f"frontier item {item.url} is not in progress (done twice?)")
            del self._in_progress[item.url]
            self.hosts.finish(item.host, now, retry_after_s, error, started_at)

    def drain_origin(self, origin: str, host: str) -> list[FrontierItem]:
        """Remove and return the items of ``origin`` queued on ``host`` (delayed ones stay).

        For a robots.txt that could not be fetched at all (timeout, refused, DNS): the engine
        fails these URLs with that reason, as Heritrix fails URIs whose prerequisite failed,
        instead of leaving them queued with no visible cause.
        """
        with self._lock:
            q = self._queues.get(host)
            if q is None:
                return []
            out: list[FrontierItem] = []
            for level, dq in enumerate(q.levels):
                if not dq:
                    continue
                keep: deque[FrontierItem] = deque()
                for item in dq:
                    if self._queued.get(item.url) is not item:
                        continue  # stale entry of an item moved up a level
                    if item.origin == origin:
                        out.append(item)
                        del self._queued[item.url]
                        q.live[level] -= 1
                        self._level_counts[level] -= 1
                    else:
                        keep.append(item)
                q.levels[level] = keep
            if q.best() is None:
                del self._queues[host]
            return out

    def requeue(self, item: FrontierItem, not_before: float = 0.0, retry_after_s: float | None = None,
                error: bool = False, now: float | None = None,
                started_at: float | None = None) -> bool:
        """End ``item``'s request and queue its URL again (same level) from ``not_before``.

        For a robots item this is :meth:`done` (the robots item comes back by itself).
        """
        self.done(item, retry_after_s, error, now, started_at)
        if item.kind != "fetch":
            return False
        return self.push(item.url, item.priority, item.depth, not_before)

    # -- inspection -------------------------------------------------------------------------

    def next_ready_time(self) -> float | None:
        """Earliest time a pop may return something: now-ish if a host is ready, else the
        scheduler's or the delayed items' next time; None if nothing is queued."""
        with self._lock:
            times = []
            if self._ready:
                times.append(float("-inf"))
            t = self.hosts.next_ready_time()
            if t is not None:
                times.append(t)
            while self._delayed and self._queued.get(self._delayed[0][2].url) is not self._delayed[0][2]:
                heapq.heappop(self._delayed)
            if self._delayed:
                times.append(self._delayed[0][0])
            return min(times) if times else None

    def sizes(self) -> dict[int, int]:
        """Queued URLs (delayed ones included) per level."""
        with self._lock:
            return dict(enumerate(self._level_counts))

    def __len__(self) -> int:
        with self._lock:
            return sum(self._level_counts)

    @property
    def in_progress(self) -> int:
        """Fetch items popped and not yet done."""
        with self._lock:
            return len(self._in_progress)

    @property
    def hosts_waiting(self) -> int:
        """Hosts with at least one URL due in their queues."""
        with self._lock:
            return len(self._queues)

    def __contains__(self, url: object) -> bool:
        with self._lock:
            return url in self._queued or url in self._in_progress

    def rows(self) -> Iterator[tuple[str, int, int, float]]:
        """Snapshot of queued URLs as (url, priority, depth, not_before) rows for :meth:`load`."""
        with self._lock:
            items = list(self._queued.values())
        return iter([(i.url, i.priority, i.depth, i.not_before) for i in items])
