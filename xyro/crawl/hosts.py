"""Per-host politeness scheduler (DESIGN.md §7).

Rules, for every host (the :func:`xyro.net.urls.host_key` unit):

- at most one request in flight;
- between two request starts at least max(``delay_s``, the host's Crawl-delay);
- after a response carrying Retry-After (429/503), no start before finish + Retry-After
  (capped at ``max_retry_after_s``);
- after ``e`` consecutive errors, no start before finish + min(``backoff_cap_s``,
  ``backoff_base_s``·2^(e−1)) (exponential back-off; one success resets it).

Hosts that have work wait in a binary heap keyed by the time they may next start, so
:meth:`HostScheduler.ready_host` costs O(log H) and never scans the hosts: with thousands
of hosts every worker finds a ready one while each host stays throttled. Heap entries are
invalidated lazily (a token per host), so changing a host's time is one push.

``enforce=False`` switches the rules off (a host is ready again the moment it starts, with
no delay): integration tests use it to show that the politeness checks can fail.

Thread-safe: every public method takes one lock (cheap next to an HTTP request), so fetch
workers may call :meth:`finish` while the dispatcher calls :meth:`ready_host`.

Each host has ONE record, :class:`HostSlot` (as Scrapy's downloader keeps one ``Slot`` per
domain): the politeness state this scheduler keeps, and beside it what the frontier keeps
of that host — its queue per priority level, its place in the frontier's ready heap, and
its robots.txt state (the robots.txt fetch in flight for each of its origins, the origins
it waits for). The scheduler holds the records (:meth:`HostScheduler.slot`); the frontier's
fields are only touched under the frontier's lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xyro.clock import Clock

#: Priority levels of the frontier (0 most urgent); one FIFO per level in each slot.
LEVELS = 5


class PolitenessError(RuntimeError):
    """The engine asked for something that would break a politeness rule (an engine bug)."""


@dataclass(slots=True, eq=False)
class HostSlot:
    """Everything about one host (module docstring): politeness, queues, robots.txt state."""

    # -- politeness (this scheduler) --
    next_ok: float = float("-inf")  # earliest allowed start
    last_start: float = float("-inf")
    in_flight: int = 0
    crawl_delay: float = 0.0
    errors: int = 0
    wanted: bool = False  # the host has work for us
    token: int = -1  # sequence number of its one valid heap entry, -1 if none
    starts: int = 0
    # -- queues (the frontier) --
    levels: list[deque[Any] | None] | None = None  # one FIFO per level, None when empty
    live: list[int] | None = None  # live (not stale) entries per level
    ready_level: int | None = None  # level of the host's valid ready-heap entry
    # -- robots.txt (the frontier; the rules themselves are in the RobotsCache) --
    robots_inflight: dict[str, Any] | None = None  # origin → its robots.txt fetch item
    held: set[str] | None = None  # origins whose robots.txt this host's items wait for

    def best(self) -> int | None:
        """The most urgent level with a live queued item, or None."""
        live = self.live
        if live is not None:
            for level, n in enumerate(live):
                if n:
                    return level
        return None

    def append(self, item: Any, new_queue: Callable[[int], Any] = lambda level: deque()) -> None:
        """Queue ``item`` (with a ``priority``) at its level: a FIFO, or the queue
        ``new_queue(level)`` builds (the frontier's Greedy order for unread pages)."""
        if self.levels is None:
            self.levels, self.live = [None] * LEVELS, [0] * LEVELS
        q = self.levels[item.priority]
        if q is None:
            q = self.levels[item.priority] = new_queue(item.priority)
        q.append(item)
        self.live[item.priority] += 1  # type: ignore[index]

    def clear_queues(self) -> None:
        """Free the queues of a host left without work (the record itself stays)."""
        self.levels = self.live = None


class HostScheduler:
    """Decides which host may get a request now; see the module docstring for the rules."""

    def __init__(
        self,
        delay_s: float,
        clock: Clock,
        enforce: bool = True,
        max_retry_after_s: float = 86_400.0,
        backoff_base_s: float = 30.0,
        backoff_cap_s: float = 3600.0,
    ) -> None:
        if delay_s < 0 or max_retry_after_s < 0 or backoff_base_s < 0 or backoff_cap_s < 0:
            raise ValueError("politeness delay_s, max_retry_after_s and back-off times must be >= 0 seconds")
        self.delay_s = float(delay_s)
        self.enforce = enforce
        self.max_retry_after_s = float(max_retry_after_s)
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_cap_s = float(backoff_cap_s)
        self._clock = clock
        self._hosts: dict[str, HostSlot] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._in_flight = 0

    # -- internals (call with the lock held) ----------------------------------------

    def _get(self, host: str) -> HostSlot:
        st = self._hosts.get(host)
        if st is None:
            st = self._hosts[host] = HostSlot()
        return st

    def _schedule(self, host: str, st: HostSlot, at: float) -> None:
        """Give ``host`` one valid heap entry at time ``at`` (older entries become stale)."""
        st.token = next(self._seq)
        heapq.heappush(self._heap, (at, st.token, host))

    def _waitable(self, st: HostSlot) -> bool:
        return st.wanted and (st.in_flight == 0 or not self.enforce)

    def _drop_stale(self) -> None:
        heap, hosts = self._heap, self._hosts
        while heap:
            _, token, host = heap[0]
            st = hosts[host]
            if token == st.token and self._waitable(st):
                return
            heapq.heappop(heap)
            if token == st.token:
                st.token = -1

    # -- API for the frontier / engine ------------------------------------------------

    def slot(self, host: str) -> HostSlot:
        """The one record of ``host`` (created on first use; records are never dropped)."""
        st = self._hosts.get(host)
        if st is None:
            with self._lock:
                st = self._get(host)
        return st

    def want(self, host: str) -> None:
        """``host`` has work: schedule it at its next allowed time (idempotent)."""
        with self._lock:
            st = self._get(host)
            st.wanted = True
            if st.token < 0 and self._waitable(st):
                self._schedule(host, st, st.next_ok if self.enforce else float("-inf"))

    def idle(self, host: str) -> None:
        """``host`` has no work left; it leaves the schedule (its timing is remembered)."""
        with self._lock:
            st = self._hosts.get(host)
            if st is not None:
                st.wanted = False

    def ready_host(self, now: float | None = None) -> str | None:
        """A host that may start a request at ``now`` (earliest-due first), or None.

        The host is taken off the schedule: call :meth:`start` for it, or :meth:`want` /
        :meth:`defer` to put it back.
        """
        now = self._clock.now() if now is None else now
        with self._lock:
            heap = self._heap
            while True:
                self._drop_stale()
                if not heap or heap[0][0] > now:
                    return None
                _, _, host = heapq.heappop(heap)
                self._hosts[host].token = -1
                return host

    def next_ready_time(self) -> float | None:
        """When the earliest scheduled host becomes ready (may be in the past), or None."""
        with self._lock:
            self._drop_stale()
            return self._heap[0][0] if self._heap else None

    def start(self, host: str, now: float | None = None) -> None:
        """A request to ``host`` starts at ``now``; raises PolitenessError if that breaks a rule."""
        now = self._clock.now() if now is None else now
        with self._lock:
            st = self._get(host)
            if self.enforce:
                if st.in_flight:
                    raise PolitenessError(
                        f"host {host} already has a request in flight; start only hosts "
                        "returned by ready_host()")
                if now < st.next_ok:
                    raise PolitenessError(
                        f"host {host} may not start before {st.next_ok:.3f} (now {now:.3f}); "
                        "start only hosts returned by ready_host()")
                st.token = -1  # off the schedule while in flight
            st.in_flight += 1
            st.starts += 1
            st.last_start = now
            self._in_flight += 1
            if not self.enforce and st.wanted:
                self._schedule(host, st, now)

    def borrow(self, host: str, now: float) -> bool:
        """Start a request to ``host`` outside the schedule (a robots.txt redirect hop,
        :mod:`xyro.crawl.robots_hops`) if one may start at ``now``; False when a request is
        in flight there, its delay has not passed, or the frontier holds it ready for its
        next pop (``ready_level``: call under the frontier's lock). A borrowed start ends
        with :meth:`release`."""
        with self._lock:
            st = self._get(host)
            if self.enforce and (st.in_flight or now < st.next_ok
                                 or st.ready_level is not None):
                return False
            st.in_flight += 1
            st.starts += 1
            st.last_start = now
            self._in_flight += 1
            return True

    def release(self, host: str, now: float) -> float:
        """A borrowed start (:meth:`borrow`) ended at ``now``: the host's delay counts from
        it, and its error count and any pause stand (the hop's outcome is the origin's, not
        the host's own). Returns the host's next allowed start."""
        with self._lock:
            st = self._hosts.get(host)
            if st is None or st.in_flight == 0:
                raise PolitenessError(f"release({host!r}) without a borrowed request")
            st.in_flight -= 1
            self._in_flight -= 1
            st.next_ok = max(st.next_ok, now, st.last_start + max(self.delay_s, st.crawl_delay))
            if self.enforce and self._waitable(st):
                self._schedule(host, st, st.next_ok)
            return st.next_ok

    def finish(self, host: str, now: float | None = None, retry_after_s: float | None = None,
               error: bool = False, started_at: float | None = None) -> float:
        """The request to ``host`` ended at ``now``; returns the host's next allowed start.

        ``retry_after_s``: the server's Retry-After (429/503), in seconds from now.
        ``error``: the request failed (timeout, 5xx, ...); consecutive errors back off.
        ``started_at``: when the request really left (the fetch worker's clock reading); a
        worker may pick the job up a little after :meth:`start`, and the delay must separate
        real request starts, so the later of the two counts.
        """
        now = self._clock.now() if now is None else now
        with self._lock:
            st = self._hosts.get(host)
            if st is None or st.in_flight == 0:
                raise PolitenessError(f"finish({host!r}) without a request in flight to that host")
            if started_at is not None and st.last_start < started_at <= now:
                st.last_start = started_at
            st.in_flight -= 1
            self._in_flight -= 1
            st.errors = st.errors + 1 if error else 0
            nxt = max(now, st.last_start + max(self.delay_s, st.crawl_delay))
            if retry_after_s is not None and retry_after_s > 0:
                nxt = max(nxt, now + min(float(retry_after_s), self.max_retry_after_s))
            if st.errors:
                backoff = min(self.backoff_cap_s, self.backoff_base_s * 2.0 ** min(st.errors - 1, 60))
                nxt = max(nxt, now + backoff)
            st.next_ok = nxt
            if self.enforce and self._waitable(st):
                self._schedule(host, st, nxt)
            return nxt

    def defer(self, host: str, until: float) -> None:
        """No start to ``host`` before ``until`` (e.g. robots.txt says disallow for a while)."""
        with self._lock:
            st = self._get(host)
            st.next_ok = max(st.next_ok, until)
            st.wanted = True
            if self._waitable(st):
                self._schedule(host, st, st.next_ok if self.enforce else until)

    def set_crawl_delay(self, host: str, seconds: float) -> float:
        """The host's robots.txt Crawl-delay (already capped by the robots cache); returns
        the host's next allowed start, which a longer delay may have put later."""
        with self._lock:
            st = self._get(host)
            st.crawl_delay = max(0.0, float(seconds))
            return self._delay_from_last_start(host, st)

    def resume(self, host: str, last_start: float, crawl_delay: float = 0.0,
               paused_until: float = 0.0) -> float:
        """A request to ``host`` started at ``last_start`` before this process (a restart),
        under a Crawl-delay of ``crawl_delay`` then: the delay counts from it, as from a
        start of this process, until its robots.txt is read again; a pause it was under
        (Retry-After, back-off) holds until ``paused_until``, never longer from now than
        this process would pause it (a clock since set back, a lower ``max_retry_after_s``).
        Returns the host's next allowed start."""
        longest = self._clock.now() + max(self.max_retry_after_s, self.backoff_cap_s)
        paused_until = min(paused_until, longest)
        with self._lock:
            st = self._get(host)
            st.last_start = max(st.last_start, last_start)
            st.crawl_delay = max(st.crawl_delay, crawl_delay)
            return self._delay_from_last_start(host, st, paused_until)

    def _delay_from_last_start(self, host: str, st: HostSlot,
                               not_before: float = float("-inf")) -> float:
        """The host's next allowed start, put later if its delay from the last start (or
        ``not_before``) asks (lock held); a host waiting in the heap is filed again."""
        nxt = max(st.next_ok, st.last_start + max(self.delay_s, st.crawl_delay), not_before)
        if nxt > st.next_ok:
            st.next_ok = nxt
            if st.token >= 0 and self.enforce:
                self._schedule(host, st, nxt)
        return st.next_ok

    # -- inspection -------------------------------------------------------------------

    def in_flight(self, host: str | None = None) -> int:
        """Requests in flight to ``host``, or to all hosts."""
        with self._lock:
            if host is None:
                return self._in_flight
            st = self._hosts.get(host)
            return st.in_flight if st else 0

    def next_allowed(self, host: str) -> float:
        """The earliest time ``host`` may start its next request (−inf if never seen)."""
        with self._lock:
            st = self._hosts.get(host)
            return st.next_ok if st else float("-inf")

    def starts_before(self, host: str, now: float, until: float, limit: int) -> int:
        """The most request starts (up to ``limit``) the rules let ``host`` make in
        [``now``, ``until``), assuming each request ends before the next may start: its next
        allowed start, then one every max(``delay_s``, Crawl-delay)."""
        with self._lock:
            st = self._hosts.get(host)
            if st is None or not self.enforce:
                return limit
            gap = max(self.delay_s, st.crawl_delay)
            first = st.last_start + gap if st.in_flight else st.next_ok
            first = max(now, first)
            if first >= until:
                return 0
            if gap <= 0:
                return limit
            return min(limit, 1 + int((until - first) // gap))

    def waiting(self, now: float | None = None) -> int:
        """Hosts with work whose next allowed start is still ahead of ``now`` (delay,
        Crawl-delay, Retry-After or back-off), for the metrics endpoint.

        O(heap) but off the crawl's path: the lock is held only to copy the heap; entries
        are checked after, with racy reads that can at worst miscount a host for one scrape.
        """
        now = self._clock.now() if now is None else now
        with self._lock:
            heap = list(self._heap)
        hosts = self._hosts  # only ever grows, so every heap entry's host is there
        return sum(1 for at, token, host in heap
                   if at > now and hosts[host].token == token and self._waitable(hosts[host]))

    def errors(self, host: str) -> int:
        """Consecutive errors of ``host`` (what its back-off is based on)."""
        with self._lock:
            st = self._hosts.get(host)
            return st.errors if st else 0

    def __len__(self) -> int:
        """Hosts known to the scheduler."""
        return len(self._hosts)
