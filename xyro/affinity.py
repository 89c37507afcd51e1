"""Pin the crawl process to a set of CPUs (``crawler.cpus``).

The crawl is GIL-bound: fetch threads, the dispatcher and the writer take turns on the
interpreter. Spread over several cores, every hand-over of the GIL wakes a thread on another
core (a futex wake-up and a cold cache each time). Kept on one core, the same threads hand
over cheaply. Measured with ``tests/bench/crawl_throughput.py`` on a 2-core machine, the web
server on the other core: 820 pages/s at 1.2 ms CPU per page on one CPU, 480 pages/s at
2.1 ms when free to use both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from xyro.config_load import ConfigError


def pin_process(cpus: Iterable[int]) -> None:
    """Restrict every thread of this process, and those it starts later, to ``cpus``."""
    wanted = set(cpus)
    available = os.sched_getaffinity(0)
    if not wanted or not wanted <= available:
        raise ConfigError(f"{sorted(wanted)} names CPUs this process may not use (allowed: "
                          f"{sorted(available)}); pick some of those or remove the key",
                          key="crawler.cpus")
    for tid in _thread_ids():
        try:
            os.sched_setaffinity(tid, wanted)
        except ProcessLookupError:  # the thread ended meanwhile
            continue
        except PermissionError:
            raise ConfigError(f"{sorted(wanted)}: the system refused to pin the process to "
                              "those CPUs (sched_setaffinity: operation not permitted, e.g. "
                              "a seccomp filter such as systemd's "
                              "SystemCallFilter=~@resources); allow sched_setaffinity or "
                              "remove the key", key="crawler.cpus") from None


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{os.getpid()}/task")]
    except OSError:  # no /proc: the calling thread only (threads started later inherit it)
        return [0]
