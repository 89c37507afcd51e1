"""Settings every test directory shares.

Hypothesis draws the same examples on every run (``derandomize``): the default run is what
CI runs, and a test that fails there must fail the same way on the next run, not at random
(an example a fuzz test found once is kept as an ``@example``). To explore new examples run
``pytest --hypothesis-profile explore``.
"""

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("repeatable")


import os  # noqa: E402  (the settings above load first)
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


class TreeSite:
    """A threaded HTTP server on 127.0.0.1: ``/p{i}.html`` links to ``/p{2i+1}.html`` and
    ``/p{2i+2}.html`` (those below ``pages``); robots.txt is a 404. Each page is served after
    ``delay_s``; ``requests`` lists the page paths served, in order, and ``reached(n)`` is an
    event set once ``n`` pages were served. A client that hangs up (a killed crawler) is
    ignored."""

    def __init__(self, pages: int, delay_s: float = 0.0) -> None:
        self.requests: list[str] = []
        self._marks: dict[int, threading.Event] = {}
        lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                if self.path == "/robots.txt":
                    self.send_error(404)
                    return
                threading.Event().wait(delay_s)
                with lock:
                    site.requests.append(self.path)
                    for n, event in site._marks.items():
                        if len(site.requests) >= n:
                            event.set()
                i = int(self.path[2:-5])
                body = ("<html><body>" + "".join(
                    f'<a href="/p{k}.html">p{k}</a>' for k in (2 * i + 1, 2 * i + 2)
                    if k < pages) + "</body></html>").encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self._lock = lock
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reached(self, n: int) -> threading.Event:
        with self._lock:
            event = self._marks.setdefault(n, threading.Event())
            if len(self.requests) >= n:
                event.set()
            return event

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tree_site() -> Iterator[Callable[..., TreeSite]]:
    """``tree_site(pages, delay_s=0.0)``: a :class:`TreeSite`, closed after the test."""
    sites: list[TreeSite] = []

    def make(pages: int, delay_s: float = 0.0) -> TreeSite:
        sites.append(TreeSite(pages, delay_s))
        return sites[-1]
    yield make
    for site in sites:
        site.close()


#: What a routed site answers for a path: (status, extra headers, HTML body).
Answer = tuple[int, dict[str, str], bytes]


class RoutedSite:
    """A threaded HTTP server on 127.0.0.1 answering every GET with ``respond(path)`` (an
    HTML body, Content-Length set); robots.txt is ``robots`` (a 404 when None).
    ``requests`` lists the paths asked for (robots.txt left out), in order, and ``times``
    when each was (monotonic seconds); ``arrivals`` lists (time, path) of every request,
    robots.txt included; ``headers`` the request headers of each of ``requests``."""

    def __init__(self, respond: Callable[[str], Answer], robots: str | None = None,
                 host: str = "127.0.0.1") -> None:
        self.requests: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self.arrivals: list[tuple[float, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                site.arrivals.append((time.monotonic(), self.path))
                if self.path == "/robots.txt" and robots is None:
                    self.send_error(404)
                    return
                if self.path == "/robots.txt":
                    status, headers, body = 200, {"Content-Type": "text/plain"}, robots.encode()
                else:
                    site.times.append(site.arrivals[-1][0])
                    site.requests.append(self.path)
                    site.headers.append(dict(self.headers.items()))
                    status, headers, body = respond(self.path)
                self.send_response(status)
                for name, value in {"Content-Type": "text/html", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def routed_site() -> Iterator[Callable[..., RoutedSite]]:
    """``routed_site(respond, robots=None, host="127.0.0.1")``: a :class:`RoutedSite` (another
    loopback address, 127.0.0.2, is another host), closed after the test."""
    sites: list[RoutedSite] = []

    def make(respond: Callable[[str], Answer], robots: str | None = None,
             host: str = "127.0.0.1") -> RoutedSite:
        sites.append(RoutedSite(respond, robots, host))
        return sites[-1]
    yield make
    for site in sites:
        site.close()


@pytest.fixture
def fsync_log(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` is called on from now on, in order (the real fsync still runs);
    skips where ``/proc`` cannot name a file descriptor."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to name the file an fsync was for")
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return synced
