"""``xyro run``: the daemon. Crawls without end; ranks and reports on a schedule.

The crawl engine runs in the main thread and never stops on an empty frontier (the periodic
jobs and SIGHUP may add work). APScheduler 3 (a BackgroundScheduler in UTC, coalescing,
one instance per job) runs the refresh planner once per time unit (its due folder goes
into the live frontier), the ranking job every ``ranking.schedule_s``, a re-read of every
known sitemap and feed every ``publication.refresh_s`` (paper 003 §3), and a status job
that publishes the crawl counters to the database (``xyro status``) and to systemd
(``STATUS=``). Schedules run on the wall clock; with an accelerated clock their intervals
are divided by its speed so that they keep their place on the simulated time line. The
ranking and the re-read count their period from their last run, by this daemon or an
earlier one (a ``rank`` row of ``job_runs``, the :data:`PUBLICATION_KEY` state): a daemon
restarted more often than the period still runs them.

Signals: SIGTERM/SIGINT stop (in-flight fetches end or go back, the writer flushes, exit 0);
SIGHUP re-reads the configuration file: new seeds are queued, the log level changes, and
keys that need a restart are named in the log.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timedelta, timezone
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from metadata import JobRun, MetadataStore, SetState
from xyro.app import App, CrawlParts, build_crawler, prune_warehouse, scope_seeds
from xyro.clock import unit_index
from xyro.config import XyroConfig
from xyro.crawl.activity import SummaryLine
from xyro.crawl.admission import Source
from xyro.crawl.frontier import DISCOVERY
from xyro.crawl.crawler import CrawlSummary
from xyro.errors import AccessError, XyroError
from xyro.jobs.global_round import GlobalRounds
from xyro.jobs.global_stored import config_scope
from xyro.jobs.plan_job import RefreshPlanner
from xyro.jobs.plan_settings import PlannerSettings
from xyro.jobs.rank_run import rank_store
from xyro.net.urls import canonicalize
from xyro.service.crawl_lock import CrawlLock
from xyro.service.crawl_run import (SEED_POLL_S, queue_seeds, queue_sitemaps,
                                    queue_stored_seeds, restore_frontier, warn_unbounded)
from xyro.service.logs import setup_logging
from xyro.service.metrics import JobFigures, MetricsEndpoint
from xyro.service.sdnotify import Notifier
from xyro.service.signals import handle_signals

log = logging.getLogger("xyro.service.daemon")

#: The state key of the running daemon's crawl counters (``xyro status``: live crawl).
LIVE_KEY = "crawl.live"
#: The state key of the last re-read of the known sitemaps and feeds (crawl clock seconds).
PUBLICATION_KEY = "publication.last_reread"
#: Real seconds after the start for a ranking or re-read whose time came while no daemon
#: ran: the crawl starts first.
CATCH_UP_AFTER_S = 1.0
STATUS_INTERVAL_S = 10.0  # real seconds between status publications
PLAN_AFTER_UNIT_START_S = 0.02  # real seconds: scheduler jitter, so plans see their unit
#: Old versions are pruned once a time unit, at most this often (real seconds)...
PRUNE_EVERY_MIN_S = 60.0
#: ...keeping the blobs written in the last PRUNE_GRACE_S real seconds, whose version rows
#: may not be committed yet (xyro.app.prune_warehouse).
PRUNE_GRACE_S = 600.0

IDLE_HINT = ("waiting for the refresh planner's next time unit (refresh.time_unit_s) or for "
             "new seeds (`xyro seed URL...`, or the `seeds` key then `systemctl reload "
             "xyro`)")


class _Stopped(Exception):
    """Raised inside a long job when the daemon is stopping."""


class Daemon:
    """Builds everything from the app's config and runs until stopped."""

    def __init__(self, app: App, notifier: Notifier,
                 reload_config: Callable[[], XyroConfig] | None = None) -> None:
        self.app = app
        self.notifier = notifier
        self._reload_config = reload_config
        self._applied = app.config  # seeds, sitemaps and log as of the last reload
        self.stop = threading.Event()
        self._reload = threading.Event()
        self._parts: CrawlParts | None = None
        self._store: MetadataStore | None = None
        self.jobs = JobFigures()  # last planner/ranking runs, for /metrics
        self.metrics = MetricsEndpoint(app.config.metrics)  # bound in run(): .port, .url
        self._summary = SummaryLine()
        self._due_this_unit: int | None = None
        self._rounds: GlobalRounds | None = None  # the global PageRank estimate, if enabled
        self._seed_id = 0  # the last row of the seeds table queued (xyro.service.seeding)
        self.last_summary: CrawlSummary | None = None

    # -- lifecycle -------------------------------------------------------------------

    def run(self, max_pages: int | None = None, max_seconds: float | None = None) -> str:
        """Run until stopped, or until ``max_pages`` fetches or ``max_seconds`` of clock time
        (``xyro demo`` bounds its run so); returns why the crawl loop ended."""
        started = self.app.clock.now()
        with self.app.open_store(create=True) as store, CrawlLock(self.app.database_path), \
                self.metrics.start():
            self._store = store
            self._parts = parts = build_crawler(self.app, store, budget=True)
            self.metrics.watch(parts.crawler, parts.writer, self.jobs)
            self._rounds = self._global_rounds(store, parts)
            scheduler = self._scheduler()
            try:
                self._clear_live()  # until this run's first publication
                self.notifier.status("restoring the persisted frontier")
                resumed = restore_frontier(
                    store, parts.crawler, self.app.config.scope.allow_private_addresses,
                    self._rounds.state.pending_urls if self._rounds else frozenset(),
                    self.stop)
                if self._rounds is not None:
                    self._rounds.resume()
                warn_unbounded(parts.crawler.frontier)
                seeded = self._add_seeds(self.app.config.seeds)
                seeded += self._stored_seeds()
                seeded += queue_sitemaps(parts.crawler, self.app.config.sitemaps)
                if self.stop.is_set():  # a SIGTERM while starting: no crawl, no jobs
                    log.info("stop requested while starting: the crawl does not start")
                    return "stop requested"
                log.info("daemon ready: %d queued URLs resumed, %d new seeds", resumed, seeded)
                scheduler.start()
                self.notifier.ready(f"crawling; {resumed + seeded} URLs queued")
                summary = parts.crawler.run(max_pages, max_seconds, stop=self.stop,
                                            until_exhausted=False)
                self.last_summary = summary
                log.info("crawl loop ended: %s", summary.stop_reason)
            finally:
                self.notifier.stopping()
                self.stop.set()
                if scheduler.running:
                    scheduler.shutdown(wait=True)
                self._summary_job()
                self._publish(final=True)
                fatal = parts.crawler.fatal
                parts.writer.submit(JobRun("daemon", started, self.app.clock.now(),
                                           "error" if fatal else "ok", fatal or "stopped"))
                parts.close()
                self._parts = self._store = self._rounds = None
        if fatal:
            raise AccessError(f"the crawl stopped: {fatal}")
        return self.last_summary.stop_reason if self.last_summary else "stopped"

    def snapshot(self) -> dict[str, Any] | None:
        """The live crawl counters plus the planner's due count, or None when not running."""
        parts = self._parts
        if parts is None:
            return None
        unit = self.jobs.view()[1]
        planned = {} if unit is None else {"unit": unit.unit, "omega_g": unit.omega_g,
                                           "omega_plan": unit.omega_plan}
        return {**parts.crawler.snapshot(), "due_this_unit": self._due_this_unit, **planned}

    def signals(self) -> AbstractContextManager[object]:
        """SIGTERM/SIGINT stop (a second one exits at once), SIGHUP reloads; the previous
        handlers come back when the block ends (:mod:`xyro.service.signals`; main thread only)."""
        return handle_signals(self.stop, self._reload)

    # -- the schedule ----------------------------------------------------------------

    def _scheduler(self) -> BackgroundScheduler:
        scale = float(getattr(self.app.clock, "speed", 1.0))
        scheduler = BackgroundScheduler(timezone="UTC", job_defaults={
            "coalesce": True, "max_instances": 1, "misfire_grace_time": 3600})
        last_rank, last_reread, fresh = self._last_runs()
        rank_s = self.app.config.ranking.schedule_s
        scheduler.add_job(self._rank_job, "interval", id="rank",
                          seconds=max(1.0, rank_s / scale),
                          next_run_time=self._first_run(last_rank, rank_s, scale, fresh))
        scheduler.add_job(self._plan_job, id="plan-now")  # no trigger: once, at start
        # Each unit's plan at the start of the unit (just after it, so the planner's clock is
        # in the new unit): the unit's fetch budget waits for its due pages (UnitBudget).
        unit_s = self.app.config.refresh.time_unit_s
        now = self.app.clock.now()
        to_next = ((unit_index(now, unit_s) + 1) * unit_s - now) / scale
        scheduler.add_job(self._plan_job, "interval", id="plan",
                          seconds=max(1.0, unit_s / scale),
                          start_date=datetime.now(timezone.utc)
                          + timedelta(seconds=to_next + PLAN_AFTER_UNIT_START_S))
        if self._rounds is not None:
            scheduler.add_job(self._global_round_job, "interval", id="global-estimate",
                              seconds=max(1.0, self.app.config.ranking.global_estimate
                                          .check_interval_s / scale))
        scheduler.add_job(self._prune_job, "interval", id="prune",
                          seconds=max(PRUNE_EVERY_MIN_S, unit_s / scale))
        reread_s = self.app.config.publication.refresh_s
        scheduler.add_job(self._publication_job, "interval", id="publication",
                          seconds=max(1.0, reread_s / scale),
                          next_run_time=self._first_run(last_reread, reread_s, scale, fresh))
        scheduler.add_job(self._status_job, "interval", id="status", seconds=STATUS_INTERVAL_S)
        scheduler.add_job(self._summary_job, "interval", id="summary",
                          seconds=self.app.config.log.summary_interval_s)
        scheduler.add_job(self._reload_job, "interval", id="reload", seconds=1.0)
        scheduler.add_job(self._seeds_job, "interval", id="seeds", seconds=SEED_POLL_S)
        scheduler.add_job(self._idle_job, "interval", id="idle", seconds=1.0)
        return scheduler

    def _last_runs(self) -> tuple[float | None, float | None, bool]:
        """(when the last ranking finished, when the known sitemaps and feeds were last
        re-read, whether the database holds no URL yet), from the store."""
        assert self._store is not None
        conn = self._store.read_connection()
        try:
            # Newest first by rowid: stops at the last ranking, however many runs of other jobs.
            row = conn.execute("SELECT finished FROM job_runs WHERE name = 'rank' AND "
                               "finished IS NOT NULL ORDER BY id DESC LIMIT 1").fetchone()
            fresh = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM urls)").fetchone()[0]
        finally:
            conn.close()
        reread = self._store.get_state(PUBLICATION_KEY)
        return (None if row is None else float(row[0]),
                float(reread) if isinstance(reread, (int, float)) else None, bool(fresh))

    def _first_run(self, last: float | None, every_s: float, scale: float,
                   fresh: bool) -> datetime:
        """When a job run every ``every_s`` clock seconds first runs: a period after its last
        run, which an earlier daemon may have made (APScheduler counts from the start, so a
        daemon restarted more often than the period never ran it); soon after the start when
        that time has passed or no run is recorded. A new database has nothing to catch up
        on: a period after the start."""
        if last is None:
            wait = every_s if fresh else 0.0
        else:  # a last run ahead of the clock (set back since): one period, not more
            wait = min(every_s, last + every_s - self.app.clock.now())
        return datetime.now(timezone.utc) + timedelta(seconds=max(CATCH_UP_AFTER_S,
                                                                  wait / scale))

    def _stop_check(self) -> None:
        """The long jobs' stop check: raises :class:`_Stopped` once the daemon stops."""
        if self.stop.is_set():
            raise _Stopped

    def _rank_job(self) -> None:
        """Rank the stored graph. On a stop the run is abandoned within about one step of
        its work (a millisecond of SQLite scan, a chunk, a slice, a sweep, a committed piece
        of the write-back: ``check_stop`` all along :func:`rank_store`), so the shutdown,
        which waits for the running jobs and then for the writer, stays short."""
        assert self._store is not None and self._parts is not None
        if self.stop.is_set():  # fired while the daemon was stopping: not worth starting
            return
        log.info("ranking started")
        with self._job_outcome("rank", "ranking"):
            writer = self._parts.writer
            try:
                summary = rank_store(self.app, self._store, writer.submit,
                                     check_stop=self._stop_check, flush=writer.flush)
            except _Stopped:
                log.info("ranking interrupted: the daemon is stopping")
                return
            log.info("ranked %d pages, %d links in %.1f s", summary.pages, summary.links,
                     summary.report.seconds)
            self.jobs.ranked(summary.report.seconds)

    @contextmanager
    def _job_outcome(self, job: str, what: str) -> Iterator[None]:
        """A scheduled job's failure is logged and counted (``/metrics``), never raised: it
        must not stop the crawl. ``job``: the metrics label; ``what``: its name in logs."""
        try:
            yield
        except (XyroError, ValueError) as exc:
            log.warning("%s skipped: %s", what, exc)
            self.jobs.failed(job, "skipped")
        except Exception:
            log.exception("%s failed", what)
            self.jobs.failed(job, "failed")

    def _global_rounds(self, store: MetadataStore, parts: CrawlParts) -> GlobalRounds | None:
        """The global PageRank estimate's rounds (``ranking.global_estimate``), continuing
        the saved ones; None when disabled."""
        cfg = self.app.config
        if not cfg.ranking.global_estimate.enabled:
            return None
        frontier = parts.crawler.frontier

        def queue(pages: list[tuple[int, str]]) -> list[tuple[int, str]]:
            sub = frontier.submit(Source.GLOBAL_ESTIMATE, [u for _, u in pages], DISCOVERY)
            refused = {offer.url for offer, _ in sub.refused}
            return [p for p in pages if p[1] not in refused]

        scope = config_scope(cfg, scope_seeds(self.app, store))
        return GlobalRounds(cfg.ranking.global_estimate, cfg.ranking.damping, scope, store,
                            queue, parts.writer.submit, self.app.clock)

    def _global_round_job(self) -> None:
        """One check of the global PageRank estimate (:mod:`xyro.jobs.global_round`)."""
        if self._rounds is None or self.stop.is_set():
            return
        with self._job_outcome("global_estimate", "global estimate round"):
            state = self._rounds.step()
            self.jobs.global_rounds(state.round, state.rounds, state.spent, state.budget)

    def _plan_job(self) -> None:
        """Each time unit: estimate rates, re-file pages, and queue the due folder (§6).
        Then, planned or not, the unit's budget stops holding unread pages back for due ones
        still to come (:meth:`UnitBudget.planned`)."""
        assert self._store is not None and self._parts is not None
        if self.stop.is_set():  # a SIGTERM during a long start: no full scan before exiting
            return
        budget = self._parts.crawler.budget
        unit = unit_index(self.app.clock.now(), self.app.config.refresh.time_unit_s)
        try:
            self._plan_unit()
        finally:
            if budget is not None:
                budget.planned(unit)

    def _plan_unit(self) -> None:
        assert self._store is not None and self._parts is not None
        conn = self._store.read_connection()
        try:
            planner = RefreshPlanner(conn, self._parts.writer.submit, self.app.clock,
                                     PlannerSettings.from_config(self.app.config.refresh))
            due = planner.run_unit()
        except (XyroError, ValueError) as exc:
            log.warning("refresh planning skipped: %s", exc)
            self.jobs.failed("plan", "skipped")
            return
        except Exception:  # a job failure must not stop the crawl
            log.exception("refresh planning failed")
            self.jobs.failed("plan", "failed")
            return
        finally:
            conn.close()
        queued, refused = self._queue_planned(planner.offers(due))
        self.jobs.planned(planner.last_unit)
        # The due pages alone: the fetch list also holds the unit's unread pages and the
        # pages read ahead of their due time.
        last = planner.last_unit
        self._due_this_unit = last.due if last is not None else None
        log.info("refresh unit planned: %d pages queued%s", queued,
                 f", {refused} refused by the admission" if refused else "")

    def _queue_planned(self, by_priority: dict[int, list[tuple[str, int]]]) -> tuple[int, int]:
        """The unit's pages into the live frontier, through its admission with their stored
        depths; returns (queued or queued already, refused)."""
        assert self._parts is not None
        queued = refused = 0
        for priority, items in by_priority.items():
            sub = self._parts.crawler.frontier.submit(Source.REFRESH, items, priority)
            queued += len(sub.queued) + sub.known
            refused += len(sub.refused)
        return queued, refused

    def _prune_job(self) -> None:
        """Versions beyond ``loader.versions_per_url`` and their blobs, while running (a
        crawl prunes at its clean stop, which a daemon may never reach)."""
        parts, store = self._parts, self._store
        if parts is None or store is None or parts.crawler.loader is None:
            return
        removed = prune_warehouse(store, parts.crawler.loader.warehouse,
                                  parts.versions_per_url, grace_s=PRUNE_GRACE_S)
        if removed:
            log.info("warehouse pruned: %d blob(s) of versions beyond "
                     "loader.versions_per_url removed", removed)

    def _publication_job(self) -> None:
        """Re-read every known sitemap and feed: their pages and dates may have moved."""
        assert self._parts is not None
        crawler = self._parts.crawler
        now = self.app.clock.now()
        sub = crawler.publication.reread(crawler.frontier, now)
        self._parts.writer.submit(SetState(PUBLICATION_KEY, now))  # a restart counts from it
        log.info("publication sources queued for a re-read: %d", len(sub.queued) + sub.known)

    def _status_job(self) -> None:
        self._publish(final=False)
        budget = self._parts.crawler.budget if self._parts is not None else None
        if budget is not None:  # the running unit's count survives a crash (UnitBudget.resume)
            budget.record(self.app.clock.now())

    def _idle_job(self) -> None:
        if self._parts is not None:
            self._summary.watch_idle(self._parts.crawler.snapshot(), IDLE_HINT)

    def _summary_job(self) -> None:
        if self._parts is not None:
            self._summary.emit(self._parts.crawler.snapshot(), self._due_this_unit)

    def _publish(self, final: bool) -> None:
        if self._parts is None:
            return
        # updated_at (crawl clock): lets `xyro status` tell a live snapshot from a stale one.
        snap = {**self._parts.crawler.snapshot(), "updated_at": self.app.clock.now()}
        key = "crawl.last_run" if final else LIVE_KEY
        self._parts.writer.submit(SetState(key, json.dumps(snap, default=str)))
        if final:  # the crawl is over: no live crawl for `xyro status` to show
            self._clear_live()
        self.notifier.status(f"{snap['pages']} pages, {snap['pages_per_s']} pages/s, "
                             f"{snap['queued']} queued, "
                             f"{sum(snap['errors_by_kind'].values())} errors")

    def _clear_live(self) -> None:
        """Empty ``crawl.live`` (null, which `xyro status` shows as none published): a
        previous run's counters are not this daemon's live crawl."""
        if self._parts is not None:
            self._parts.writer.submit(SetState(LIVE_KEY, None))

    def _reload_job(self) -> None:
        """SIGHUP: re-read the configuration, apply it, and tell systemd how that went. Its
        READY=1 after RELOADING=1 is sent whatever happens: without it the unit stays
        "reloading" and `systemctl reload` waits for its timeout."""
        if not self._reload.is_set() or self._reload_config is None:
            return
        self._reload.clear()
        self.notifier.notify(reloading=1)
        status = "reload failed: see the log"  # _apply raised (a bug): APScheduler logs it
        try:
            try:
                new = self._reload_config()
            except Exception as exc:  # a bad file keeps the crawl running as it was
                expected = isinstance(exc, XyroError)  # a config error; anything else: a bug
                reason = str(exc) if expected else f"{type(exc).__name__}: {exc}"
                log.error("reload refused, keeping the running configuration: %s", reason,
                          exc_info=not expected)
                status = "reload refused: " + " ".join(reason.split())  # one STATUS= line
                return
            self._apply(new)
            status = "configuration reloaded"
        finally:
            self.notifier.ready(status)

    def _apply(self, new: XyroConfig) -> None:
        """Seeds, sitemaps and log level take effect now (new ones: against the last reload,
        so a second SIGHUP does not offer them again); other sections changed since the
        start are named for a restart."""
        old, running = self._applied, self.app.config
        setup_logging(new.log.level, new.log.format)
        added = self._add_seeds(s for s in new.seeds if s not in old.seeds)
        if self._parts is not None:
            added += queue_sitemaps(self._parts.crawler,
                                    [s for s in new.sitemaps if s not in old.sitemaps])
        self._applied = new
        changed = [k for k in type(new).model_fields if k not in ("seeds", "sitemaps", "log")
                   and getattr(new, k) != getattr(running, k)]
        # The log's level and form apply now; its intervals are set in jobs built at start.
        changed += [f"log.{k}" for k in type(new.log).model_fields if k not in ("level", "format")
                    and getattr(new.log, k) != getattr(running.log, k)]
        log.info("reloaded: %d new seeds queued, log level %s%s", added, new.log.level,
                 f"; restart to apply: {', '.join(changed)}" if changed else "")

    def _seeds_job(self) -> None:
        """Queue the seeds ``xyro seed`` stored while the daemon runs (its rows only: the
        daemon's writer owns the URL and frontier tables, :mod:`xyro.service.seeding`)."""
        if self._store is None or self.stop.is_set():
            return
        added = self._stored_seeds(Source.OPERATOR)  # a known URL too, as `xyro seed` asked
        if added:
            log.info("%d seeds added with `xyro seed` queued", added)

    def _stored_seeds(self, source: Source = Source.SEED) -> int:
        assert self._store is not None and self._parts is not None
        queued, self._seed_id = queue_stored_seeds(self._store, self._parts.crawler.frontier,
                                                   self._seed_id, source)
        return queued

    def _add_seeds(self, seeds: Any) -> int:
        """Queue seeds (at start, or new ones on reload); a scope derived from the seeds
        ("the hosts of the seeds") grows with them."""
        assert self._parts is not None
        seeds = [c for c in map(canonicalize, seeds) if c is not None]
        frontier = self._parts.crawler.frontier
        frontier.admission.add_seeds(seeds)
        return queue_seeds(frontier, seeds)
