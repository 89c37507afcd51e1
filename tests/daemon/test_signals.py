"""Stop signals: the first asks for a clean stop, the second exits at once; handlers restored."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from xyro.service.signals import StopHandler, handle_signals


def test_first_signal_stops_cleanly_and_the_second_forces_exit() -> None:
    stop, exits = threading.Event(), []
    handler = StopHandler(stop, force_exit=exits.append)
    handler(signal.SIGTERM)
    assert stop.is_set() and exits == []
    handler(signal.SIGINT)
    assert exits == [128 + signal.SIGINT]


def test_the_forced_exit_line_carries_journald_priority_only_under_journald(
        monkeypatch, capfd) -> None:
    """The second signal's raw line is a warning record under journald (``<4>``), plain on
    a terminal."""
    lines = []
    st = os.fstat(2)   # capfd's file: the stream the handler writes to
    for stream in (f"{st.st_dev}:{st.st_ino}", None, f"{st.st_dev}:{st.st_ino + 1}"):
        if stream is None:
            monkeypatch.delenv("JOURNAL_STREAM", raising=False)
        else:   # journald's stream, or another file's (the variable inherited by a shell)
            monkeypatch.setenv("JOURNAL_STREAM", stream)
        handler = StopHandler(threading.Event(), force_exit=lambda code: None)
        handler(signal.SIGTERM)
        handler(signal.SIGTERM)
        lines.append(capfd.readouterr().err)
    assert lines[0].startswith("<4>xyro.service.signals: received SIGTERM again: exiting now")
    assert lines[1].startswith("received SIGTERM again: exiting now")
    assert lines[2].startswith("received SIGTERM again: exiting now")


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


def test_the_first_signal_is_logged_by_a_thread_never_by_the_handler(monkeypatch) -> None:
    """A handler may interrupt a write to stderr (a reentrant write would raise in the main
    thread): it only sets events, and the announcement comes from another thread."""
    import xyro.service.signals as signals_module

    logged: list[tuple[str, bool]] = []
    monkeypatch.setattr(signals_module.log, "info", lambda msg, *args: logged.append(
        (msg % args, threading.current_thread() is threading.main_thread())))
    stop = threading.Event()
    with handle_signals(stop) as handler:
        assert handler is not None
        handler(signal.SIGTERM)
        assert stop.is_set() and handler.first == "SIGTERM"
        deadline = threading.Event()
        for _ in range(50):
            if logged:
                break
            deadline.wait(0.05)
    assert len(logged) == 1 and logged[0][0].startswith("received SIGTERM: stopping")
    assert logged[0][1] is False      # not logged from the main thread, i.e. not the handler


def test_a_sigterm_ends_a_one_shot_command_through_its_cleanups(tmp_path) -> None:
    # `xyro rank` stopped by systemctl stop or timeout left its slice files (gigabytes on a
    # large graph) in the database's folder: Python's default SIGTERM skips every cleanup.
    import tempfile

    from xyro.service.signals import exit_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    made = []
    with pytest.raises(SystemExit) as info:
        with exit_on_sigterm(), tempfile.TemporaryDirectory(dir=tmp_path) as folder:
            made.append(folder)
            os.kill(os.getpid(), signal.SIGTERM)
            threading.Event().wait(10)   # the handler raises at once, not after this
    assert info.value.code == 128 + signal.SIGTERM
    assert made and not os.path.exists(made[0])
    assert signal.getsignal(signal.SIGTERM) is before
