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

The queues themselves (a FIFO per host and level under the politeness scheduler, robots.txt
first, the engine's ``pop``/``done``/``requeue`` lifecycle) are
:class:`~xyro.crawl.frontier_queues.FrontierQueues`, which :class:`Frontier` extends. The
seen-set is the frontier's: discovered links and seeds already seen are skipped, the other
producers add to it without being skipped.

:meth:`push` and :meth:`load` are the bare in-memory operations (no admission, no record),
for tests and benchmarks; the engine's code never calls them (tests/test_layout.py).

Thread model: the dispatcher thread calls ``pop``/``done``/``complete``; the planner and
reload jobs call ``submit``. All state is under one lock; operations that record take a
second one first, held until their ops are handed to the writer, so the writer applies them
in the order memory changed. Lock order: journal → Frontier → HostScheduler / RobotsCache
(they never call back).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

from metadata.records import Enqueue, FetchRecord, HostDelay, HostPause, Op, Refuse
from xyro.clock import Clock
from xyro.crawl.admission import RULES, Admission, Refusal, Source
from xyro.crawl.cash_queue import CashOf
from xyro.crawl.frontier_queues import PAGE_KINDS, FrontierItem, FrontierQueues
from xyro.crawl.hosts import LEVELS, HostScheduler
from xyro.crawl.robots_hops import RobotsHops
from xyro.crawl.seenset import SeenSet
from xyro.net.robots import RobotsCache
from xyro.net.urls import url_keys

LOADER, URGENT, REFRESH, DISCOVERY, BACKGROUND = range(LEVELS)
#: Clock seconds between a request's dispatch and its start at most (a worker takes it at
#: once): the start recorded at dispatch errs late, so a restart never waits too little.
DISPATCH_MARGIN_S = 1.0

#: What a producer offers: a canonical URL (at the call's depth), or a (url, depth) pair.
Item = Union[str, tuple[str, int], tuple[str, int, float]]

#: Rows restored between two looks at a stop request (a start can restore millions).
RESTORE_CHECK = 10_000

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
    """``items`` as offers at ``priority``: bare URLs (at ``depth``, ``not_before``), (url,
    depth) pairs, or (url, depth, not before) triples."""
    if not isinstance(priority, int) or not 0 <= priority < LEVELS:
        raise ValueError(f"frontier priority must be an int in 0..{LEVELS - 1}, got {priority!r}")
    for item in items:
        if isinstance(item, str):
            yield Offer(item, priority, depth, not_before)
        elif len(item) == 2:
            url, d = item
            yield Offer(url, priority, int(d), not_before)
        else:
            url, d, at = item  # type: ignore[misc]
            yield Offer(url, priority, int(d), float(at))


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


@dataclass(frozen=True, slots=True)
class Restored:
    """What :meth:`Frontier.restore` did: rows ``queued``, and rows ``held`` in the store's
    frontier because the admission refuses them now, by refusal kind."""

    queued: int
    held: dict[str, int]


class Frontier(FrontierQueues):
    """The queues (:class:`FrontierQueues`) behind one admission and the writer's records."""

    def __init__(self, hosts: HostScheduler, robots: RobotsCache, clock: Clock, *,
                 admission: Admission | None = None, record: Callable[[Op], Any] | None = None,
                 seen: SeenSet | None = None, cash: CashOf | None = None) -> None:
        """``record``: the metadata writer's ``submit`` (None: nothing is persisted, as in
        tests and benchmarks); ``admission`` None checks the scheme only; ``cash``: the
        OPIC cash of a URL, to take unread pages in Greedy order (None: first in, first out)."""
        super().__init__(hosts, robots, clock, cash)
        self.admission = admission or Admission.open()
        #: The robots.txt fetcher's gate for redirects to other hosts (robots_hops.py).
        self.robots_hops = RobotsHops(hosts, self.admission.scope, clock, self._lock)
        self.seen = seen if seen is not None else SeenSet(100_000)
        self._record = record
        self._journal = threading.Lock()  # orders recording operations (module docstring)

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

    def pop(self, now: float | None = None, max_level: int = LEVELS) -> FrontierItem | None:
        """:meth:`FrontierQueues.pop`; a request about to go records its host's start
        (``HostDelay.started_at``, :data:`DISPATCH_MARGIN_S` late): a process killed while
        it is in flight leaves no page record, and the restart would otherwise count the
        host's delay from the request before it."""
        item = super().pop(now, max_level)
        if item is not None and item.kind != "disallowed" and self._record is not None:
            at = (self._clock.now() if now is None else now) + DISPATCH_MARGIN_S
            with self._journal:
                self._write([HostDelay(item.host, self.hosts.slot(item.host).crawl_delay, at)])
        return item

    def done(self, item: FrontierItem, retry_after_s: float | None = None, error: bool = False,
             now: float | None = None, started_at: float | None = None) -> None:
        """:meth:`FrontierQueues.done`; a robots.txt read also records its host's Crawl-delay
        and its start (``HostDelay``): a restart spaces the host's first request by it. A host that asked
        for a pause (Retry-After) or is backed off after failures records it (``HostPause``):
        a restart keeps it."""
        super().done(item, retry_after_s, error, now, started_at)
        ops: list[Op] = []
        slot = self.hosts.slot(item.host)
        if item.kind == "robots":   # a request too: a restart waits the delay from it
            ops.append(HostDelay(item.host, slot.crawl_delay, started_at))
        if retry_after_s or error:
            ops.append(HostPause(item.host, slot.next_ok))
        if ops:
            with self._journal:
                self._write(ops)

    def complete(self, item: FrontierItem, record: FetchRecord,
                 links: Iterable[tuple[str, int]] = (),
                 source: Source = Source.DISCOVERY) -> Submitted:
        """The end of ``item``'s fetch: admit its ``links`` ((url, priority) at the item's
        depth + 1; a redirect's target at the item's depth) and hand the writer ONE record — the page, its links, the children
        queued, the children refused, and its own dequeue (kept queued if the URL was asked
        for again meanwhile). ``done(item)`` comes first for fetched items. A ``links``
        item admits no children (its links, in the record, are graph only) but its
        redirect's target (:meth:`_links_only_hop`)."""
        with self._journal:
            with self._lock:
                now = self._clock.now()
                self._close(item.url)
                # A redirect is no link: its target keeps the depth of the URL it replaces
                # (the hops are counted apart, against max_redirects).
                depth = item.depth if source is Source.REDIRECT else item.depth + 1
                if item.kind == "links":
                    links, source = self._links_only_hop(links, source, depth)
                sub = self._admit(source, (Offer(url, p, depth) for url, p in links), now)
                enqueue = [(o.url, o.priority) for o in sub.queued]
                again = self._again(item)
                if again is not None:
                    enqueue.append((item.url, again))
                refused = tuple((o.url, str(r)) for o, r in sub.refused if r.lasting)
            record = replace(record, enqueue=tuple(enqueue), refused=refused,
                             depth=item.depth)
            self._write((record,))
        return sub

    def _links_only_hop(self, links: Iterable[tuple[str, int]], source: Source, depth: int
                        ) -> tuple[Iterable[tuple[str, int]], Source]:
        """What a ``links`` item (an out-of-scope page of the global estimate) queues: its
        links are graph only, never queued; but a redirect's target is the page itself
        (an http:// link to a site now on https), so it is followed, as a ``links`` item
        again unless it lands inside the scope (lock held)."""
        if source is not Source.REDIRECT:
            return (), source
        links = list(links)
        for url, priority in links:
            verdict = _refusal(self.admission, Offer(url, priority, depth), source, count=False)
            if verdict is not None and verdict.kind == "scope":
                return links, Source.GLOBAL_ESTIMATE
        return links, source

    def give_back(self, item: FrontierItem, not_before: float = 0.0) -> bool:
        """``item``'s fetch is not recorded (a stop cut it short, the loader's memory is
        full): queue it again from ``not_before``. Its row never left the store. Call
        :meth:`done` first for an item still in progress."""
        with self._journal:
            with self._lock:
                self._close(item.url)
                kind = "links" if item.kind == "links" else "fetch"
                queued = self._push(replace(item, not_before=float(not_before), kind=kind),
                                    self._clock.now())
                again = self._queued.get(item.url)
                ops = records([Offer(item.url, again.priority, again.depth, again.not_before)]
                              if again is not None else [])
            # Merged into its row (min priority): a re-ask while open may have raised it.
            self._write(ops)
        return queued

    def restore(self, rows: Iterable[tuple[str, int, int, float]], known: Iterable[str],
                links_only: frozenset[str] = frozenset(),
                stop: threading.Event | None = None,
                progress: Callable[[str, int], None] | None = None) -> Restored:
        """Seen-set from every ``known`` URL, queue from persisted rows (url, priority,
        depth, not_before) through the admission (the configuration may have changed since
        they were queued). ``links_only``: URLs the global PageRank estimate queued
        (admitted as its ``links`` items again).

        A row the admission refuses now is held, not refused: it stays in the store's
        frontier, unqueued, and comes back at a start whose scope admits it again. A scope
        narrowed by mistake (a typo in ``scope.allowed_domains``, a deleted seed) must not
        turn the queue into ``refused`` rows for good.

        Both are read in chunks of :data:`RESTORE_CHECK`: ``stop`` set (a SIGTERM during a
        long start) ends the restore early (the rows not read stay in the store's frontier,
        for the next start), and ``progress("known" or "queued", count so far)`` follows
        each chunk."""
        read = 0
        for chunk in _chunks(known):
            if stop is not None and stop.is_set():
                return Restored(0, {})
            self.seen.add_many(chunk)
            read += len(chunk)
            if progress is not None:
                progress("known", read)
        held: dict[str, int] = {}
        n = read = 0
        for chunk in _chunks(rows):
            if stop is not None and stop.is_set():
                break
            offers = [_row_offer(read + i, row) for i, row in enumerate(chunk)]
            self.seen.add_many(offer.url for offer in offers)
            with self._lock:
                n += self._restore_offers(offers, links_only, held)
            read += len(chunk)
            if progress is not None:
                progress("queued", read)
        return Restored(n, held)

    def _restore_offers(self, offers: list[Offer], links_only: frozenset[str],
                        held: dict[str, int]) -> int:
        """Admission and queueing of restored rows (lock held); counts refusals in ``held``."""
        n = 0
        now = self._clock.now()
        for offer in offers:
            source = (Source.LOADER if offer.priority == LOADER else
                      Source.GLOBAL_ESTIMATE if offer.url in links_only else
                      Source.RESTORE)
            refusal = self.admission.check(offer.url, offer.depth, source)
            item = None if refusal is not None else self._item(offer, source)
            if item is None:
                kind = (refusal or _no_host(offer.url)).kind
                held[kind] = held.get(kind, 0) + 1
            else:
                n += self._push(item, now)
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
                    queued_item = self._queued.get(url)
                    if queued_item is not None:
                        self._rekey(queued_item)   # it may hold more cash now (OPIC)
                    continue
            else:
                seen.add(url)
            refusal = admission.check(url, offer.depth, source)
            item = None if refusal is not None else self._item(offer, source)
            if item is None:
                refused.append((offer, refusal or _no_host(url)))
            elif self._push(item, now):
                queued.append(offer)
            else:
                known += 1
        return Submitted(source, tuple(queued), tuple(refused), known)

    def _item(self, offer: Offer, source: Source) -> FrontierItem | None:
        """The queue entry of ``offer`` (a ``links`` item from the global PageRank
        estimate), or None for a URL without an http(s) host."""
        try:
            host, origin = url_keys(offer.url)
        except ValueError:
            return None
        return FrontierItem(offer.url, offer.priority, offer.depth, host, origin,
                            offer.not_before,
                            "links" if source is Source.GLOBAL_ESTIMATE else "fetch")

    def _holds(self, url: str) -> bool:
        return url in self._queued or url in self._in_progress or url in self._open

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

    # -- bare in-memory operations (tests, benchmarks; push is FrontierQueues') -------------

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

    # -- giving back (done is above) ----------------------------------------------------------

    def requeue(self, item: FrontierItem, not_before: float = 0.0, retry_after_s: float | None = None,
                error: bool = False, now: float | None = None,
                started_at: float | None = None) -> bool:
        """End ``item``'s request and queue its URL again (same level) from ``not_before``
        (a 429/503 to retry): :meth:`done` then :meth:`give_back`.

        For a robots item this is :meth:`done` (the robots item comes back by itself).
        """
        self.done(item, retry_after_s, error, now, started_at)
        if item.kind not in PAGE_KINDS:
            return False
        return self.give_back(item, not_before)


def _chunks(items: Iterable[Any]) -> Iterator[list[Any]]:
    """``items`` in lists of :data:`RESTORE_CHECK`."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, RESTORE_CHECK)):
        yield chunk


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
