"""Crawls of the synthetic web into real SQLite files, with configs built like the CLI's."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from xyro.app import App
from xyro.clock import Clock, WallClock
from xyro.config_load import load_config
from xyro.synthweb.web import SyntheticWeb


def local_app(tmp_path: Path, *settings: str) -> App:
    """An App on the wall clock crawling a server on 127.0.0.1 into ``tmp_path``/xyro.db
    (database created), no politeness delay, with ``settings`` (KEY=VALUE) added."""
    config = load_config(None, {}, [
        "scope.allow_private_addresses=true", "crawler.politeness.delay_s=0",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}", *settings])
    app = App(config, WallClock())
    with app.open_store(create=True):
        pass
    return app


def make_app(tmp_path: Path, web: SyntheticWeb, clock: Clock, *, delay_s: float,
             workers: int = 8, extra: Sequence[str] = ()) -> App:
    """An App crawling ``web`` into ``tmp_path``/xyro.db (database created)."""
    overrides = [
        f"seeds={json.dumps(web.seeds)}",
        "scope.allow_private_addresses=true",
        f"crawler.politeness.delay_s={delay_s}",
        f"crawler.workers={workers}",
        f"storage.database={tmp_path / 'xyro.db'}",
        f"storage.warehouse_dir={tmp_path / 'warehouse'}",
        *extra,
    ]
    app = App(load_config(None, {}, overrides), clock)
    with app.open_store(create=True):
        pass
    return app


# Each URL with its latest error (kind, detail), if any.
_URL_ROWS = """
SELECT u.*, e.kind AS error_kind, e.detail AS error_detail
FROM urls u LEFT JOIN errors e ON e.id = (SELECT max(id) FROM errors WHERE url_id = u.id)
"""


def url_rows(db: Path) -> dict[str, sqlite3.Row]:
    """Every URL row of the store, by URL."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return {r["url"]: r for r in conn.execute(_URL_ROWS)}
    finally:
        conn.close()


@pytest.fixture
def rows_of():
    return url_rows


@pytest.fixture
def app_for():
    """``app_for(tmp_path, web, clock, delay_s=..., workers=..., extra=...)`` -> App."""
    return make_app


@pytest.fixture(scope="module")
def app_for_module():
    return make_app


@pytest.fixture(scope="module")
def rows_of_module():
    return url_rows


@pytest.fixture
def local_app_for():
    """``local_app_for(tmp_path, *settings)`` -> App (test modules cannot import conftest
    under importlib mode)."""
    return local_app


class KillPoint:
    """What SIGKILL leaves of a crawl: the ops submitted to the writer before the kill (the
    writer commits in submission order, so that is a prefix of them). Installed on a
    crawler's two ways to the writer (its frontier's records and its own), it passes ops on
    until ``kill_after(op)`` is true for one, then drops every later op and sets ``stop``
    (the crawl ends as the dead process would have, with nothing more written)."""

    def __init__(self, parts: Any, stop: threading.Event,
                 kill_after: Callable[[Any], bool]) -> None:
        self._submit, self._stop, self._kill_after = parts.writer.submit, stop, kill_after
        self.dead = False
        parts.crawler.frontier._record = self
        parts.crawler._submit = self

    def kill(self) -> None:
        self.dead = True
        self._stop.set()

    def __call__(self, op: Any) -> None:
        if self.dead:
            return
        self._submit(op)
        if self._kill_after(op):
            self.kill()


@pytest.fixture
def kill_point() -> type[KillPoint]:
    """:class:`KillPoint` (test modules cannot import conftest under importlib mode)."""
    return KillPoint


class SteppedClock:
    """Real time from ``start``, plus the jumps of :meth:`advance`: a crawl round takes its
    few real seconds (politeness, timeouts and DTD waits keep their meaning) and the days
    between rounds pass at once (DESIGN.md §3: one clock for the crawl and the web)."""

    def __init__(self, start: float) -> None:
        self._start = start - time.monotonic()
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._start + time.monotonic()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._start += seconds

    def wait(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if stop is None:
            time.sleep(max(0.0, seconds))
            return False
        return stop.wait(max(0.0, seconds))


@pytest.fixture
def stepped_clock():
    """``stepped_clock(start=None)`` -> :class:`SteppedClock` (``None``: from the wall
    clock's time)."""
    return lambda start=None: SteppedClock(time.time() if start is None else start)
