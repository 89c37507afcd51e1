"""robots.txt redirected to another host, polite on that host too (RFC 9309 §2.3.1.2).

A robots.txt fetch holds its own host's politeness slot only. RFC 9309 asks a crawler to
follow a robots.txt's redirects "even across authorities" and to obey the file so reached
for the first host: a site may serve it from a CDN or from its ``www.`` name while its pages
stay on the bare host, and reading such a redirect as "unavailable: allow all" would crawl
what the site forbids. So a hop to another host is followed when that host may start a
request now (nothing in flight there, its delay since its last request passed): the fetch
takes that host's slot too (:meth:`HostScheduler.borrow`) until it ends. When the host is
busy the fetch stops at the hop and the origin waits until the host's next allowed start,
then asks for its robots.txt again, unless the hop's target is that host's own robots.txt and
the cache holds it (:mod:`xyro.crawl.robots_answers`): a crawled ``www.`` host is busy at
nearly every try. Eight sites sending their robots.txt to one CDN thus
put one request at a time on it, spaced by its delay. A hop into a denied domain is never
made (the operator forbids contacting it): that robots.txt is unavailable.

:meth:`RobotsHops.gate` is the robots.txt fetcher's ``hop_gate`` (fetch workers);
:meth:`RobotsHops.settle` ends a fetch's borrowing (the dispatcher, for every robots.txt
fetch that ends).
"""

from __future__ import annotations

import threading

from xyro.clock import Clock
from xyro.crawl.hosts import HostScheduler
from xyro.net.urls import Scope, host_key

#: The shortest wait before a robots.txt whose redirect found its target host busy is
#: asked for again (seconds): the target's next allowed start, but never sooner than this.
MIN_BUSY_WAIT_S = 1.0


class RobotsHops:
    """The hosts robots.txt fetches borrowed for their redirect hops, and the fetches that
    stopped at a busy one. ``lock``: the frontier's, under which hosts are taken and
    started: a borrow sees whether the frontier holds the host ready for its next pop
    (then it is busy), and cannot slip between a pop's ``ready_host`` and ``start``."""

    def __init__(self, hosts: HostScheduler, scope: Scope, clock: Clock,
                 lock: threading.Lock) -> None:
        self._hosts = hosts
        self._scope = scope
        self._clock = clock
        self._frontier_lock = lock
        self._lock = threading.Lock()
        self._held: dict[str, list[str]] = {}   # robots.txt URL -> hosts borrowed for it
        self._busy: dict[str, float] = {}       # robots.txt URL -> ask again at

    def gate(self, first: str, target: str) -> str | None:
        """May the fetch of robots.txt ``first`` hop to ``target`` now? None: yes (the
        target's host is borrowed if it is another host); else why not."""
        try:
            home, there = host_key(first), host_key(target)
        except ValueError as exc:
            return str(exc)
        with self._lock:
            if there == home or there in self._held.get(first, ()):
                return None
        if self._scope.host_denied(target):
            return f"host {there} is in a denied domain"
        now = self._clock.now()
        with self._frontier_lock:
            taken = self._hosts.borrow(there, now)
            ready_at = self._hosts.next_allowed(there)
        with self._lock:
            if taken:
                self._held.setdefault(first, []).append(there)
                return None
            self._busy[first] = max(ready_at, now + MIN_BUSY_WAIT_S)
        return f"host {there} is busy (politeness); robots.txt is asked for again later"

    def settle(self, first: str, now: float) -> float | None:
        """The fetch of robots.txt ``first`` ended at ``now``: the hosts it borrowed are
        free again (their delay counts from the hop). Returns when to ask for it again if
        it stopped at a busy host, else None."""
        with self._lock:
            held = self._held.pop(first, [])
            busy = self._busy.pop(first, None)
        for host in held:
            with self._frontier_lock:
                self._hosts.release(host, now)
        return busy
