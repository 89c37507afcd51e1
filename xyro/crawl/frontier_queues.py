"""The frontier's queues (DESIGN.md §2): priority levels × per-host FIFOs under the
politeness scheduler and robots.txt, in memory. :class:`~xyro.crawl.frontier.Frontier`
extends them with the one admission, the seen-set and the writer's records; producers and
the engine only ever hold a Frontier.

Levels run from 0 (best) to ``LEVELS - 1`` (their names: :mod:`xyro.crawl.frontier`).
Each host keeps one FIFO per level; with OPIC in the crawl (a ``cash`` function), the levels
of unread pages (:data:`CASH_LEVELS`: discovery, background) are instead kept in Greedy
order, highest cash first (:class:`~xyro.crawl.cash_queue.CashQueue`), and among hosts ready
at such a level the one whose head holds the most cash goes first: within politeness, the
crawler takes the unread page with the most cash, as OPIC's Greedy policy does (000 §2).
Queues and ready heap compare the cash function's ordering key
(:func:`~xyro.crawl.cash_queue.greedy_key`), which V's handouts leave unchanged, so an entry
filed long ago stays comparable with one filed now. A host is *ready* when the
:class:`HostScheduler` lets it
start; among ready hosts the one with the best (lowest) queued level goes first, ties in the
order they became ready; from that host the head of its best level is taken. So within
politeness, level 0 goes first globally, and a host full of level-4 links never delays
another host's level-0 DTD. Every operation is O(log H + log N): hosts move from the
scheduler's time heap into a ready heap keyed by (best level, arrival), with lazy
invalidation; items with ``not_before`` in the future wait in a time heap.

robots.txt first: when a host's next item belongs to an origin whose robots.txt is unknown,
:meth:`FrontierQueues.pop` returns a ``kind="robots"`` item for that origin (the host's
request slot is taken) and holds the host's other items of that origin until the engine has
called ``robots.store(origin, ...)`` and ``frontier.done(robots_item)``. Items the rules
forbid come out as ``kind="disallowed"`` without taking a request slot (the engine completes
them as ERROR robots records; ``done`` on them is a no-op). While an origin is in
disallow-all (robots.txt 5xx/unreachable) its host is deferred to the end of that period.

Lifecycle for the engine: ``item = pop(now)`` → fetch → ``done(item, retry_after_s, error)``
(frees the host's slot) → ``complete(item, record, links)``; or ``requeue(item,
not_before)``. Dedupe: a URL queued or in progress is not queued twice; queuing it at a better
level moves it up. A popped URL stays *open* until its fetch is completed or given back.

:meth:`FrontierQueues.push` is the bare in-memory queueing (no admission, no record), for
tests and benchmarks; the engine's code never calls it (tests/test_layout.py).

Thread model: all state is under one lock; the HostScheduler and RobotsCache locks come after
it (they never call back).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from xyro.clock import Clock
from xyro.crawl.cash_queue import CashOf, CashQueue, greedy_key
from xyro.crawl.hosts import LEVELS, HostScheduler, HostSlot
from xyro.net.robots import RobotsCache
from xyro.net.urls import robots_url, url_keys

#: ``links``: an out-of-scope page fetched for its links alone (the global PageRank
#: estimate, DESIGN.md §5); its fetch is a page fetch like ``fetch``.
ItemKind = Literal["fetch", "links", "robots", "disallowed"]

#: Kinds of items that fetch a page (the others are robots.txt, or no request at all).
PAGE_KINDS = frozenset({"fetch", "links"})

#: Levels of unread pages (discovery 3, background 4), ordered by OPIC cash when it runs.
CASH_LEVELS = frozenset({3, 4})


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


class FrontierQueues:
    """Priority levels × per-host queues under the politeness scheduler and robots.txt."""

    def __init__(self, hosts: HostScheduler, robots: RobotsCache, clock: Clock,
                 cash: CashOf | None = None) -> None:
        self.hosts = hosts
        # Greedy key of a URL's OPIC cash (order of CASH_LEVELS; cash_queue.py), or None: FIFO
        self._cash = None if cash is None else greedy_key(cash)
        self.robots = robots
        self._clock = clock
        self._open: dict[str, int] = {}  # url → fetches popped and not completed/given back
        # Per host: its HostSlot (queues, ready level, robots.txt state; hosts.py).
        self._slot = hosts.slot
        self._with_queues = 0  # hosts whose slot holds queues
        self._n_ready = 0  # hosts with a valid ready-heap entry
        self._queued: dict[str, FrontierItem] = {}  # url → its live item (queued or delayed)
        self._in_progress: dict[str, FrontierItem] = {}
        self._delayed: list[tuple[float, int, FrontierItem]] = []
        # (level, −key of its head at a cash level else 0, arrival, host)
        self._ready_heap: list[tuple[int, float, int, str]] = []
        self._level_counts = [0] * LEVELS
        # Per level, the hosts that had queued items there: pruned lazily by servable(), and
        # never more than the hosts the scheduler keeps a slot for anyway.
        self._hosts_at: list[set[str]] = [set() for _ in range(LEVELS)]
        self._seq = itertools.count()
        self._lock = threading.Lock()

    # -- queueing ---------------------------------------------------------------------------

    def push(self, url: str, priority: int, depth: int = 0, not_before: float = 0.0) -> bool:
        """Queue canonical ``url`` in memory only (no admission, no record; producers use
        Frontier.submit); False if already queued at this level or better, or in progress.

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
                self._rekey(old)
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
        live = self._slot(old.host).live
        if live is not None and not self._is_delayed(old):
            live[old.priority] -= 1

    def _is_delayed(self, item: FrontierItem) -> bool:
        # Delayed items are not in a host queue yet; they carry a future not_before and
        # are released (re-created with not_before=0) when due.
        return item.not_before > 0.0

    def _rekey(self, item: FrontierItem) -> None:
        """A queued unread page was offered again: it may hold more cash now (OPIC)."""
        if self._cash is None or item.priority not in CASH_LEVELS or self._is_delayed(item):
            return
        slot = self._slot(item.host)
        queue = slot.levels[item.priority] if slot.levels is not None else None
        if not isinstance(queue, CashQueue):
            return
        queue.rekey(item, self._is_queued)
        self._refile_host(slot, item)

    def _refile_host(self, slot: HostSlot, item: FrontierItem) -> None:
        """``item``, queued at a cash level, may now head its host's queue with a higher key
        than the one the host waits under in the ready heap: file the host again."""
        queue = slot.levels[item.priority] if slot.levels is not None else None
        if slot.ready_level == item.priority and isinstance(queue, CashQueue) \
                and queue[0] is item:
            heapq.heappush(self._ready_heap, (item.priority, -queue.top_cash(),
                                              next(self._seq), item.host))

    def _is_queued(self, item: FrontierItem) -> bool:
        """``item`` is the live entry of its URL (not a stale one left by a move or a take)."""
        return self._queued.get(item.url) is item

    def _new_queue(self, level: int) -> deque[FrontierItem] | CashQueue:
        if self._cash is not None and level in CASH_LEVELS:
            return CashQueue(self._cash)
        return deque()

    def _release(self, item: FrontierItem) -> None:
        """Put a due item into its host's queue and let the host compete."""
        if item.not_before:
            item = replace(item, not_before=0.0)
            self._queued[item.url] = item
        slot = self._slot(item.host)
        if slot.levels is None:
            self._with_queues += 1
        slot.append(item, self._new_queue)
        self._hosts_at[item.priority].add(item.host)
        level = slot.ready_level
        if level is not None and item.priority < level:
            self._mark_ready(item.host, slot, item.priority)
        elif level == item.priority:
            self._refile_host(slot, item)  # a ready host may have a richer head now
        elif level is None and not slot.held:
            self.hosts.want(item.host)


    # -- taking -----------------------------------------------------------------------------

    def pop(self, now: float | None = None, max_level: int = LEVELS) -> FrontierItem | None:
        """The best item of a host that may start now, or None (see :meth:`next_ready_time`);
        with ``max_level``, only a host whose best ready level is at most that one."""
        now = self._clock.now() if now is None else now
        with self._lock:
            self._release_due(now)
            while (host := self.hosts.ready_host(now)) is not None:
                slot = self._slot(host)
                best = slot.best()
                if best is None:
                    self.hosts.idle(host)
                else:
                    self._mark_ready(host, slot, best)
            while self._ready_heap:
                if self._ready_heap[0][0] > max_level:
                    return None
                level, key, _, host = heapq.heappop(self._ready_heap)
                slot = self._slot(host)
                if slot.ready_level != level:
                    continue  # stale: the host moved up a level or left
                if self._outbid(host, slot, level, key):
                    continue
                slot.ready_level = None
                self._n_ready -= 1
                item = self._take(host, slot, now)
                if item is not None:
                    return item
            return None

    def _outbid(self, host: str, slot: HostSlot, level: int, key: float) -> bool:
        """Ready ``host`` came out of the ready heap under ``key`` (−key of its head when
        filed), but its head now holds less (that head was drained or moved up a level):
        file it again under its head's key, and True (lock held)."""
        if slot.live is None or not slot.live[level]:
            return False  # nothing live left at this level: _take sees to it
        head = self._head_key(slot, level)
        if key >= head:
            return False
        heapq.heappush(self._ready_heap, (level, head, next(self._seq), host))
        return True

    def _head_key(self, slot: HostSlot, level: int) -> float:
        """The ready heap's key for ``slot`` at ``level``: −(the key its head was filed
        under) at a Greedy level, else 0.0 (lock held)."""
        queue = slot.levels[level]  # type: ignore[index]
        if not isinstance(queue, CashQueue):
            return 0.0
        self._head(slot, level)  # drops stale entries at the head
        return -queue.top_cash()

    def _release_due(self, now: float) -> None:
        while self._delayed and self._delayed[0][0] <= now:
            _, _, item = heapq.heappop(self._delayed)
            if self._queued.get(item.url) is item:
                self._release(item)

    def _mark_ready(self, host: str, slot: HostSlot, level: int) -> None:
        if slot.ready_level is None:
            self._n_ready += 1
        slot.ready_level = level
        heapq.heappush(self._ready_heap, (level, self._head_key(slot, level), next(self._seq),
                                          host))

    def _head(self, slot: HostSlot, level: int) -> FrontierItem:
        dq = slot.levels[level]  # type: ignore[index]
        assert dq is not None
        while self._queued.get(dq[0].url) is not dq[0]:
            dq.popleft()  # stale entry of an item moved up a level
        return dq[0]

    def _take(self, host: str, slot: HostSlot, now: float) -> FrontierItem | None:
        """Serve ``host`` (ready, off both heaps): robots item, disallowed item, or fetch item."""
        level = slot.best()
        if level is None:
            self.hosts.idle(host)
            return None
        item = self._head(slot, level)
        state = self.robots.state(item.origin, now)
        if state.kind == "needs_fetch":
            if slot.robots_inflight and item.origin in slot.robots_inflight:
                # Only reachable with enforce=False: the host is started again before its
                # robots.txt came back. Park it until done(robots item).
                slot.held = (slot.held or set()) | {item.origin}
                self.hosts.idle(host)
                return None
            robots_item = FrontierItem(robots_url(item.origin), level, 0, host, item.origin,
                                       kind="robots")
            slot.robots_inflight = {**(slot.robots_inflight or {}), item.origin: robots_item}
            self.hosts.start(host, now)
            return robots_item
        if state.kind == "disallow_all":
            self.hosts.defer(host, state.until)
            return None
        allowed = self.robots.allowed(item.url, now, origin=item.origin)
        if allowed:
            # One host (host:port) may serve two origins (http and https) with different
            # Crawl-delays: this item's may put the host's next start later than the one
            # that made it ready. Then it waits, still queued (unless the rules are off,
            # as the tests that prove their checks would catch a violation switch them).
            ready_at = self.hosts.set_crawl_delay(host, self.robots.crawl_delay(item.origin))
            if ready_at > now and self.hosts.enforce:
                self.hosts.defer(host, ready_at)
                return None
        self._dequeue(slot, item)
        self._open[item.url] = self._open.get(item.url, 0) + 1
        if not allowed:
            self._after_take(host, slot, ready=True)
            return replace(item, kind="disallowed")
        self.hosts.start(host, now)
        self._in_progress[item.url] = item
        self._after_take(host, slot, ready=False)
        return item

    def _dequeue(self, slot: HostSlot, item: FrontierItem) -> None:
        dq = slot.levels[item.priority]  # type: ignore[index]
        assert dq is not None and dq[0] is item
        dq.popleft()
        slot.live[item.priority] -= 1  # type: ignore[index]
        self._level_counts[item.priority] -= 1
        del self._queued[item.url]

    def _after_take(self, host: str, slot: HostSlot, ready: bool) -> None:
        best = slot.best()
        if best is None:
            self._drop_queues(slot)
            self.hosts.idle(host)
        elif ready:
            self._mark_ready(host, slot, best)  # no request was made: the host is still ready

    def _drop_queues(self, slot: HostSlot) -> None:
        slot.clear_queues()
        self._with_queues -= 1

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
                slot = self._slot(item.host)
                inflight = slot.robots_inflight or {}
                if inflight.get(item.origin) is not item:
                    raise ValueError(f"robots item for {item.origin} is not in progress")
                slot.robots_inflight = {o: i for o, i in inflight.items() if o != item.origin} or None
                self.hosts.set_crawl_delay(item.host, self.robots.crawl_delay(item.origin))
                self.hosts.finish(item.host, now, retry_after_s, error, started_at)
                if slot.held and item.origin in slot.held:
                    slot.held = (slot.held - {item.origin}) or None
                    if slot.levels is not None:
                        self.hosts.want(item.host)
                return
            if self._in_progress.get(item.url) is not item:
                raise ValueError(f"frontier item {item.url} is not in progress (done twice?)")
            del self._in_progress[item.url]
            self.hosts.finish(item.host, now, retry_after_s, error, started_at)

    def drain_origin(self, origin: str, host: str, limit: int | None = None
                     ) -> list[FrontierItem]:
        """Remove and return up to ``limit`` (None: all) items of ``origin`` queued on
        ``host`` (delayed ones stay); fewer than ``limit`` means none is left.

        For an origin whose robots.txt could not be reached time after time (timeout,
        refused, DNS; :class:`~xyro.crawl.retry_policy.PrerequisiteRetries`): the engine
        fails these URLs with that reason, as Heritrix fails URIs whose prerequisite failed,
        in batches so that a stop is seen between two. Items are taken from the heads of the
        host's queues, each scanned at most once around per call: a FIFO's items of other
        origins met on the way go to its back (their cyclic order kept, so a whole drain
        costs O(items of the host)); a Greedy queue files them again under their cash.
        """
        limit = limit if limit is not None else len(self._queued) + 1
        with self._lock:
            slot = self._slot(host)
            if slot.levels is None or slot.live is None:
                return []
            out: list[FrontierItem] = []
            for level, q in enumerate(slot.levels):
                if q and len(out) < limit:
                    self._drain_level(slot, level, q, origin, limit - len(out), out)
            if slot.best() is None:
                self._drop_queues(slot)
            return out

    def _drain_level(self, slot: HostSlot, level: int, q: deque[FrontierItem] | CashQueue,
                     origin: str, limit: int, out: list[FrontierItem]) -> None:
        """Move up to ``limit`` live items of ``origin`` from the head of ``q`` (``slot``'s
        queue at ``level``) to ``out`` (lock held)."""
        others: list[FrontierItem] = []
        seen: set[int] = set()  # a CashQueue may hold an item more than once
        taken = 0
        for _ in range(len(q)):
            if taken >= limit:
                break
            item = q.popleft()
            if self._queued.get(item.url) is not item or id(item) in seen:
                continue  # stale entry of an item moved up a level (or a repeat)
            seen.add(id(item))
            if item.origin != origin:
                others.append(item)
                continue
            out.append(item)
            taken += 1
            self._open[item.url] = self._open.get(item.url, 0) + 1
            del self._queued[item.url]
            slot.live[level] -= 1  # type: ignore[index]
            self._level_counts[level] -= 1
        # Put back after the loop: a CashQueue would hand a re-filed item out again.
        for item in others:
            q.append(item)

    def _close(self, url: str) -> None:
        """One open fetch of ``url`` ended: completed or given back (lock held)."""
        n = self._open.get(url, 0)
        if n > 1:
            self._open[url] = n - 1
        elif n:
            del self._open[url]

    # -- inspection -------------------------------------------------------------------------

    def next_ready_time(self) -> float | None:
        """Earliest time a pop may return something: now-ish if a host is ready, else the
        scheduler's or the delayed items' next time; None if nothing is queued."""
        with self._lock:
            times = []
            if self._n_ready:
                times.append(float("-inf"))
            t = self.hosts.next_ready_time()
            if t is not None:
                times.append(t)
            while self._delayed and self._queued.get(self._delayed[0][2].url) is not self._delayed[0][2]:
                heapq.heappop(self._delayed)
            if self._delayed:
                times.append(self._delayed[0][0])
            return min(times) if times else None

    def servable(self, level: int, until: float, cap: int, now: float | None = None) -> int:
        """How many of the items queued at ``level`` their hosts' politeness lets start
        before ``until`` (:meth:`HostScheduler.starts_before`), counted up to ``cap``.

        Items still waiting for their ``not_before`` are not counted. The unit budget asks
        this at the end of a unit, so that unread pages take only the fetches the due pages
        queued then cannot use (:mod:`xyro.crawl.unit_budget`). O(hosts with items at
        ``level``), stopping at ``cap``.
        """
        now = self._clock.now() if now is None else now
        with self._lock:
            self._release_due(now)
            hosts = self._hosts_at[level]
            total = 0
            for host in list(hosts):
                live = self._slot(host).live
                if live is None or not live[level]:
                    hosts.discard(host)
                    continue
                total += self.hosts.starts_before(host, now, until, live[level])
                if total >= cap:
                    return cap
            return total

    def queued(self, level: int) -> int:
        """Queued URLs (delayed ones included) at ``level``."""
        return self._level_counts[level]  # one int read: no lock needed under the GIL

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
            return self._with_queues

    def __contains__(self, url: object) -> bool:
        with self._lock:
            return url in self._queued or url in self._in_progress

    @property
    def open_fetches(self) -> int:
        """Items popped and not yet completed or given back (held documents included)."""
        with self._lock:
            return sum(self._open.values())

    def rows(self) -> Iterator[tuple[str, int, int, float]]:
        """Snapshot of queued URLs: (url, priority, depth, not_before) rows, as load takes."""
        with self._lock:
            items = list(self._queued.values())
        return iter([(i.url, i.priority, i.depth, i.not_before) for i in items])
