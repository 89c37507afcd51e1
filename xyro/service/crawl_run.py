"""One crawl session over the metadata store: restore, seed, run, record (``xyro crawl``).

SIGTERM and SIGINT set the stop event: the engine stops dispatching, in-flight fetches end
or are given back, the writer flushes, and the run returns normally (exit code 0).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from itertools import groupby
from typing import Any

from metadata import JobRun, MetadataStore, SetState, crawl_queries
from xyro.app import App, CrawlParts, build_crawler
from xyro.crawl.activity import refused_private
from xyro.crawl.admission import Source
from xyro.crawl.crawler import Crawler, CrawlSummary
from xyro.crawl.frontier import DISCOVERY, URGENT, Frontier
from xyro.errors import AccessError, UsageError
from xyro.net.urls import canonicalize
from xyro.service.crawl_lock import CrawlLock
from xyro.service.metrics import serve_metrics
from xyro.service.signals import handle_signals

log = logging.getLogger("xyro.crawl")

#: Frontier priority of seeds and configured start URLs.
SEED_PRIORITY = URGENT
#: How often the daemon reads the seeds ``xyro seed`` adds while it runs (real seconds).
SEED_POLL_S = 2.0
#: How far back a start looks for each host's last request: its delay (or Crawl-delay,
#: capped far below this) counts from there, so a restart never comes sooner.
POLITENESS_MEMORY_S = 86_400.0
#: URLs restored between two progress lines (a multiple of the restore's chunk).
RESTORE_LOG_EVERY = 1_000_000


def run_crawl(app: App, *, max_pages: int | None = None, max_seconds: float | None = None,
              stop: threading.Event | None = None, enforce_politeness: bool = True,
              on_progress: Callable[[dict[str, Any]], None] | None = None,
              customize: Callable[[CrawlParts], None] | None = None,
              getaddrinfo: Callable[..., Any] | None = None) -> CrawlSummary:
    """Resume the persisted frontier, add the configured seeds, crawl, and record the run.

    ``customize`` may adjust the wired parts before the run (tests switch rules off this way
    to show that the checks would catch a crawler without them); ``getaddrinfo`` replaces
    the system resolver (tests fence the crawl in to 127.0.0.1 with it).
    """
    stop = stop or threading.Event()
    started = app.clock.now()
    # Signals stop the start too (a restore of millions of queued URLs takes minutes).
    with handle_signals(stop), app.open_store() as store, CrawlLock(app.database_path), \
            serve_metrics(app.config.metrics) as metrics:
        parts = build_crawler(app, store, enforce_politeness=enforce_politeness,
                              getaddrinfo=getaddrinfo)
        metrics.watch(parts.crawler, parts.writer)
        try:
            crawler = parts.crawler
            if customize is not None:
                customize(parts)
            resumed = restore_frontier(store, crawler,
                                       app.config.scope.allow_private_addresses, stop=stop)
            seeded = queue_seeds(crawler.frontier, app.config.seeds)
            seeded += queue_stored_seeds(store, crawler.frontier)[0]
            seeded += queue_sitemaps(crawler, app.config.sitemaps)
            if resumed + seeded == 0:
                _nothing_queued(store, crawler, bool(app.config.seeds))
            warn_unbounded(crawler.frontier)
            log.info("crawl starting: %d queued URLs resumed, %d new seeds, %d workers",
                     resumed, seeded, app.config.crawler.workers)
            summary = crawler.run(max_pages, max_seconds, stop, on_progress)
            parts.writer.submit(SetState("crawl.last_run", json.dumps(summary.stats)))
            parts.writer.submit(JobRun("crawl", started, app.clock.now(),
                                       "error" if crawler.fatal else "ok", summary.stop_reason))
        finally:
            parts.close()
    if crawler.fatal:
        raise AccessError(f"the crawl stopped: {crawler.fatal}")
    log.info("crawl finished (%s): %s", summary.stop_reason,
             crawler.stats.progress_line(summary.stats.get("queued", 0)))
    return summary


def queue_seeds(frontier: Frontier, seeds: Iterable[str], priority: int = SEED_PRIORITY,
                source: Source = Source.SEED) -> int:
    """Offer seeds to the frontier (``Source.SEED``: known ones are skipped, seeds are re-read
    on every start; ``Source.OPERATOR``: queued even if known); refused ones are named in
    the log. Returns how many were queued."""
    canonical = [c for c in map(canonicalize, seeds) if c is not None]
    submitted = frontier.submit(source, canonical, priority)
    for offer, refusal in submitted.refused:
        log.warning("seed %s refused (%s); check the scope keys of the configuration",
                    offer.url, refusal)
    return len(submitted.queued)


def queue_stored_seeds(store: MetadataStore, frontier: Frontier, after_id: int = 0,
                       source: Source = Source.SEED) -> tuple[int, int]:
    """Queue the seeds stored with an id above ``after_id`` (their hosts join a scope derived
    from the seeds; ``source``: :func:`queue_seeds`, and with ``Source.OPERATOR``, while a
    crawl runs, the seeds it found itself are not queued again). Returns (URLs queued, the
    last id read)."""
    rows = store.seeds(after_id)
    if not rows:
        return 0, after_id
    frontier.admission.add_seeds([r.url for r in rows if r.redirected_from is None])
    frontier.admission.add_found([r.url for r in rows if r.redirected_from is not None])
    last_id = rows[-1].id
    if source is not Source.SEED:  # those a running crawl found (a seed's redirect) it queued
        rows = [r for r in rows if r.redirected_from is None]
    queued = 0
    for priority, group in groupby(sorted(rows, key=lambda r: r.priority),
                                   key=lambda r: r.priority):
        queued += queue_seeds(frontier, [r.url for r in group], priority, source)
    return queued, last_id


def warn_unbounded(frontier: Frontier) -> None:
    """One warning when the scope is derived from seeds and there is none at all."""
    if frontier.admission.scope.unbounded:
        log.warning("scope.allowed_domains is empty and no seed is known (the seeds and "
                    "sitemaps keys, `xyro seed`), so every host is in scope: add seeds "
                    "with `xyro seed URL...` or set scope.allowed_domains")


def queue_sitemaps(crawler: Crawler, sitemaps: Iterable[str]) -> int:
    """Offer the configured sitemaps (the ``sitemaps`` key) to the frontier as publication
    sources (paper 003 §3); known ones are skipped and re-read on the daemon's schedule.
    Returns how many were queued."""
    canonical = [c for c in map(canonicalize, sitemaps) if c is not None]
    if not canonical:
        return 0
    submitted = crawler.publication.offer(crawler.frontier, canonical)
    for offer, refusal in submitted.refused:
        log.warning("sitemap %s refused (%s); check the scope keys of the configuration",
                    offer.url, refusal)
    return len(submitted.queued)


def _nothing_queued(store: MetadataStore, crawler: Any, has_seeds: bool) -> None:
    """An empty frontier at the start: an error on a new database, a hint on an old one."""
    hint = ("add start URLs with `xyro seed URL...` or the `seeds` config key, or queue "
            "due refreshes with `xyro plan --run`")
    if not has_seeds and len(crawler.seen) == 0:
        raise UsageError(f"nothing to crawl: {store.path} knows no URL and the configuration "
                         f"has no seeds; {hint}")
    log.warning("nothing to crawl: the frontier in %s is empty and every seed is known "
                "already; %s", store.path, hint)


def restore_frontier(store: MetadataStore, crawler: Any, allow_private: bool = True,
                     links_only: frozenset[str] = frozenset(),
                     stop: threading.Event | None = None) -> int:
    """Seen-set from every known URL, frontier from the persisted rows, each host's last
    request (the delays count from there); returns rows queued.
    ``links_only``: the URLs the global PageRank estimate queued (restored as its own);
    ``stop`` set ends the restore early (the rest stays in the store's frontier).

    With ``allow_private`` off, queued URLs on private or loopback IP literals (what a demo
    leaves behind) are named in one warning: each would otherwise end silently as an
    ``address`` ERROR record.
    """
    conn = store.read_connection()
    try:
        now = crawler.clock.now()
        hosts = crawler.frontier.hosts
        recent = crawl_queries.recent_hosts(conn, now - POLITENESS_MEMORY_S, now)
        for host, last, delay, paused_until in recent:
            hosts.resume(host, min(last, now), delay, paused_until)
        rows = [(r.url, r.priority, r.depth, r.not_before) for r in store.frontier_rows()]
        if rows:
            log.info("restoring the crawl: the seen-set from every stored URL, then %d "
                     "queued URLs", len(rows))
        restored = crawler.frontier.restore(rows, crawl_queries.known_urls(conn), links_only,
                                            stop, _restore_progress(len(rows)))
        readmitted = _readmit_outside(crawl_queries.outside_pages(conn), crawler.frontier)
    finally:
        conn.close()
    if restored.held:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(restored.held.items()))
        log.warning("%d queued URLs are refused by the configuration now (%s): they stay in "
                    "the frontier table, not crawled, and come back when the scope admits "
                    "them again (to drop them: DELETE FROM frontier WHERE url_id IN (...))",
                    sum(restored.held.values()), kinds)
    if not allow_private:
        _warn_private([row[0] for row in rows])
    return restored.queued + readmitted


def _readmit_outside(pages: Iterable[tuple[str, int]], frontier: Frontier) -> int:
    """Queue the pages fetched for their links alone (type ``outside``: out of scope when
    the global PageRank estimate chose them) that the scope admits now, as pages: else a
    scope grown or lifted since would never store their documents nor follow their links."""
    scope = frontier.admission.scope
    admitted = [(url, depth) for url, depth in pages if scope.check(url, depth) is None]
    if not admitted:
        return 0
    queued = len(frontier.submit(Source.REFRESH, admitted, DISCOVERY).queued)
    log.info("%d page(s) fetched earlier for their links alone (type outside) are in scope "
             "now: %d queued to be fetched as pages", len(admitted), queued)
    return queued


def _restore_progress(queued: int) -> Callable[[str, int], None]:
    """A log line each :data:`RESTORE_LOG_EVERY` URLs restored (a start can take minutes)."""
    def progress(phase: str, done: int) -> None:
        if done % RESTORE_LOG_EVERY:
            return
        if phase == "known":
            log.info("restoring: %d stored URLs read into the seen-set", done)
        else:
            log.info("restoring: %d of %d queued URLs read", done, queued)
    return progress


def _warn_private(urls: list[str]) -> None:
    refused = refused_private(urls)
    if refused:
        log.warning("%d of %d queued URLs are on private or loopback addresses (e.g. %s); "
                    "scope.allow_private_addresses is false, so each will end as an "
                    "'address' ERROR record. Set it to true if you meant to crawl them",
                    len(refused), len(urls), refused[0])
