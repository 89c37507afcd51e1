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

from xyro.service.logs import journald_stderr

log = logging.getLogger("xyro.service.signals")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopHandler:
    """What a stop signal does: first a clean stop, then a forced exit.

    A handler runs in the main thread between two bytecodes, possibly in the middle of a
    write to stderr: logging from it could fail with a reentrant write and take the main
    thread down. So it only sets events; :func:`handle_signals` logs from a thread of its
    own, and the forced exit writes its line with one raw ``os.write``.
    """

    def __init__(self, stop: threading.Event,
                 force_exit: Callable[[int], None] = os._exit) -> None:
        self._stop = stop
        self._force_exit = force_exit
        self._received = 0
        self.first: str | None = None          # name of the first signal, once received
        self.signalled = threading.Event()
        # The forced exit's raw line, in the log's form under journald (a warning).
        self._prefix = "<4>xyro.service.signals: " if journald_stderr() else ""

    def __call__(self, signum: int, _frame: Any = None) -> None:
        name = signal.Signals(signum).name
        self._received += 1
        if self._received == 1:
            self.first = name
            self._stop.set()
            self.signalled.set()
            return
        try:
            os.write(2, f"{self._prefix}received {name} again: exiting now; in-flight "
                        "fetches stay queued and at most the last unflushed batch of "
                        "records is lost\n".encode())
        except OSError:
            pass
        self._force_exit(128 + signum)


def _announce(handler: StopHandler, done: threading.Event) -> None:
    """Log the first stop signal (from this thread, never from the handler)."""
    while not done.is_set():
        if handler.signalled.wait(0.5):
            log.info("received %s: stopping after in-flight fetches (send it again to exit "
                     "at once)", handler.first)
            return


@contextmanager
def handle_signals(stop: threading.Event, reload: threading.Event | None = None,
                   ) -> Iterator[StopHandler | None]:
    """Install the handlers (main thread only; elsewhere a no-op yielding None)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    handler = StopHandler(stop)
    done = threading.Event()
    announcer = threading.Thread(target=_announce, args=(handler, done),
                                 name="xyro-signals", daemon=True)
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    if reload is not None:
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda *_: reload.set())
    announcer.start()
    try:
        yield handler
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        done.set()
        announcer.join(timeout=1.0)


@contextmanager
def exit_on_sigterm() -> Iterator[None]:
    """For a one-shot command (``xyro rank``): a SIGTERM (``systemctl stop``, ``timeout``, a
    cron wrapper) ends it as ``SystemExit(143)``, so that its temporary folders (a ranking's
    slice files, gigabytes on a large graph) and transactions are cleaned up on the way out;
    Python's default ends the process at once. Only in the main thread (signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
