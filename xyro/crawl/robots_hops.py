"""robots.txt redirected, polite on every host a hop asks (RFC 9309 §2.3.1.2; DESIGN.md §7).

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

A hop to a host this fetch asked already (its own host, as for ``http://h/robots.txt`` to
``https://h/robots.txt``, or one it borrowed) is another request to that host, so it waits,
on the fetch's worker, until the host's delay (max of ``delay_s`` and its Crawl-delay) has
passed since that host's last answer in this fetch (its request started before the answer
came, so the delay between the two starts is never short). The host's slot is held by the
fetch meanwhile, so no other request could use that time (a borrowed host is borrowed anew
for the request: its next start after the fetch counts from it); asking again later instead
would start over from the first request and need the same wait every time. The wait ends at the
crawl's stop (:meth:`RobotsHops.watch`): the fetch then stops at the hop and the origin's
URLs stay queued, as for a busy host. A wait the fetch's total deadline cannot cover ends
the fetch as a timeout at its next request (the host is then retried as unreachable).

Hop targets are read as canonical URLs (:func:`xyro.net.urls.canonicalize`), so a host is
the host the frontier knows (``127.1`` is ``127.0.0.1``, ``faß.de`` is ``xn--fa-hia.de``);
a target that is no crawlable URL is not followed, and that robots.txt is unavailable.

:meth:`RobotsHops.gate` is the robots.txt fetcher's ``hop_gate`` (fetch workers);
:meth:`RobotsHops.settle` ends a fetch's borrowing (the dispatcher, for every robots.txt
fetch that ends).
"""

from __future__ import annotations

import threading

from xyro.clock import Clock
from xyro.crawl.hosts import HostScheduler
from xyro.net.urls import Scope, canonicalize, host_key

#: The shortest wait before a robots.txt whose redirect found its target host busy is
#: asked for again (seconds): the target's next allowed start, but never sooner than this.
MIN_BUSY_WAIT_S = 1.0


class RobotsHops:
    """The hosts robots.txt fetches borrowed for their redirect hops, the hosts each fetch
    asked and when their answers came, and the fetches that stopped at a busy host.
    ``lock``: the frontier's, under which hosts are taken and started: a borrow sees whether
    the frontier holds the host ready for its next pop (then it is busy), and cannot slip
    between a pop's ``ready_host`` and ``start``."""

    def __init__(self, hosts: HostScheduler, scope: Scope, clock: Clock,
                 lock: threading.Lock) -> None:
        self._hosts = hosts
        self._scope = scope
        self._clock = clock
        self._frontier_lock = lock
        self._lock = threading.Lock()
        self._held: dict[str, list[str]] = {}   # robots.txt URL -> hosts borrowed for it
        self._busy: dict[str, float] = {}       # robots.txt URL -> ask again at
        # robots.txt URL -> {host asked in that fetch: when its last answer came}
        self._answered: dict[str, dict[str, float]] = {}
        self._at: dict[str, str] = {}           # robots.txt URL -> host of its last request
        self._stop: threading.Event | None = None

    def watch(self, stop: threading.Event) -> None:
        """``stop``: the crawl's stop event, which ends a hop's wait for its host's delay
        (the dispatcher hands it over before it hands out any fetch)."""
        self._stop = stop

    def gate(self, first: str, target: str) -> str | None:
        """May the fetch of robots.txt ``first`` hop to ``target`` now? None: yes (the
        target's host is borrowed if it is another host; its delay is waited for if this
        fetch asked it already); else why not."""
        canon = canonicalize(target)
        if canon is None:
            return f"{target} is not a URL the crawl can fetch (its host or form is refused)"
        try:
            home, there = host_key(first), host_key(canon)
        except ValueError as exc:
            return str(exc)
        now = self._clock.now()
        with self._lock:
            answered = self._answered.setdefault(first, {})
            # The request this redirect answers started before now.
            answered[self._at.get(first, home)] = now
            since = answered.get(there)
        if since is not None:
            return self._wait_for_delay(first, there, since)
        if self._scope.host_denied(canon):
            return f"host {there} is in a denied domain"
        with self._frontier_lock:
            taken = self._hosts.borrow(there, now)
            ready_at = self._hosts.next_allowed(there)
        with self._lock:
            if taken:
                self._held.setdefault(first, []).append(there)
                self._at[first] = there
                return None
            self._busy[first] = max(ready_at, now + MIN_BUSY_WAIT_S)
        return f"host {there} is busy (politeness); robots.txt is asked for again later"

    def _wait_for_delay(self, first: str, there: str, since: float) -> str | None:
        """Wait until ``there``'s delay has passed since its answer at ``since`` (its slot is
        held by this fetch); None, or why not if the crawl stops meanwhile. A borrowed host
        is borrowed anew for the request: its next start counts from this one."""
        hosts = self._hosts
        delay = max(hosts.delay_s, hosts.slot(there).crawl_delay) if hosts.enforce else 0.0
        ready_at = since + delay
        wait = ready_at - self._clock.now()
        if wait > 0 and self._clock.wait(wait, self._stop):
            with self._lock:
                self._busy[first] = max(ready_at, self._clock.now() + MIN_BUSY_WAIT_S)
            return (f"the crawl is stopping while the fetch waited for host {there}'s delay; "
                    "robots.txt is asked for again later")
        now = self._clock.now()
        with self._lock:
            borrowed = there in self._held.get(first, ())
        taken = True
        if borrowed:
            with self._frontier_lock:   # no pop between the two: the host stays this fetch's
                hosts.release(there, now)
                taken = hosts.borrow(there, now)
                ready_at = hosts.next_allowed(there)
        with self._lock:
            if taken:
                self._at[first] = there
                return None
            self._held[first].remove(there)   # released; something deferred the host meanwhile
            self._busy[first] = max(ready_at, now + MIN_BUSY_WAIT_S)
        return f"host {there} is busy (politeness); robots.txt is asked for again later"

    def settle(self, first: str, now: float) -> float | None:
        """The fetch of robots.txt ``first`` ended at ``now``: the hosts it borrowed are
        free again (their delay counts from the hop). Returns when to ask for it again if
        it stopped at a busy host (or at a stop while waiting), else None."""
        with self._lock:
            held = self._held.pop(first, [])
            busy = self._busy.pop(first, None)
            self._answered.pop(first, None)
            self._at.pop(first, None)
        for host in held:
            with self._frontier_lock:
                self._hosts.release(host, now)
        return busy
