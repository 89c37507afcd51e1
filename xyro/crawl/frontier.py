"""The frontier: the single owner of queued work (DESIGN.md §2).

Every producer — seeds, discovered links, redirect targets, the refresh planner, the loader's
DTD and entity requests, the rows a restart restores — enters through :meth:`Frontier.submit`
(a fetched page's links through :meth:`Frontier.complete`), passes the one
:class:`~xyro.crawl.admission.Admission` (scheme, depth, suffix, scope, traps; robots.txt below),
and only the frontier asks the metadata writer for enqueues and dequeues, so memory and
database cannot drift:

- ``submit`` queues in memory and hands the writer one ``Enqueue`` per queued URL, and a
  ``Refuse`` for each lasting refusal (the store marks it ``refused``: no path fetches it);
- ``complete`` is the end of a fetch: it admits the page's links and hands the writer the
  page's ONE :class:`~metadata.FetchRecord` carrying the admitted children (``enqueue``),
  the refused ones (``refused``) and, by its application, the page's own dequeue — the page,
  its links, its new children and its frontier move share one transaction (README
  "Crashes");
- a URL asked for again while its fetch is open (popped, not yet completed: a 304 the loader
  wants unconditionally, a document waiting for its DTD) stays in the store: its enqueue
  rides in that completion record instead of racing it;
- ``give_back``/``requeue`` (a stop, a 429/503, the loader's memory cap) put the URL back in
  memory; its row never left the store.

:func:`admit_offline` and :func:`records` are the same admission and the same record
building for commands that write the persisted frontier with no crawler running
(``xyro seed``, ``xyro plan --run``).

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
out as ``kind="disallowed"`` without taking a request slot (the engine completes them as
ERROR robots records; ``done`` on them is a no-op). While an origin is in disallow-all
(robots.txt 5xx/unreachable) its host is deferred to the end of that period.

Lifecycle for the engine: ``item = pop(now)`` → fetch → ``done(item, retry_after_s, error)``
(frees the host's slot) → ``complete(item, record, links)``; or ``requeue(item,
not_before)``. Dedupe: a URL queued or in progress is not queued twice; queuing it at a better
level moves it up. The seen-set is the frontier's: discovered links and seeds already seen
are skipped, the other producers add to it without being skipped.

:meth:`push` and :meth:`load` are the bare in-memory operations (no admission, no record),
for tests and benchmarks; the engine's code never calls them (tests/test_layout.py).

Thread model: the dispatcher thread calls ``pop``/``done``/``complete``; the planner and
reload jobs call ``submit``. All state is under one lock; operations that record take a
second one first, held until their ops are handed to the writer, so the writer applies them
in the order memory changed. Lock order: journal → Frontier → HostScheduler / RobotsCache
(they never call back).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Union

from metadata.records import Enqueue, FetchRecord, Op, Refuse
from xyro.clock import Clock
from xyro.crawl.admission import RULES, Admission, Refusal, Source
from xyro.crawl.hosts import LEVELS, HostScheduler, HostSlot
from xyro.crawl.seenset import SeenSet
from xyro.net.robots import RobotsCache
from xyro.net.urls import robots_url, url_keys

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


#: What a producer offers: a canonical URL (at the call's depth), or a (url, depth) pair.
Item = Union[str, tuple[str, int]]

#: Sources whose URLs already seen are skipped; the others only add to the seen-set.
_SKIP_SEEN = frozenset({Source.SEED, Source.DISCOVERY, Source.REDIRECT, Source.SITEMAP,
                        Source.PUBLICATION})


@dataclass(frozen=True, slots=True)
class Offer:
    """One URL a producer offers at a level, a link depth and an earliest start."""

    url: str
    priority: int
    depth: int
    not_before: float = 0.0


@dataclass(frozen=True, slots=True)
class Submitted:
    """What the frontier did with a producer's offers.

    ``known``: skipped, already seen (seeds, links) or queued at this level or better.
    """

    source: Source
    queued: tuple[Offer, ...] = ()
    refused: tuple[tuple[Offer, Refusal], ...] = ()
    known: int = 0

    @property
    def new(self) -> int:
        """Offers the frontier had not seen (queued or refused)."""
        return len(self.queued) + len(self.refused)


def offers(items: Iterable[Item], priority: int, depth: int = 0,
           not_before: float = 0.0) -> Iterator[Offer]:
    """``items`` as offers at ``priority`` (and ``depth`` for bare URLs)."""
    if not isinstance(priority, int) or not 0 <= priority < LEVELS:
        raise ValueError(f"frontier priority must be an int in 0..{LEVELS - 1}, got {priority!r}")
    for item in items:
        if isinstance(item, str):
            yield Offer(item, priority, depth, not_before)
        else:
            url, d = item
            yield Offer(url, priority, int(d), not_before)


def admit_offline(admission: Admission, source: Source, items: Iterable[Item], priority: int,
                  depth: int = 0) -> Submitted:
    """The frontier's admission alone, for commands that write the persisted frontier with
    no crawler running (``xyro seed``, ``xyro plan --run``); pair it with :func:`records`."""
    queued: list[Offer] = []
    refused: list[tuple[Offer, Refusal]] = []
    for offer in offers(items, priority, depth):
        refusal = _refusal(admission, offer, source)
        if refusal is None:
            queued.append(offer)
        else:
            refused.append((offer, refusal))
    return Submitted(source, tuple(queued), tuple(refused))


def records(queued: Iterable[Offer], refused: Iterable[tuple[Offer, Refusal]] = ()) -> list[Op]:
    """The writer ops of a submission: an ``Enqueue`` per queued offer and a ``Refuse`` per
    lasting refusal. The one place outside :mod:`metadata` that builds them."""
    ops: list[Op] = [Enqueue(o.url, o.priority, not_before=o.not_before, depth=o.depth)
                     for o in queued]
    ops += [Refuse(o.url, str(why), o.depth) for o, why in refused if why.lasting]
    return ops


def _refusal(admission: Admission, offer: Offer, source: Source,
             count: bool = True) -> Refusal | None:
    refusal = admission.check(offer.url, offer.depth, source, count)
    if refusal is None:
        try:
            url_keys(offer.url)
        except ValueError:
            return _no_host(offer.url)
    return refusal


def _no_host(url: str) -> Refusal:
    return Refusal("scheme", f"{url[:80]!r} is not an http(s) URL with a host")


class Frontier:
    """Priority levels × per-host queues under the politeness scheduler and robots.txt."""

    def __init__(self, hosts: HostScheduler, robots: RobotsCache, clock: Clock, *,
                 admission: Admission | None = None, record: Callable[[Op], Any] | None = None,
                 seen: SeenSet | None = None) -> None:
        """``record``: the metadata writer's ``submit`` (None: nothing is persisted, as in
        tests and benchmarks); ``admission`` None checks the scheme only."""
        self.hosts = hosts
        self.robots = robots
        self.admission = admission or Admission.open()
        self.seen = seen if seen is not None else SeenSet(100_000)
        self._record = record
        self._clock = clock
        self._open: dict[str, int] = {}  # url → fetches popped and not completed/given back
        self._journal = threading.Lock()  # orders recording operations (module docstring)
        # Per host: its HostSlot (queues, ready level, robots.txt state; hosts.py).
        self._slot = hosts.slot
        self._with_queues = 0  # hosts whose slot holds queues
        self._n_ready = 0  # hosts with a valid ready-heap entry
        self._queued: dict[str, FrontierItem] = {}  # url → its live item (queued or delayed)
        self._in_progress: dict[str, FrontierItem] = {}
        self._delayed: list[tuple[float, int, FrontierItem]] = []
        self._ready_heap: list[tuple[int, int, str]] = []  # (level, arrival, host)
        self._level_counts = [0] * LEVELS
        self._seq = itertools.count()
        self._lock = threading.Lock()

    # -- producers --------------------------------------------------------------------------

    def submit(self, source: Source, items: Iterable[Item], priority: int, *, depth: int = 0,
               not_before: float = 0.0) -> Submitted:
        """Offer ``items`` (URLs at ``depth``, or (url, depth) pairs) from ``source``.

        Admitted ones are queued at ``priority`` and recorded as ``Enqueue`` ops; lasting
        refusals are recorded as ``Refuse`` ops (module docstring). Raises ValueError for a
        level outside 0..4.
        """
        with self._journal:
            with self._lock:
                sub = self._admit(source, offers(items, priority, depth, not_before),
                                  self._clock.now())
                # Re-asked while its fetch is open: the completion record carries it.
                queued = [o for o in sub.queued if o.url not in self._open]
                # A refused URL still queued was admitted before (another path): keep it.
                refused = [(o, r) for o, r in sub.refused if not self._holds(o.url)]
            self._write(records(queued, refused))
        return sub

    def complete(self, item: FrontierItem, record: FetchRecord,
                 links: Iterable[tuple[str, int]] = (),
                 source: Source = Source.DISCOVERY) -> Submitted:
        """The end of ``item``'s fetch: admit its ``links`` ((url, priority) at the item's
        depth + 1) and hand the writer ONE record — the page, its links, the children
        queued, the children refused, and its own dequeue (kept queued if the URL was asked
        for again meanwhile). ``done(item)`` comes first for fetched items."""
        with self._journal:
            with self._lock:
                now = self._clock.now()
                self._close(item.url)
                depth = item.depth + 1
                sub = self._admit(source, (Offer(url, p, depth) for url, p in links), now)
                enqueue = [(o.url, o.priority) for o in sub.queued]
                again = self._again(item)
                if again is not None:
                    enqueue.append((item.url, again))
                refused = tuple((o.url, str(r)) for o, r in sub.refused if r.lasting)
            if enqueue or refused:
                record = replace(record, enqueue=tuple(enqueue), refused=refused)
            self._write((record,))
        return sub

    def give_back(self, item: FrontierItem, not_before: float = 0.0) -> bool:
        """``item``'s fetch is not recorded (a stop cut it short, the loader's memory is
        full): queue it again from ``not_before``. Its row never left the store. Call
        :meth:`done` first for an item still in progress."""
        with self._journal:
            with self._lock:
                self._close(item.url)
                queued = self._push(replace(item, not_before=float(not_before), kind="fetch"),
                                    self._clock.now())
                again = self._queued.get(item.url)
                ops = records([Offer(item.url, again.priority, again.depth, again.not_before)]
                              if again is not None else [])
            # Merged into its row (min priority): a re-ask while open may have raised it.
            self._write(ops)
        return queued

    def restore(self, rows: Iterable[tuple[str, int, int, float]], known: Iterable[str]) -> int:
        """Seen-set from every ``known`` URL, queue from persisted rows (url, priority,
        depth, not_before) through the admission (the configuration may have changed since
        they were queued); refused rows leave the store's frontier. Returns rows queued."""
        for url in known:
            self.seen.add(url)
        refused: list[tuple[Offer, Refusal]] = []
        n = 0
        with self._journal:
            with self._lock:
                now = self._clock.now()
                for i, row in enumerate(rows):
                    offer = _row_offer(i, row)
                    source = Source.LOADER if offer.priority == LOADER else Source.RESTORE
                    self.seen.add(offer.url)
                    refusal = self.admission.check(offer.url, offer.depth, source)
                    item = None if refusal is not None else self._item(offer)
                    if item is None:
                        refused.append((offer, refusal or _no_host(offer.url)))
                    else:
                        n += self._push(item, now)
            self._write(records((), refused))
        return n

    def refusal(self, source: Source, url: str, depth: int = 0) -> Refusal | None:
        """The admission's verdict on ``url`` alone: nothing is queued, seen or counted
        against a host budget (e.g. the loader checks a document's needs before holding it)."""
        with self._lock:
            return _refusal(self.admission, Offer(url, LOADER, depth), source, count=False)

    def _admit(self, source: Source, offered: Iterable[Offer], now: float) -> Submitted:
        """Seen-set, admission and queueing of ``offered`` (lock held)."""
        seen, admission = self.seen, self.admission
        skip_seen = source in _SKIP_SEEN
        max_depth = admission.max_depth if RULES[source].depth else None
        queued: list[Offer] = []
        refused: list[tuple[Offer, Refusal]] = []
        known = 0
        for offer in offered:
            url = offer.url
            if max_depth is not None and offer.depth > max_depth:
                # Not added to the seen-set: found again at a smaller depth, it is admitted.
                if skip_seen and url in seen:
                    known += 1
                else:
                    refusal = _refusal(admission, offer, source)
                    refused.append((offer, refusal or Refusal("depth", f"depth {offer.depth} "
                                                              f"exceeds {max_depth}")))
                continue
            if skip_seen:
                if not seen.add(url):
                    known += 1
                    continue
            else:
                seen.add(url)
            refusal = admission.check(url, offer.depth, source)
            item = None if refusal is not None else self._item(offer)
            if item is None:
                refused.append((offer, refusal or _no_host(url)))
            elif self._push(item, now):
                queued.append(offer)
            else:
                known += 1
        return Submitted(source, tuple(queued), tuple(refused), known)

    def _item(self, offer: Offer) -> FrontierItem | None:
        """The queue entry of ``offer``, or None for a URL without an http(s) host."""
        try:
            host, origin = url_keys(offer.url)
        except ValueError:
            return None
        return FrontierItem(offer.url, offer.priority, offer.depth, host, origin,
                            offer.not_before)

    def _holds(self, url: str) -> bool:
        return url in self._queued or url in self._in_progress or url in self._open

    def _close(self, url: str) -> None:
        n = self._open.get(url, 0)
        if n > 1:
            self._open[url] = n - 1
        elif n:
            del self._open[url]

    def _again(self, item: FrontierItem) -> int | None:
        """The level at which ``item``'s URL is still held after its completion (queued, in
        progress or open again), or None: its row must then stay in the store."""
        queued = self._queued.get(item.url)
        if queued is not None:
            return queued.priority
        running = self._in_progress.get(item.url)
        if running is not None and running is not item:
            return running.priority
        return item.priority if item.url in self._open else None

    def _write(self, ops: Sequence[Op]) -> None:
        """Hand ``ops`` to the writer (journal lock held, frontier lock not: the writer may
        block on back-pressure, and readers must not wait for it)."""
        if self._record is not None:
            for op in ops:
                self._record(op)

    # -- bare in-memory operations (tests, benchmarks) --------------------------------------

    def push(self, url: str, priority: int, depth: int = 0, not_before: float = 0.0) -> bool:
        """Queue canonical ``url`` in memory only (no admission, no record; producers use
        :meth:`submit`); False if already queued at this level or better, or in progress.

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
        live = self._slot(old.host).live
        if live is not None and not self._is_delayed(old):
            live[old.priority] -= 1

    def _is_delayed(self, item: FrontierItem) -> bool:
        # Delayed items are not in a host queue yet; they carry a future not_before and
        # are released (re-created with not_before=0) when due.
        return item.not_before > 0.0

    def _release(self, item: FrontierItem) -> None:
        """Put a due item into its host's queue and let the host compete."""
        if item.not_before:
            item = replace(item, not_before=0.0)
            self._queued[item.url] = item
        slot = self._slot(item.host)
        if slot.levels is None:
            self._with_queues += 1
        slot.append(item)
        level = slot.ready_level
        if level is not None and item.priority < level:
            self._mark_ready(item.host, slot, item.priority)
        elif level is None and not slot.held:
            self.hosts.want(item.host)

    def load(self, rows: Iterable[tuple[str, int, int, float]]) -> int:
        """Refill memory from rows (url, priority, depth, not_before), without admission or
        record (tests; the engine uses :meth:`restore`); returns how many queued."""
        n = 0
        for i, row in enumerate(rows):
            offer = _row_offer(i, row)
            try:
                n += self.push(offer.url, offer.priority, offer.depth, offer.not_before)
            except ValueError as exc:
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
                slot = self._slot(host)
                best = slot.best()
                if best is None:
                    self.hosts.idle(host)
                else:
                    self._mark_ready(host, slot, best)
            while self._ready_heap:
                level, _, host = heapq.heappop(self._ready_heap)
                slot = self._slot(host)
                if slot.ready_level != level:
                    continue  # stale: the host moved up a level or left
                slot.ready_level = None
                self._n_ready -= 1
                item = self._take(host, slot, now)
                if item is not None:
                    return item
            return None

    def _mark_ready(self, host: str, slot: HostSlot, level: int) -> None:
        if slot.ready_level is None:
            self._n_ready += 1
        slot.ready_level = level
        heapq.heappush(self._ready_heap, (level, next(self._seq), host))

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
        self._dequeue(slot, item)
        self._open[item.url] = self._open.get(item.url, 0) + 1
        if not self.robots.allowed(item.url, now, origin=item.origin):
            self._after_take(host, slot, ready=True)
            return replace(item, kind="disallowed")
        self.hosts.set_crawl_delay(host, self.robots.crawl_delay(item.origin))
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

    def drain_origin(self, origin: str, host: str) -> list[FrontierItem]:
        """Remove and return the items of ``origin`` queued on ``host`` (delayed ones stay).

        For a robots.txt that could not be fetched at all (timeout, refused, DNS): the engine
        fails these URLs with that reason, as Heritrix fails URIs whose prerequisite failed,
        instead of leaving them queued with no visible cause.
        """
        with self._lock:
            slot = self._slot(host)
            if slot.levels is None or slot.live is None:
                return []
            out: list[FrontierItem] = []
            for level, dq in enumerate(slot.levels):
                if not dq:
                    continue
                keep: deque[FrontierItem] = deque()
                for item in dq:
                    if self._queued.get(item.url) is not item:
                        continue  # stale entry of an item moved up a level
                    if item.origin == origin:
                        out.append(item)
                        self._open[item.url] = self._open.get(item.url, 0) + 1
                        del self._queued[item.url]
                        slot.live[level] -= 1
                        self._level_counts[level] -= 1
                    else:
                        keep.append(item)
                slot.levels[level] = keep
            if slot.best() is None:
                self._drop_queues(slot)
            return out

    def requeue(self, item: FrontierItem, not_before: float = 0.0, retry_after_s: float | None = None,
                error: bool = False, now: float | None = None,
                started_at: float | None = None) -> bool:
        """End ``item``'s request and queue its URL again (same level) from ``not_before``
        (a 429/503 to retry): :meth:`done` then :meth:`give_back`.

        For a robots item this is :meth:`done` (the robots item comes back by itself).
        """
        self.done(item, retry_after_s, error, now, started_at)
        if item.kind != "fetch":
            return False
        return self.give_back(item, not_before)

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
        """Snapshot of queued URLs as (url, priority, depth, not_before) rows for :meth:`load`."""
        with self._lock:
            items = list(self._queued.values())
        return iter([(i.url, i.priority, i.depth, i.not_before) for i in items])


def _row_offer(i: int, row: Any) -> Offer:
    try:
        url, priority, depth, not_before = row
        priority = int(priority)
        if not 0 <= priority < LEVELS:
            raise ValueError(f"frontier priority must be an int in 0..{LEVELS - 1}")
        return Offer(str(url), priority, int(depth), float(not_before or 0.0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"frontier row {i} {row!r} is not (url, priority, depth, "
                         f"not_before): {exc}") from exc
