"""Signals for ``xyro crawl`` and ``xyro run``, in one place (DESIGN.md §7, SIGTERM).

The first SIGTERM or SIGINT asks for a clean stop: the ``stop`` event is set, the engine
stops taking work, in-flight fetches end or are given back, the writer flushes, exit 0. A
second one means the operator will not wait: the process exits at once with 128 + the
signal number. That is safe because the store survives ``kill -9`` at any moment (at most
the last unflushed batch is lost, DESIGN.md §7). SIGHUP, where asked for, sets ``reload``.
Handlers are installed for the duration of a ``with`` block and the previous ones restored.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("xyro.signals")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopHandler:
    """What a stop signal does: first a clean stop, then a forced exit."""

    def __init__(self, stop: threading.Event,
                 force_exit: Callable[[int], None] = os._exit) -> None:
        self._stop = stop
        self._force_exit = force_exit
        self._received = 0

    def __call__(self, signum: int, _frame: Any = None) -> None:
        name = signal.Signals(signum).name
        self._received += 1
        if self._received == 1:
            log.info("received %s: stopping after in-flight fetches (send it again to exit "
                     "at once)", name)
            self._stop.set()
            return
        log.warning("received %s again: exiting now; in-flight fetches stay queued and at "
                    "most the last unflushed batch of records is lost", name)
        logging.shutdown()
        self._force_exit(128 + signum)


@contextmanager
def handle_signals(stop: threading.Event, reload: threading.Event | None = None,
                   ) -> Iterator[StopHandler | None]:
    """Install the handlers (main thread only; elsewhere a no-op yielding None)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    handler = StopHandler(stop)
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    if reload is not None:
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda *_: reload.set())
    try:
        yield handler
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
