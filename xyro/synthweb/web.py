"""SyntheticWeb: start and stop the servers of a web, and answer ground-truth questions.

    with SyntheticWeb(WebSpec(seed=1), clock) as web:
        crawl(web.seeds)
        web.log.requests(host=...)   # what the crawler did
        web.is_disallowed(url), web.pagerank_by_url(), web.expected_outcome(url), ...

URLs exist only while the web runs (ports are ephemeral); page ids, paths and the whole
:class:`WebModel` exist from construction on.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from urllib.parse import urlsplit

import numpy as np

from xyro.clock import Clock
from xyro.synthweb.changes import ChangeProcess
from xyro.synthweb.content import Renderer
from xyro.synthweb.hostile import CASES, HostileCase, HostileResponder
from xyro.synthweb.log import RequestLog
from xyro.synthweb.model import Host, WebModel, build_model, is_disallowed
from xyro.synthweb.server import Acceptor, HostServer, RefusedPort, SilentListener
from xyro.synthweb.site import Site
from xyro.synthweb.spec import WebSpec


class SyntheticWeb:
    """A running synthetic web: servers, request log and ground truth."""

    def __init__(self, spec: WebSpec, clock: Clock, t0: float | None = None) -> None:
        self.spec = spec
        self.clock = clock
        self.model: WebModel = build_model(spec)
        self.t0 = clock.now() if t0 is None else float(t0)
        self.changes = ChangeProcess(spec.seed, np.array([p.rate for p in self.model.pages]),
                                     self.t0)
        self.log = RequestLog()
        self._ports: dict[int, int] = {}
        self._servers: list[HostServer] = []
        self._silent: SilentListener | None = None
        self._refused: RefusedPort | None = None
        self._acceptor: Acceptor | None = None
        self._stopping = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> SyntheticWeb:
        if self._acceptor is not None:
            raise RuntimeError("SyntheticWeb.start(): already running; stop() it first")
        self._stopping.clear()
        renderer = Renderer(self.model, self.url_of)
        hostile = HostileResponder(self.spec, self.t0, self.url_of)
        try:
            for host in self.model.normal_hosts:
                site = Site(host, self.model, self.changes, renderer, hostile)
                srv = HostServer(host.address, site, self.log, self.clock, self._stopping,
                                 self.spec.drip_interval, self.spec.idle_timeout)
                self._servers.append(srv)
                self._ports[host.index] = srv.port
            silent = self.model.host_of_role("silent")
            refused = self.model.host_of_role("refused")
            if silent is not None and "silent_host" in self.spec.hostile:
                self._silent = SilentListener(silent.address)
                self._ports[silent.index] = self._silent.port
            if refused is not None and "refused_port" in self.spec.hostile:
                self._refused = RefusedPort(refused.address)
                self._ports[refused.index] = self._refused.port
        except OSError as exc:
            self.stop()
            raise OSError(f"synthetic web: cannot bind a server on 127.0.0.x ({exc}); "
                          f"Linux routes 127/8 to lo, check the loopback interface") from exc
        self._acceptor = Acceptor(self._servers, self._silent)
        self._acceptor.start()
        return self

    def stop(self, timeout: float = 3.0) -> None:
        """Stop every server; idempotent, bounded by ``timeout`` real seconds."""
        deadline = time.monotonic() + timeout
        self._stopping.set()
        if self._acceptor is not None:
            self._acceptor.stop()
            self._acceptor = None
        threads = []
        for srv in self._servers:
            srv.server_close()
            threads += srv.close_connections()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self._silent is not None:
            self._silent.close()
        if self._refused is not None:
            self._refused.close()
        self._servers, self._silent, self._refused = [], None, None
        self._ports.clear()

    @property
    def running(self) -> bool:
        return self._acceptor is not None

    def __enter__(self) -> SyntheticWeb:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- URLs --------------------------------------------------------------------------

    def url_of(self, host: int, path: str) -> str:
        port = self._ports.get(host)
        if port is None:
            raise RuntimeError(f"synthetic web: host {host} has no port; URLs exist only "
                               f"between start() and stop()")
        return f"http://{self.model.hosts[host].address}:{port}{path}"

    def url(self, page: int) -> str:
        p = self.model.pages[page]
        return self.url_of(p.host, p.path)

    def host_name(self, host: int) -> str:
        return self.model.hosts[host].address

    @property
    def seeds(self) -> list[str]:
        """The home page of every normal host."""
        return [self.url_of(h.index, "/") for h in self.model.normal_hosts]

    def locate(self, url: str) -> tuple[int, str] | None:
        """(host index, path) of a URL of this web, or None."""
        parts = urlsplit(url)
        for idx, port in self._ports.items():
            if parts.hostname == self.model.hosts[idx].address and parts.port == port:
                return idx, parts.path or "/"
        return None

    def page_for(self, url: str) -> int | None:
        where = self.locate(url)
        return None if where is None else self.model.page_at.get(where)

    # -- ground truth ------------------------------------------------------------------

    def out_links(self, page: int) -> list[str]:
        """Absolute URLs of the page's links in document order (nofollow included)."""
        return [self.url_of(link.host, link.path) for link in self.model.pages[page].links]

    def graph(self) -> dict[str, list[str]]:
        return {self.url(p.id): self.out_links(p.id) for p in self.model.pages}

    def disallowed_urls(self, host: int | None = None) -> list[str]:
        """Pages robots.txt forbids (for the ``*`` group), per host or all."""
        return [self.url(p.id) for p in self.model.pages
                if p.disallowed and (host is None or p.host == host)]

    def is_disallowed(self, url: str) -> bool:
        """True when the ``*`` group of the host's robots.txt forbids the URL's path."""
        where = self.locate(url)
        if where is None:
            return False
        return is_disallowed(where[1], self.model.hosts[where[0]].disallow)

    def crawl_delays(self) -> dict[str, float]:
        """Host name -> Crawl-delay (clock seconds) for hosts whose robots.txt has one."""
        return {h.address: h.crawl_delay for h in self.model.normal_hosts
                if h.crawl_delay is not None and h.robots == "rules"}

    def host(self, name_or_index: str | int) -> Host:
        if isinstance(name_or_index, int):
            return self.model.hosts[name_or_index]
        return next(h for h in self.model.hosts if h.address == name_or_index)

    def change_times(self, page: int, start: float, end: float) -> list[float]:
        return self.changes.events(page, start, end)

    def changes_between(self, page: int, start: float, end: float) -> int:
        return self.changes.changes_between(page, start, end)

    def version(self, page: int, t: float | None = None) -> int:
        return self.changes.version(page, self.clock.now() if t is None else t)

    def pagerank(self, damping: float = 0.85) -> np.ndarray:
        """PageRank per page id (sums to 1)."""
        return self.model.pagerank(damping)

    def pagerank_by_url(self, damping: float = 0.85) -> dict[str, float]:
        pr = self.model.pagerank(damping)
        return {self.url(i): float(pr[i]) for i in range(len(pr))}

    def hostile_urls(self) -> dict[str, HostileCase]:
        """Entry URL -> case, for every page-level hostile case of this web."""
        return {self.url_of(h.host, h.path): CASES[h.name] for h in self.model.hostile}

    def hostile_hosts(self) -> dict[str, HostileCase]:
        """Host name -> case, for the host-level cases (robots 500/malformed, throttled)."""
        out = {}
        for h in self.model.normal_hosts:
            if h.robots == "error":
                out[h.address] = CASES["robots_500"]
            elif h.robots == "malformed":
                out[h.address] = CASES["robots_malformed"]
            elif h.throttled:
                out[h.address] = CASES["throttled_host"]
        return out

    def hostile_case(self, url: str) -> HostileCase | None:
        """The hostile case any URL of this web belongs to (entry or any later hop, e.g.
        /calendar/2031/4 or /h/chain/6), host-level cases included; None for normal URLs."""
        where = self.locate(url)
        if where is None:
            return None
        index, path = where
        host = self.model.hosts[index]
        if host.role != "normal":
            return CASES["silent_host" if host.role == "silent" else "refused_port"]
        for h in self.model.hostile:
            if h.host == index and path.startswith(CASES[h.name].prefix or h.path):
                return CASES[h.name]
        return self.hostile_hosts().get(host.address)

    def expected_outcome(self, url: str) -> str | None:
        """The expected outcome word (see hostile.py) of a hostile URL, else None."""
        case = self.hostile_case(url)
        return None if case is None else case.expected

    def is_trap(self, url: str) -> bool:
        """True for every URL of a crawler trap (the infinite calendar)."""
        return self.expected_outcome(url) == "trap"
