"""What the crawl tells an operator in its log, besides the counters of ``xyro status``.

Three kinds of line, all meant to be read in ``journalctl -u xyro`` and grepped:

- ``summary:`` every ``log.summary_interval_s``: pages/s and errors by kind *since the last
  summary*, queue sizes, hosts waiting, pages due this time unit (:class:`SummaryLine`);
- ``idle:`` once when the frontier runs dry, ``busy:`` once when work arrives again
  (:class:`SummaryLine` tracks the transition, so an idle daemon does not repeat itself);
- ``host HOST:`` warnings when a host cannot be reached (DNS, connect, timeout, a refused
  address), at most one per host per ``log.host_warning_interval_s``, each counting what
  it held back (:class:`HostWarnings`). Its memory is bounded: the least recently warned
  hosts are forgotten first.

Host warnings are spaced on the injected clock (DESIGN.md §3); the summary's rates are per
real second, as in :class:`~xyro.crawl.stats.CrawlStats` (what an operator experiences).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from xyro.clock import Clock
from xyro.net.dns import address_refusal, literal_address
from xyro.net.urls import host_key

#: Error kinds that say something about a host (not about one page of it).
HOST_ERROR_KINDS = frozenset({"dns", "connect", "truncated", "timeout", "address"})

#: What an operator can do about each kind, appended to the first warning.
_ADVICE = {
    "dns": "check the host name and the resolver",
    "connect": "it is retried with back-off",
    "truncated": "the server closes connections before the end of its responses; it is "
                 "retried with back-off",
    "timeout": "the host is slow; crawler.limits.deadline_s bounds each fetch",
    "address": "private, loopback and link-local addresses are refused; set "
               "scope.allow_private_addresses: true to crawl such hosts",
}


@dataclass
class _HostRecord:
    last_warned: float
    held_back: Counter[str] = field(default_factory=Counter)


class HostWarnings:
    """Rate-limited WARNING lines about hosts that fail (thread-safe)."""

    def __init__(self, clock: Clock, interval_s: float = 600.0, max_hosts: int = 10_000,
                 logger: logging.Logger | None = None) -> None:
        self._clock = clock
        self._interval_s = interval_s
        self._max_hosts = max_hosts
        self._log = logger or logging.getLogger("xyro.crawl.hosts")
        self._hosts: OrderedDict[str, _HostRecord] = OrderedDict()
        self._lock = threading.Lock()

    def error(self, url: str, kind: str, detail: str | None) -> None:
        """Note one failed fetch; warn now unless this host was warned about recently."""
        if kind not in HOST_ERROR_KINDS:
            return
        try:
            host = host_key(url)
        except ValueError:
            return
        now = self._clock.now()
        with self._lock:
            record = self._hosts.get(host)
            if record is not None and now - record.last_warned < self._interval_s:
                record.held_back[kind] += 1
                return
            held = record.held_back if record is not None else Counter()
            self._hosts[host] = _HostRecord(now)
            self._hosts.move_to_end(host)
            while len(self._hosts) > self._max_hosts:
                self._hosts.popitem(last=False)
        self._log.warning("host %s: %s error: %s%s; %s", host, kind, detail or "(no detail)",
                          _held_text(held, self._interval_s), _ADVICE[kind])


def _held_text(held: Counter[str], interval_s: float) -> str:
    if not held:
        return ""
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(held.items()))
    return f" (and {sum(held.values())} more in the last {interval_s:g} s: {kinds})"


def refused_private(urls: list[str]) -> list[str]:
    """The URLs whose host is an IP literal (or ``localhost``) the address policy refuses.

    No DNS look-up: this is the cheap check a start-up warning can afford over a whole
    persisted frontier (DESIGN.md §7, private addresses).
    """
    refused = []
    for url in urls:
        host = urlsplit(url).hostname or ""
        if host == "localhost":
            refused.append(url)
            continue
        address = literal_address(host)
        if address is not None and address_refusal(address) is not None:
            refused.append(url)
    return refused


class SummaryLine:
    """The periodic ``summary:`` line and the ``idle:``/``busy:`` transitions."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic,
                 logger: logging.Logger | None = None) -> None:
        self._monotonic = monotonic
        self._log = logger or logging.getLogger("xyro.summary")
        self._last: tuple[float, int, Mapping[str, int]] | None = None
        self._idle = False

    def emit(self, snap: Mapping[str, Any], due: int | None = None) -> str:
        """Log (INFO) and return one summary of ``snap`` (a :meth:`Crawler.snapshot`)."""
        now = self._monotonic()
        errors = dict(snap.get("errors_by_kind", {}))
        # Pages fetched, as pages_per_s counts them: a robots.txt refusal is a page record
        # but no fetch.
        fetched = int(snap.get("pages", 0)) - int(errors.get("robots", 0))
        if self._last is None:  # the crawl's own rate since it started
            since, rate, new_errors = None, float(snap.get("pages_per_s", 0.0)), errors
        else:
            t0, fetched0, errors0 = self._last
            since = now - t0
            rate = (fetched - fetched0) / since if since > 0 else 0.0
            new_errors = {k: v - errors0.get(k, 0) for k, v in errors.items()
                          if v - errors0.get(k, 0) > 0}
        self._last = (now, fetched, errors)
        line = format_summary(snap, rate, new_errors, since, due)
        self._log.info("%s", line)
        return line

    def watch_idle(self, snap: Mapping[str, Any], hint: str) -> None:
        """Log once when the crawl runs out of work, and once when work arrives again."""
        idle = int(snap.get("queued", 0)) == 0 and int(snap.get("in_flight", 0)) == 0
        if idle and not self._idle:
            self._log.info("idle: the frontier is empty and no fetch is in flight; %s", hint)
        elif not idle and self._idle:
            self._log.info("busy: %d URLs queued again", int(snap.get("queued", 0)))
        self._idle = idle


def format_summary(snap: Mapping[str, Any], rate: float, new_errors: Mapping[str, int],
                   since: float | None, due: int | None) -> str:
    """``summary: 12.5 pages/s over 60 s, 750 pages fetched in all; errors … dns=2 …``."""
    window = f" over {since:.0f} s" if since is not None else " since the start"
    errors = ", ".join(f"{k}={v}" for k, v in sorted(new_errors.items())) or "none"
    by_priority = snap.get("queued_by_priority") or {}
    levels = " ".join(f"p{p}={n}" for p, n in sorted(by_priority.items()) if n)
    due_text = "not planned yet" if due is None else str(due)
    # Pages robots.txt refused are records, not fetches (as `xyro status` counts them).
    refused = int((snap.get("errors_by_kind") or {}).get("robots", 0))
    fetched = int(snap.get("pages", 0)) - refused
    return (f"summary: {rate:.1f} pages/s{window}, {fetched} pages fetched in all"
            f"{f' ({refused} more refused by robots.txt)' if refused else ''}; "
            f"errors since last: {errors}; queued {int(snap.get('queued', 0))}"
            f"{f' ({levels})' if levels else ''}, in flight {int(snap.get('in_flight', 0))}, "
            f"hosts with queued URLs {int(snap.get('hosts_waiting', 0))}; "
            f"due this unit {due_text}")
