"""Stop signals: the first asks for a clean stop, the second exits at once; handlers restored."""

from __future__ import annotations

import os
import signal
import threading

from xyro.signals import StopHandler, handle_signals


def test_first_signal_stops_cleanly_and_the_second_forces_exit() -> None:
    stop, exits = threading.Event(), []
    handler = StopHandler(stop, force_exit=exits.append)
    handler(signal.SIGTERM)
    assert stop.is_set() and exits == []
    handler(signal.SIGINT)
    assert exits == [128 + signal.SIGINT]


def test_handlers_are_installed_for_the_block_and_restored() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    stop, reload = threading.Event(), threading.Event()
    with handle_signals(stop, reload) as handler:
        assert isinstance(handler, StopHandler)
        assert signal.getsignal(signal.SIGTERM) is handler
        os.kill(os.getpid(), signal.SIGHUP)
        assert reload.wait(2.0) and not stop.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(2.0)
    assert {s: signal.getsignal(s) for s in before} == before


def test_outside_the_main_thread_nothing_is_installed() -> None:
    got: list[object] = []

    def run() -> None:
        with handle_signals(threading.Event()) as handler:
            got.append(handler)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert got == [None]
