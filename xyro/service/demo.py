"""``xyro demo``: the daemon (``xyro run``) on a synthetic web served on 127.0.0.x, audited.

The web and the daemon share one accelerated clock (DESIGN.md §3): politeness delays,
Crawl-delays, the pages' change processes, the refresh planner's time units and the ranking
schedule all run ``speed`` times faster than real time, so a demo shows hours of the
acquisition loop (crawl → metadata → rank → plan → refresh, paper 003 §2) in a minute. The
demo's time unit is short (``unit_s`` simulated seconds) so that several units pass. The
audit reads the web's own request log: no request to a URL robots.txt forbids, and no two
requests to one host closer than max(delay, Crawl-delay).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata import MetadataError, MetadataStore, SetState
from xyro.app import App
from xyro.clock import AcceleratedClock, WallClock
from xyro.config import XyroConfig
from xyro.crawl.crawler import CrawlSummary
from xyro.errors import UsageError
from xyro.service.crawl_lock import CrawlLock
from xyro.service.daemon import Daemon
from xyro.service.sdnotify import Notifier
from xyro.synthweb.log import RequestRecord
from xyro.synthweb.site import RESOURCES
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

#: Real seconds a demo fetch may take at most (the slow-drip page would hold a worker 60 s).
DEMO_DEADLINE_S = 10.0
#: Simulated seconds of the demo's refresh time unit (the daemon's default is one day).
DEMO_UNIT_S = 600.0
#: The state key where a demo run keeps its refresh unit and bandwidth, so that the
#: commands run with ``xyro --demo`` plan the demo's store as the demo did (:func:`demo_view`).
DEMO_REFRESH_KEY = "demo.refresh"


@dataclass(frozen=True, slots=True)
class Audit:
    """What the server saw the crawler do: requests served (robots.txt, DTDs and entities,
    pages: the rest), requests to disallowed URLs, per-host spacing violations."""

    requests: int
    robots_requests: int
    entity_requests: int
    disallowed_fetched: tuple[str, ...]
    politeness_violations: tuple[str, ...]

    @property
    def page_requests(self) -> int:
        return self.requests - self.robots_requests - self.entity_requests

    def as_dict(self) -> dict[str, Any]:
        return {"requests_served": self.requests, "page_requests": self.page_requests,
                "robots_requests": self.robots_requests,
                "dtd_and_entity_requests": self.entity_requests,
                "disallowed_fetched": len(self.disallowed_fetched),
                "politeness_violations": len(self.politeness_violations)}


def audit(web: SyntheticWeb, delay_s: float, tolerance_s: float = 1e-6) -> Audit:
    """Check the crawl against the web's request log (robots.txt and per-host spacing)."""
    records = web.log.requests()
    disallowed = tuple(r.url for r in records if web.is_disallowed(r.url))
    paths = [r.target.split("?", 1)[0] for r in records]
    return Audit(len(records), paths.count("/robots.txt"),
                 sum(p in RESOURCES for p in paths), disallowed,
                 tuple(start_gap_violations(records, delay_s, web.crawl_delays(), tolerance_s)))


def start_gap_violations(records: list[RequestRecord], delay_s: float,
                         crawl_delays: dict[str, float], tolerance_s: float = 1e-6) -> list[str]:
    """Pairs of consecutive requests to one host that reached it closer than the rule allows.

    Gaps are measured between arrivals (``RequestRecord.arrived``: when the request's bytes
    reached the server's socket, on the injected clock), the time line the politeness rules
    of DESIGN.md §7 are stated in, and what the server really saw; not between the moments
    its handler threads ran, which lag the arrivals by varying amounts under load. Each
    arrival carries the error bound measured when it was stamped; a gap is a violation only
    when it is short by more than the two bounds and ``tolerance_s`` (by default the
    rounding of POSIX-second floats, about 2.4e-7 s apart today, and nothing more).
    robots.txt requests count as requests too.
    """
    starts: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for r in records:
        starts[(r.host, r.port)].append((r.arrived, r.arrival_error))
    bad = []
    for (host, port), times in starts.items():
        need = max(delay_s, crawl_delays.get(host, 0.0))
        times.sort()
        for (a, err_a), (b, err_b) in zip(times, times[1:]):
            if b - a < need - err_a - err_b - tolerance_s:
                bad.append(f"{host}:{port}: requests arrived {b - a:.3f} s apart "
                           f"(± {err_a + err_b:.2g} s), rule {need:.3f} s")
    return bad


def run_demo(app: App, spec: WebSpec, *, speed: float, max_pages: int | None,
             max_seconds: float | None, stop: threading.Event | None = None,
             on_progress: Callable[[dict[str, Any]], None] | None = None,
             unit_s: float = DEMO_UNIT_S, progress_interval_s: float = 1.0,
             ) -> tuple[CrawlSummary, Audit]:
    """Serve ``spec`` on loopback, run the daemon on it into the demo's store until
    ``max_pages`` fetches or ``max_seconds`` simulated seconds, and audit the web's log.

    ``on_progress`` gets the daemon's live counters every ``progress_interval_s`` real
    seconds, with ``simulated_s`` (simulated seconds since the start) added.
    """
    clock = AcceleratedClock(WallClock().now(), speed) if speed != 1 else WallClock()
    try:
        web = SyntheticWeb(spec, clock)
    except ValueError as exc:  # a spec the web model cannot build: the user's options
        raise UsageError(f"cannot build the demo's web: {exc} (options --hosts, "
                         "--web-pages, --no-hostile)") from None
    with web:
        demo_app = App(demo_config(app, web.seeds, unit_s, max(1, spec.n_pages // 10)), clock)
        _start_afresh(demo_app.config)
        _keep_refresh(demo_app)
        daemon = Daemon(demo_app, Notifier(""))
        done = threading.Event()
        watcher = threading.Thread(
            target=_watch, name="xyro-demo-progress", daemon=True,
            args=(daemon, clock, clock.now(), stop, done, on_progress, progress_interval_s))
        watcher.start()
        try:
            with daemon.signals():
                daemon.run(max_pages, max_seconds)
        finally:
            done.set()
            watcher.join(timeout=5.0)
        summary = daemon.last_summary or CrawlSummary("stopped", {})
        return summary, audit(web, demo_app.config.crawler.politeness.delay_s)


def _start_afresh(cfg: XyroConfig) -> None:
    """Remove the last demo's database and warehouse: this run's web listens on other
    ports, and its URLs mixed with the last one's would leave those queued for good. Under
    the crawl lock, so a demo still running is refused, not pulled from under it."""
    db = Path(cfg.storage.database)
    if not db.exists():
        return
    with CrawlLock(db):
        for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            path.unlink(missing_ok=True)
        shutil.rmtree(cfg.storage.warehouse_dir, ignore_errors=True)


def _watch(daemon: Daemon, clock: Any, started: float, stop: threading.Event | None,
           done: threading.Event, on_progress: Callable[[dict[str, Any]], None] | None,
           interval_s: float) -> None:
    """Report progress and pass an outside stop on to the daemon, until the run is done."""
    while not done.wait(interval_s):
        if stop is not None and stop.is_set():
            daemon.stop.set()
        snap = daemon.snapshot()
        if snap is not None and on_progress is not None:
            on_progress({**snap, "simulated_s": clock.now() - started})


def _keep_refresh(demo_app: App) -> None:
    """Write the demo's refresh unit and bandwidth into its store (:data:`DEMO_REFRESH_KEY`)."""
    refresh = demo_app.config.refresh
    with demo_app.open_store(create=True) as store:
        with store.writer() as writer:
            writer.submit(SetState(DEMO_REFRESH_KEY, json.dumps({
                "time_unit_s": refresh.time_unit_s,
                "bandwidth_pages_per_unit": refresh.bandwidth_pages_per_unit})))


def demo_view(cfg: XyroConfig) -> XyroConfig:
    """The configuration of a command run with ``xyro --demo``: the demo's store
    (:func:`demo_storage`) and the refresh unit and bandwidth its last run planned with,
    when it left them, so ``xyro --demo plan`` does not re-file its folders into the
    operator's units."""
    cfg = demo_storage(cfg)
    try:
        # The command's own open warns if the store can only be read as immutable.
        with MetadataStore.open(cfg.storage.database, read_only=True, warn=False) as store:
            kept = store.get_state(DEMO_REFRESH_KEY)
    except MetadataError:  # no demo yet, or a store of another version: as configured
        return cfg
    if not isinstance(kept, str):
        return cfg
    refresh = json.loads(kept)
    return cfg.model_copy(update={"refresh": cfg.refresh.model_copy(update={
        "time_unit_s": float(refresh["time_unit_s"]),
        "bandwidth_pages_per_unit": int(refresh["bandwidth_pages_per_unit"])})})


def demo_storage(cfg: XyroConfig) -> XyroConfig:
    """``cfg`` with the demo's own database and warehouse, in ``demo/`` beside the configured
    database: the demo's loopback URLs stay out of the operator's store (``xyro --demo``
    points any command there)."""
    base = Path(cfg.storage.database).parent / "demo"
    return cfg.model_copy(update={"storage": cfg.storage.model_copy(update={
        "database": str(base / "xyro.db"), "warehouse_dir": str(base / "warehouse")})})


def demo_config(app: App, seeds: list[str], unit_s: float = DEMO_UNIT_S,
                bandwidth: int | None = None) -> XyroConfig:
    """The app's config with the web's seeds, loopback allowed, a short fetch deadline, a
    short time unit (planning every ``unit_s``, ranking every 3 units, sitemaps re-read
    every unit; simulated seconds) and ``bandwidth`` pages per unit (the demo gives a tenth
    of the web), on the demo's own store (:func:`demo_storage`)."""
    cfg = demo_storage(app.config)
    limits = cfg.crawler.limits
    deadline = min(limits.deadline_s, DEMO_DEADLINE_S)
    return cfg.model_copy(update={
        "seeds": tuple(seeds),
        "scope": cfg.scope.model_copy(update={"allow_private_addresses": True}),
        "crawler": cfg.crawler.model_copy(update={"limits": limits.model_copy(update={
            "deadline_s": deadline,
            "read_timeout_s": min(limits.read_timeout_s, deadline),
            "connect_timeout_s": min(limits.connect_timeout_s, deadline),
            "dns_timeout_s": min(limits.dns_timeout_s, deadline)})}),
        "refresh": cfg.refresh.model_copy(update={
            "time_unit_s": unit_s,
            "bandwidth_pages_per_unit": bandwidth or cfg.refresh.bandwidth_pages_per_unit}),
        "ranking": cfg.ranking.model_copy(update={"schedule_s": 3 * unit_s}),
        "publication": cfg.publication.model_copy(update={"refresh_s": unit_s}),
    })
