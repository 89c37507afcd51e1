"""The Prometheus endpoint of ``xyro run`` and ``xyro crawl`` (config section ``metrics``).

Read at scrape time, never pushed: a custom collector copies the figures the crawl keeps
anyway (:class:`~xyro.crawl.stats.CrawlStats`, the frontier's sizes, the host scheduler,
the metadata writer's batch totals, the daemon's last planner and ranking runs) when
Prometheus asks. The crawl's hot path does no metrics work beyond one latency bucket per
fetch, taken under the lock it already holds; scrapes run on prometheus-client's own server
threads and take each component's lock only long enough to copy a few numbers.

DESIGN.md §8: prometheus-client's server binds every interface unless told an address, so
it gets exactly ``metrics.listen`` (the config refuses a non-loopback one unless
``metrics.allow_non_loopback``); labels are small fixed sets (page type, status class,
error kind, priority), never a URL or a host. One :class:`CollectorRegistry` per endpoint,
never the library's global ``REGISTRY``: Xyro keeps no module-level state.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, \
    HistogramMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import CollectorRegistry

from xyro import __version__
from xyro.config import MetricsConfig
from xyro.crawl.frontier import LEVELS
from xyro.crawl.stats import FETCH_SECONDS_BUCKETS, StatsView
from xyro.config_load import ConfigError

if TYPE_CHECKING:  # the planner pulls in NumPy and the refresh package; `xyro crawl` needs neither
    from xyro.crawl.crawler import Crawler
    from xyro.jobs.plan_job import UnitFigures

log = logging.getLogger("xyro.service.metrics")

#: Outcomes of a periodic job run (the ``outcome`` label): done, skipped for a reason the
#: log gives (an empty database, a bad setting), or failed on an unexpected error.
JOB_OUTCOMES = ("ok", "skipped", "failed")


class JobFigures:
    """The daemon's last refresh-planner and ranking runs, kept for the next scrape.

    Written by the scheduler's job threads, read by scrapes: one lock, a few fields.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: Counter[tuple[str, str]] = Counter()
        self._unit: UnitFigures | None = None
        self._rank_seconds: float | None = None
        self._rounds: tuple[int, int, int, int] | None = None

    def planned(self, figures: UnitFigures | None) -> None:
        """A planner run finished (DESIGN.md §6): its unit's due/deferred pages and Ω(G)."""
        with self._lock:
            self._runs["plan", "ok"] += 1
            self._unit = figures or self._unit

    def ranked(self, seconds: float) -> None:
        """A ranking run finished (DESIGN.md §5) in ``seconds``."""
        with self._lock:
            self._runs["rank", "ok"] += 1
            self._rank_seconds = seconds

    def global_rounds(self, done: int, total: int, spent: int, budget: int) -> None:
        """The global PageRank estimate's progress: rounds done of ``total``, extra pages
        queued of ``budget`` (DESIGN.md §5)."""
        with self._lock:
            self._rounds = (done, total, spent, budget)

    def global_view(self) -> tuple[int, int, int, int] | None:
        with self._lock:
            return self._rounds

    def failed(self, job: str, outcome: str) -> None:
        """A ``plan`` or ``rank`` run ended ``skipped`` or ``failed``."""
        with self._lock:
            self._runs[job, outcome] += 1

    def view(self) -> tuple[dict[tuple[str, str], int], UnitFigures | None, float | None]:
        with self._lock:
            return dict(self._runs), self._unit, self._rank_seconds


class CrawlCollector:
    """A prometheus-client collector over live components (see the module docstring)."""

    def __init__(self) -> None:
        self._crawler: Crawler | None = None
        self._writer: Any = None
        self._jobs: JobFigures | None = None

    def watch(self, crawler: Crawler, writer: Any, jobs: JobFigures | None = None) -> None:
        """Report on these from the next scrape on (before: build info only)."""
        self._crawler, self._writer, self._jobs = crawler, writer, jobs

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily("xyro_build_info", "Xyro version; always 1.",
                                  labels=["version"])
        build.add_metric([__version__], 1.0)
        yield build
        crawler, writer, jobs = self._crawler, self._writer, self._jobs
        if crawler is not None:
            yield from _crawl_metrics(crawler.stats.view())
            yield from _queue_metrics(crawler)
        if writer is not None:
            yield from _writer_metrics(writer.stats)
        if jobs is not None:
            yield from _job_metrics(*jobs.view())
            yield from _global_metrics(jobs.global_view())


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _labelled(family: CounterMetricFamily | GaugeMetricFamily,
              values: dict[Any, int]) -> CounterMetricFamily | GaugeMetricFamily:
    for key, value in sorted(values.items()):
        family.add_metric([str(k) for k in (key if isinstance(key, tuple) else (key,))], value)
    return family


def _crawl_metrics(v: StatsView) -> Iterator[Metric]:
    yield _labelled(CounterMetricFamily(
        "xyro_pages_fetched_total", "Page records of the crawl (robots.txt refusals included, "
        "robots.txt fetches not), by page type and HTTP status class (none: no answer).",
        labels=["type", "status"]), v.pages_by_type_status)
    yield _labelled(CounterMetricFamily(
        "xyro_fetch_errors_total", "Pages that ended as ERROR, by error kind.",
        labels=["kind"]), v.errors)
    yield _counter("xyro_fetched_bytes_total", "Body bytes fetched, after decoding.", v.bytes)
    yield _counter("xyro_not_modified_total", "Conditional fetches answered 304.",
                   v.not_modified)
    yield _counter("xyro_robots_fetches_total", "robots.txt fetches.", v.robots_fetches)
    yield _counter("xyro_discovered_urls_total", "Links to URLs never seen before.",
                   v.discovered)
    yield _labelled(CounterMetricFamily(
        "xyro_refused_urls_total", "New URLs not queued, by reason (scope, trap, suffix).",
        labels=["reason"]), v.refused)
    cumulative, buckets = 0, []
    for bound, count in zip((*FETCH_SECONDS_BUCKETS, float("inf")), v.fetch_seconds_counts):
        cumulative += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
    yield HistogramMetricFamily(
        "xyro_fetch_duration_seconds", "Real seconds per page fetch, body and redirect "
        "hops included.", buckets=buckets, sum_value=v.fetch_seconds_sum)


def _queue_metrics(crawler: Crawler) -> Iterator[Metric]:
    snap = crawler.snapshot()
    by_level = snap["queued_by_priority"]
    yield _labelled(GaugeMetricFamily(
        "xyro_frontier_urls", "URLs queued in the frontier (delayed ones included), by "
        "priority: 0 loader, 1 urgent, 2 refresh, 3 discovery, 4 background.",
        labels=["priority"]), {level: by_level.get(level, 0) for level in range(LEVELS)})
    yield _gauge("xyro_frontier_hosts", "Hosts with URLs queued.", snap["hosts_waiting"])
    yield _gauge("xyro_hosts_waiting", "Hosts with work whose politeness delay, Retry-After "
                 "or back-off has not run out yet.",
                 crawler.frontier.hosts.waiting(crawler.clock.now()))
    yield _gauge("xyro_fetches_in_flight", "Fetches and loads handed to workers, not done.",
                 snap["in_flight"])
    yield _gauge("xyro_seen_urls", "URLs in the seen-set.", snap["seen_urls"])
    if "loader_pending" in snap:
        yield _gauge("xyro_loader_pending_documents", "XML documents waiting for their DTDs "
                     "or external entities.", snap["loader_pending"])
        yield _labelled(CounterMetricFamily(
            "xyro_loader_dtd_loads", "DTD and external entity loads, by source: catalog (an "
            "XML catalog's local file), cache (fetched earlier), web (fetched for the loader).",
            labels=["source"]), snap["loader_dtd_sources"])
    budget = snap.get("budget")
    if budget is not None and budget.get("unit") is not None:
        yield _gauge("xyro_unit_budget_pages", "G: page fetches allowed in a time unit.",
                     budget["bandwidth"])
        yield _labelled(GaugeMetricFamily(
            "xyro_unit_fetched_pages", "Page fetches spent in the current time unit, by "
            "share: refresh (due pages), discovery (unread pages), urgent (seeds, operator, "
            "sitemaps).", labels=["share"]),
            {k: budget[k] for k in ("refresh", "discovery", "urgent")})
        if budget.get("previous_carried_over") is not None:
            yield _gauge("xyro_unit_carried_over_pages", "Due pages the last ended unit left "
                         "queued for the next.", budget["previous_carried_over"])
    pub = snap.get("publication")
    if pub is None:  # a crawler stand-in without the publication channel
        return
    yield _gauge("xyro_publication_listed_urls", "URLs with a date from a sitemap or feed.",
                 pub["listed_urls"])
    yield _gauge("xyro_publication_trusted_sources", "Sitemaps and feeds whose dates are "
                 "believed as change dates.", pub["trusted_sources"])
    yield _labelled(CounterMetricFamily(
        "xyro_publication_judged", "Fetch intervals judged against a published date, by "
        "outcome.", labels=["outcome"]),
        {k: v for k, v in pub.items() if k not in ("sources", "read", "listed_urls",
                                                   "trusted_sources")})


def _writer_metrics(stats: dict[str, Any]) -> Iterator[Metric]:
    # The writer keeps totals (DESIGN.md §4: one thread, batched transactions): summaries
    # without quantiles; rate(_sum)/rate(_count) is the mean batch size and commit time.
    yield SummaryMetricFamily("xyro_writer_batch_size", "Metadata ops per committed batch.",
                              count_value=stats["batches"], sum_value=stats["ops_written"])
    yield SummaryMetricFamily("xyro_writer_batch_seconds", "Seconds per batch transaction "
                              "(apply and commit).", count_value=stats["batches"],
                              sum_value=stats["busy_seconds"])
    yield _gauge("xyro_writer_last_batch_seconds", "Seconds the last batch took.",
                 stats["last_batch_seconds"])
    yield _gauge("xyro_writer_queue_ops", "Ops waiting for the writer.", stats["queue_size"])
    yield _gauge("xyro_writer_failed", "1 once a batch failed (the writer stopped).",
                 float(stats["failed"]))


def _job_metrics(runs: dict[tuple[str, str], int], unit: UnitFigures | None,
                 rank_seconds: float | None) -> Iterator[Metric]:
    for job, what in (("plan", "refresh-planner"), ("rank", "ranking")):
        yield _labelled(CounterMetricFamily(
            f"xyro_{job}_job_runs_total", f"Runs of the {what} job, by outcome.",
            labels=["outcome"]), {o: runs.get((job, o), 0) for o in JOB_OUTCOMES})
    if rank_seconds is not None:
        yield _gauge("xyro_rank_job_duration_seconds", "Seconds the last ranking (direct "
                     "importance and interest) took to solve.", rank_seconds)
    if unit is None:
        return
    yield _gauge("xyro_planner_unit", "Time unit (refresh folder) last planned.", unit.unit)
    yield _gauge("xyro_planner_planned_pages", "Pages in the last plan.", unit.planned)
    yield _gauge("xyro_planner_due_pages", "Pages due (refresh) queued by the last unit.",
                 unit.due)
    yield _gauge("xyro_planner_discovery_pages", "Unread pages queued by the last unit.",
                 unit.discovery)
    yield _gauge("xyro_planner_deferred_pages", "Due pages the last unit deferred to the "
                 "next (over the bandwidth G).", unit.deferred)
    yield _gauge("xyro_planner_ahead_pages", "Pages of later folders the last unit queued "
                 "to spend the part of G its due and unread pages left.", unit.ahead)
    yield _gauge("xyro_planner_predicted_obsolescence", "Predicted Omega(G) of the last plan "
                 "(unclamped optimum, DESIGN.md section 6).", unit.omega_g)
    yield _gauge("xyro_planner_plan_obsolescence", "Time-average obsolescence of the last "
                 "plan with its interval clamps.", unit.omega_plan)
    yield _gauge("xyro_plan_job_duration_seconds", "Seconds the last planner run took.",
                 unit.seconds)


def _global_metrics(rounds: tuple[int, int, int, int] | None) -> Iterator[Metric]:
    if rounds is None:
        return
    done, total, spent, budget = rounds
    yield _gauge("xyro_global_estimate_rounds_done", "Rounds of the global PageRank "
                 "estimate whose pages were queued.", done)
    yield _gauge("xyro_global_estimate_rounds", "Rounds the global PageRank estimate "
                 "plans (0 until the scope settles).", total)
    yield _gauge("xyro_global_estimate_extra_pages", "Out-of-scope pages the global "
                 "PageRank estimate queued for their links.", spent)
    yield _gauge("xyro_global_estimate_budget_pages", "Out-of-scope pages the global "
                 "PageRank estimate may fetch.", budget)


class MetricsEndpoint:
    """``/metrics`` of one crawl process; binds in :meth:`start` only if ``listen`` is set.

    Use as a context manager: the server stops on exit. ``port`` and ``url`` give the bound
    address (port 0 in the config takes a free one); both are None while off.
    """

    def __init__(self, config: MetricsConfig) -> None:
        self._config = config
        self.collector = CrawlCollector()
        self.registry = CollectorRegistry(support_collectors_without_names=True)
        self.registry.register(self.collector)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        return None if self._server is None else int(self._server.server_address[1])

    @property
    def url(self) -> str | None:
        address = self._config.address
        if self._server is None or address is None:
            return None
        host = f"[{address[0]}]" if ":" in address[0] else address[0]
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsEndpoint:
        address = self._config.address
        if address is None:
            return self  # off: no socket at all
        try:
            # addr is always given: the library's default is 0.0.0.0 (DESIGN.md §8).
            self._server, self._thread = start_http_server(
                address[1], addr=address[0], registry=self.registry)
        except OSError as exc:
            advice = ("another process listens there: stop it or choose another port"
                      if exc.errno == errno.EADDRINUSE else
                      "under systemd, SocketBindAllow= in the unit must allow its port")
            # A restart meets the same port: exit 2 (systemd's RestartPreventExitStatus).
            raise ConfigError(f"cannot serve metrics on {self._config.listen}: "
                              f"{exc.strerror or exc}; {advice}", key="metrics.listen") from None
        self._thread.name = "xyro-metrics"
        log.info("metrics on %s", self.url)
        return self

    def watch(self, crawler: Crawler, writer: Any, jobs: JobFigures | None = None) -> None:
        """Report on this crawler and writer (and the daemon's jobs) from now on."""
        self.collector.watch(crawler, writer, jobs)

    def close(self) -> None:
        """Stop serving and close the socket; idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(config: MetricsConfig) -> MetricsEndpoint:
    """The endpoint, started (or off): ``with serve_metrics(cfg.metrics) as metrics: ...``."""
    return MetricsEndpoint(config).start()
