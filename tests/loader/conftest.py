"""A threaded HTTP server on 127.0.0.1 for loader tests: static files from a dict or a
directory, a request log (path, arrival time, user agent), and paths that never answer.

Arrival times are the kernel's receive stamps of each request's first byte (the synthetic
web's :class:`~xyro.synthweb.server.ArrivalSocketIO`), not the moment a handler thread ran:
under load handler threads lag the arrivals by up to tens of milliseconds, which would make
politeness gaps look short that were not."""

from __future__ import annotations

import http.server
import io
import mimetypes
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from xyro.clock import WallClock
from xyro.synthweb.server import ArrivalSocketIO, ArrivalStamper, enable_kernel_stamps


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128   # the default 5 drops SYNs under concurrent fetches (1 s retry)


class Site:
    """Serves ``files`` (path → bytes) and/or files under ``root``; logs every request."""

    def __init__(self, files: dict[str, bytes] | None = None, root: Path | None = None,
                 prefix: str = "/", silent: tuple[str, ...] = (),
                 types: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.types = dict(types or {})  # path → Content-Type, instead of the suffix's
        self.root = root
        self.prefix = prefix
        self.silent = silent
        self.log: list[tuple[str, float, str]] = []  # (path, arrival time, user agent)
        self.arrival_error = 0.0  # the largest error bound of a logged arrival (seconds)
        stamper = ArrivalStamper(WallClock())
        self._release = threading.Event()
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                stamped = enable_kernel_stamps(self.connection)
                self.rfile.close()
                self.rfile = io.BufferedReader(  # type: ignore[assignment]
                    ArrivalSocketIO(self.connection, stamper, stamped), io.DEFAULT_BUFFER_SIZE)
                self._offset = 0

            def handle_one_request(self) -> None:
                self._offset = self.rfile.tell()
                super().handle_one_request()

            def do_GET(self) -> None:  # noqa: N802
                arrived, error = self.rfile.raw.arrival_at(self._offset)  # type: ignore[attr-defined]
                if arrived is None:  # no kernel stamps here: the handler's own time
                    arrived, error = time.time(), 0.1
                site.arrival_error = max(site.arrival_error, error)
                site.log.append((self.path, arrived, self.headers.get("User-Agent", "")))
                if self.path.startswith(site.silent):
                    site._release.wait(30)  # a server that never answers (until teardown)
                    return
                body, ctype = site.lookup(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def lookup(self, path: str) -> tuple[bytes | None, str]:
        path = path.split("?", 1)[0]
        if path == "/robots.txt" and path not in self.files:
            return b"User-agent: *\nDisallow:\n", "text/plain"
        if path in self.files:
            return self.files[path], self.types.get(path) or _ctype(path)
        if self.root is not None and path.startswith(self.prefix):
            rel = path[len(self.prefix):]
            target = self.root / rel  # symlinks inside the package tree are followed
            if ".." not in rel.split("/") and target.is_file():
                return target.read_bytes(), _ctype(path)
        return None, ""

    def requests(self, path: str) -> int:
        return sum(1 for p, _, _ in self.log if p == path)

    def start(self) -> Site:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()


def _ctype(path: str) -> str:
    if path.endswith((".dtd", ".mod")):
        return "application/xml-dtd"
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


@pytest.fixture
def site_factory() -> Iterator:
    sites: list[Site] = []

    def make(**kwargs: object) -> Site:
        site = Site(**kwargs).start()  # type: ignore[arg-type]
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.stop()


def _make_app(tmp_path: Path, seeds: list[str], *, delay_s: float = 0.05, workers: int = 4,
             extra: tuple[str, ...] = ()):  # -> xyro.app.App
    """An App crawling ``seeds`` into tmp_path (database created), private addresses allowed."""
    import json

    from xyro.app import App
    from xyro.clock import WallClock
    from xyro.config_load import load_config

    overrides = [f"seeds={json.dumps(seeds)}", "scope.allow_private_addresses=true",
                 f"crawler.politeness.delay_s={delay_s}", f"crawler.workers={workers}",
                 f"storage.database={tmp_path / 'xyro.db'}",
                 f"storage.warehouse_dir={tmp_path / 'warehouse'}", *extra]
    app = App(load_config(None, {}, overrides), WallClock())
    with app.open_store(create=True):
        pass
    return app


def _db_rows(db: Path, sql: str, *args: object) -> list:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


@pytest.fixture
def make_app():
    """``make_app(tmp_path, seeds, delay_s=..., workers=..., extra=(...))`` -> App."""
    return _make_app


@pytest.fixture
def db_rows():
    """``db_rows(db_path, sql, *args)`` -> list of rows."""
    return _db_rows
