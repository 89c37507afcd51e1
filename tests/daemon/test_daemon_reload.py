"""A SIGHUP whose configuration cannot be used: the daemon keeps the running configuration,
says why in the log and in systemd's STATUS=, and always ends the reload with READY=1 (after
RELOADING=1 systemd shows the unit "reloading" until it comes). In-process daemon, a real
notify socket and real configuration files."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from xyro.app import App
from xyro.config import XyroConfig
from xyro.config_load import load_config
from xyro.service.daemon import Daemon
from xyro.service.sdnotify import Notifier


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[tuple[Notifier, Callable[[], list[str]]]]:
    """A Notifier bound to a datagram socket, and a function returning what it received."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.settimeout(0.01)

    def received() -> list[str]:
        messages = []
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            try:
                messages.append(sock.recv(65536).decode())
            except TimeoutError:
                if messages:
                    break
        return messages
    yield Notifier(str(tmp_path / "notify.sock")), received
    sock.close()


def _reload(tmp_path: Path, notifier: Notifier,
            reload_config: Callable[[], XyroConfig]) -> None:
    """One SIGHUP, as the reload job sees it."""
    config = load_config(None, {}, [f"storage.database={tmp_path / 'x.db'}"])
    daemon = Daemon(App(config), notifier, reload_config)
    daemon._reload.set()   # as the SIGHUP handler does
    daemon._reload_job()


@pytest.mark.parametrize("damage", [b"crawler_typo: 1\n", b"\0" * 64, b"workers: 8\x0c\n"],
                         ids=["unknown key", "zero-filled by a crash", "form feed"])
def test_a_refused_reload_ends_with_ready_and_says_why(
        tmp_path: Path, notify: tuple[Notifier, Callable[[], list[str]]], damage: bytes,
        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "xyro.yaml"
    path.write_bytes(f"storage: {{database: '{tmp_path / 'x.db'}'}}\n".encode() + damage)
    notifier, received = notify
    _reload(tmp_path, notifier, lambda: load_config(path, {}))
    messages = received()
    assert messages[0] == "RELOADING=1", messages
    ready = messages[1].split("\n")
    assert ready[0] == "READY=1" and ready[1].startswith("STATUS=reload refused: config error"), \
        messages
    assert len(ready) == 2   # one STATUS= line, whatever the reason's text
    refused = [r for r in caplog.records if "reload refused" in r.getMessage()]
    assert len(refused) == 1 and not refused[0].exc_info   # a config error: one line


def test_a_reload_that_fails_unexpectedly_still_ends_with_ready(
        tmp_path: Path, notify: tuple[Notifier, Callable[[], list[str]]],
        caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> XyroConfig:
        raise RuntimeError("the loader broke\nover two lines")
    notifier, received = notify
    _reload(tmp_path, notifier, broken)
    messages = received()
    assert messages == ["RELOADING=1", "READY=1\nSTATUS=reload refused: RuntimeError: the "
                        "loader broke over two lines"], messages
    refused = [r for r in caplog.records if "reload refused" in r.getMessage()]
    assert len(refused) == 1 and refused[0].exc_info  # a bug: its traceback
