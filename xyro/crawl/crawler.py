"""The crawl engine: one dispatcher thread, a pool of fetch workers — fetch, analyse, admit,
record.

Data flow (DESIGN.md §2): the dispatcher pops polite work from the :class:`Frontier`
(robots.txt first, one request per host, delays), hands it to workers; a worker fetches and
analyses the page (type, MD5, canonical links — the CPU-heavy part) and returns a
:class:`Done`; the dispatcher then frees the host's slot and completes the item through
the frontier, which admits the page's links (seen-set, scope, depth, traps, suffixes) and
hands the writer ONE :class:`FetchRecord` per page, whose transaction also moves the
persisted frontier. A crash therefore loses at most the last unflushed batch, and a restart
re-queues exactly what was not done.

What a worker does with one item is :mod:`xyro.crawl.item_work`. Policies live in their own
modules: robots.txt answers and the origins given up on
(:mod:`xyro.crawl.robots_answers`), 429/503 retries (:mod:`xyro.crawl.retry_policy`), redirects
followed through the frontier (:mod:`xyro.crawl.redirects`), documents waiting for their DTDs
(:mod:`xyro.crawl.loader_needs`, one more producer of the frontier), sitemaps and feeds
(:mod:`xyro.crawl.publishing`: recognised and parsed in the worker, their pages and dates handed
to the frontier and the trust record on the dispatcher; paper 003 §3).

Stopping (SIGTERM, a page or time budget): no new work is dispatched; in-flight fetches
finish (each is bounded by the fetch deadline) or, if the stop cut them short, are given
back — their frontier rows stay in the database. Then the writer is flushed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata import FetchRecord, FoundSeed, PageType, XmlVersion
from metadata.crawl_queries import NEVER_FETCHED, PriorFetch
from xyro.clock import Clock
from xyro.content.page import PageOutcome
from xyro.crawl.activity import HostWarnings
from xyro.crawl.admission import Source
from xyro.crawl.frontier import BACKGROUND, DISCOVERY, LOADER, Frontier, Submitted
from xyro.crawl.frontier_queues import PAGE_KINDS, FrontierItem
from xyro.crawl.item_work import ItemWork
from xyro.crawl.loader_needs import LoaderNeeds
from xyro.crawl.publishing import Publication, PublicationChannel
from xyro.crawl.work_items import Done, Resume
from xyro.crawl.redirects import Redirects
from xyro.crawl.retry_policy import PrerequisiteRetries, RetryPolicy
from xyro.crawl.robots_answers import DRAIN_BATCH, RobotsAnswers
from xyro.crawl.seenset import SeenSet
from xyro.crawl.stats import CrawlStats
from xyro.loader.document import LoadError
from xyro.loader.pending import Held
from xyro.loader.stage import LoaderStage, error_outcome
from xyro.loader.warehouse import WarehouseWriteError
from xyro.records import ErrorKind, FetchResult

if TYPE_CHECKING:  # ranking (numba) is imported only when OPIC is built (app.build_opic)
    from xyro.crawl.opic_online import OpicCheckpoints
    from xyro.crawl.unit_budget import UnitBudget

log = logging.getLogger("xyro.crawl.crawler")

#: Page fetch failures that back the host off (the host looks overloaded or unreachable).
#: Verdicts on the page itself (its Content-Type, size, encoding, a parse error, a 404) say
#: nothing about the host's health: backing off on them stalled whole hosts for 30 s.
HOST_FAILURES = frozenset({ErrorKind.TIMEOUT, ErrorKind.CONNECT, ErrorKind.TRUNCATED,
                           ErrorKind.DNS})
#: Answers that say the server, not the page, is in trouble (a gateway or an overload; a 503
#: or 429 left when its retries ran out): the host backs off as for a timeout. A 500 is
#: usually one broken page and backs nothing off.
HOST_FAILURE_STATUSES = frozenset({429, 502, 503, 504})

#: Clock seconds the fetches in flight get to end after a time budget (``max_seconds``);
#: then they are cut and stay queued, as at a stop signal.
BUDGET_GRACE_S = 5.0

#: Clock seconds between looks at the frontier while only due pages may go and the hosts
#: ready now hold none (their hosts wake no one when their politeness delay ends).
BUDGET_POLL_S = 0.25
#: Real seconds a stopping crawl waits for the work still in flight once its fetches are
#: cut: what is left is a parse or an XML load (CPU, nothing to interrupt), which may take
#: minutes for a crowded 8 MiB document. Past it, those items are left queued in the store
#: (fetched again at the next start), so a stop stays well inside systemd's TimeoutStopSec.
STOP_GRACE_S = 30.0

#: A URL's previous fetch (validators for conditional GET, access time and signature).
Validators = PriorFetch


@dataclass(frozen=True, slots=True)
class CrawlSettings:
    """Engine parameters (built from the config by the composition root)."""

    workers: int = 64
    follow_nofollow: bool = False
    max_url_length: int = 2048
    max_retries: int = 3                 # 429/503 put back this many times, then ERROR
    max_redirects: int = 5               # hops followed (through the frontier) from one URL
    max_retry_after_s: float = 3600.0    # a URL's 429/503 pause at most (as its host's)
    progress_interval_s: float = 1.0     # real seconds between progress callbacks
    stop_grace_s: float = STOP_GRACE_S   # real seconds a stop waits for parses and loads


@dataclass(frozen=True, slots=True)
class CrawlSummary:
    stop_reason: str
    stats: dict[str, Any]


class Crawler:
    """Runs a polite crawl until a budget, a stop request, or an empty frontier."""

    def __init__(self, *, frontier: Frontier, fetch: Callable[..., FetchResult],
                 fetch_robots: Callable[..., FetchResult],
                 validators: Callable[[str], Validators], submit: Callable[[Any], None],
                 clock: Clock, settings: CrawlSettings, stats: CrawlStats | None = None,
                 loader: LoaderStage | None = None,
                 fetch_for_loader: Callable[..., FetchResult] | None = None,
                 fetch_for_publication: Callable[..., FetchResult] | None = None,
                 host_warnings: HostWarnings | None = None,
                 publication: PublicationChannel | None = None,
                 opic: OpicCheckpoints | None = None,
                 budget: UnitBudget | None = None) -> None:
        """``submit``: the metadata writer's, for what is not a frontier move (XML versions,
        loading status); the frontier records the pages and their moves itself.
        ``publication``: the crawl's sitemaps, feeds and published dates (one per crawl).
        ``budget``: G page fetches per refresh time unit (the daemon; None: as fast as
        politeness allows)."""
        self.frontier = frontier
        self._submit = submit
        self.clock = clock
        self.settings = settings
        self.stats = stats or CrawlStats()
        self.loader = loader
        self._host_warnings = host_warnings
        self.publication = publication or PublicationChannel()
        self.opic = opic  # OPIC in the crawl: every fetched page is a visit (DESIGN.md §5)
        self.budget = budget
        self._work: queue.SimpleQueue[FrontierItem | Resume | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._seen_warned = False
        self._stopping_since: float | None = None   # monotonic time the fetches were cut
        self._stop = threading.Event()
        self._items = ItemWork(
            fetch=fetch, fetch_robots=fetch_robots,
            # DTDs and entities are fetched whatever their Content-Type (.mod, .ent, text/plain).
            fetch_for_loader=fetch_for_loader or fetch,
            fetch_for_publication=fetch_for_publication or fetch,
            validators=validators, loader=loader,
            publication=self.publication, in_scope=self._in_scope,
            follow_nofollow=settings.follow_nofollow, max_url_length=settings.max_url_length,
            stop=self._stop)
        self._retries = RetryPolicy(settings.max_retries,
                                    max_pause_s=settings.max_retry_after_s)
        self._robots = RobotsAnswers(frontier, self.publication, self.stats, host_warnings,
                                     PrerequisiteRetries(settings.max_retries),
                                     self._unfetched, self._wake)
        self._redirects = Redirects(settings.max_redirects, settings.max_url_length,
                                    frontier.admission.scope)
        self._needs = None if loader is None else LoaderNeeds(
            loader, frontier, submit, clock, settings.max_url_length, self._resume_later,
            self._record)
        self._in_flight = 0
        self._pages_dispatched = 0
        #: Why the crawl cannot go on (the warehouse refuses documents), or None.
        self.fatal: str | None = None

    @property
    def seen(self) -> SeenSet:
        """The frontier's seen-set (every URL known to the crawl)."""
        return self.frontier.seen

    # -- running -------------------------------------------------------------------------

    def run(self, max_pages: int | None = None, max_seconds: float | None = None,
            stop: threading.Event | None = None,
            on_progress: Callable[[dict[str, Any]], None] | None = None,
            until_exhausted: bool = True) -> CrawlSummary:
        """Crawl until ``max_pages`` fetches, ``max_seconds`` of clock time, ``stop`` or exhaustion.

        ``until_exhausted=False`` (the daemon) waits on an empty frontier for work that other
        threads push (planner, reload) instead of returning.
        """
        stop = stop or threading.Event()
        self._stop.clear()
        self._stopping_since = None
        # A robots.txt hop waiting for its host's delay ends when the fetches are cut.
        self.frontier.robots_hops.watch(self._stop)
        deadline = None if max_seconds is None else self.clock.now() + max_seconds
        threads = [threading.Thread(target=self._worker, name=f"xyro-fetch-{i}", daemon=True)
                   for i in range(self.settings.workers)]
        for t in threads:
            t.start()
        reason = "frontier exhausted"
        last_progress = self.stats.elapsed_s
        try:
            while True:
                self._wake.clear()
                self._drain()
                self._warn_seen_full()
                self._expire_pending()
                if self.opic is not None and self.opic.due(self.clock.now()):
                    self.opic.save()
                reason = self._stop_reason(stop, deadline, max_pages) or reason
                if reason != "frontier exhausted" or (until_exhausted and self._exhausted()):
                    if self._in_flight == 0 or self._grace_over():
                        break
                    self._wait_for_results()
                    continue
                self._dispatch(max_pages)
                if on_progress and self.stats.elapsed_s - last_progress >= self.settings.progress_interval_s:
                    last_progress = self.stats.elapsed_s
                    on_progress(self.snapshot())
                if until_exhausted and self._exhausted() and self._in_flight == 0:
                    break
                self._wait_for_work()
        finally:
            self._stop.set()
            for _ in threads:
                self._work.put(None)
            joined_by = time.monotonic() + 5.0   # one wait for all: a load runs on regardless
            for t in threads:
                t.join(timeout=max(0.0, joined_by - time.monotonic()))
            if self.opic is not None:
                self.opic.save()
            if self.budget is not None:
                self.budget.close(self.clock.now())
        return CrawlSummary(reason, self.snapshot())

    def _grace_over(self) -> bool:
        """True once the fetches were cut (``_stop``) more than ``settings.stop_grace_s``
        (:data:`STOP_GRACE_S`) ago and work is still in flight: it is left queued (said in
        a WARNING)."""
        if not self._stop.is_set():
            return False
        now = time.monotonic()
        if self._stopping_since is None:
            self._stopping_since = now
        if now - self._stopping_since < self.settings.stop_grace_s:
            return False
        log.warning("stopping without waiting for %d fetched page(s) still being parsed or "
                    "loaded after %.0f s: they stay queued and are fetched again at the next "
                    "start", self._in_flight, self.settings.stop_grace_s)
        return True

    def _warn_seen_full(self) -> None:
        """Once: the seen-set holds more URLs than it was sized for, so more and more new
        URLs are taken for seen (a quarter of them at three times its size)."""
        if not self._seen_warned and self.seen.over_capacity():
            self._seen_warned = True
            log.warning("the seen-set holds more than the %d URLs it was sized for: more and "
                        "more new URLs are taken for seen and skipped; raise "
                        "crawler.expected_urls and restart", self.seen.expected)

    def snapshot(self) -> dict[str, Any]:
        snap = self.stats.snapshot(
            queued=len(self.frontier), queued_by_priority=self.frontier.sizes(),
            in_flight=self._in_flight, hosts_waiting=self.frontier.hosts_waiting,
            seen_urls=len(self.seen))
        if self.loader is not None:
            snap["loader_pending"] = len(self.loader.pending)
            snap["loader_cached"] = len(self.loader.cache)
            snap["loader_dtd_sources"] = self.loader.dtd_sources()
        snap["publication"] = self.publication.snapshot()
        if self.opic is not None:
            snap["opic"] = {**self.opic.opic.snapshot(), "checkpoints": self.opic.written}
        if self.budget is not None:
            snap["budget"] = self.budget.snapshot()
        return snap

    def _stop_reason(self, stop: threading.Event, deadline: float | None,
                     max_pages: int | None) -> str | None:
        if self.fatal is not None:
            return self.fatal
        if stop.is_set():
            self._stop.set()  # lets in-flight fetches give up early
            return "stop requested"
        if deadline is not None and (now := self.clock.now()) >= deadline:
            if now >= deadline + BUDGET_GRACE_S:
                self._stop.set()  # a slow drip must not stretch the budget to its deadline
            return "time budget reached"
        if max_pages is not None and self._pages_dispatched >= max_pages:
            return "page budget reached"
        return None

    def _exhausted(self) -> bool:
        return len(self.frontier) == 0 and self.frontier.next_ready_time() is None

    def _dispatch(self, max_pages: int | None) -> None:
        now = self.clock.now()
        try:
            self._dispatch_items(now, max_pages)
        finally:
            if self.budget is not None:
                # Before any record of these fetches: the count committed covers them
                # (xyro.crawl.unit_budget, a crash).
                self.budget.record_spent(now)

    def _dispatch_items(self, now: float, max_pages: int | None) -> None:
        budget, disallowed = self.budget, 0
        while self._in_flight < self.settings.workers:
            if max_pages is not None and self._pages_dispatched >= max_pages:
                return
            # The unit's budget decides which levels may go (xyro.crawl.unit_budget).
            item = self.frontier.pop(now, BACKGROUND if budget is None
                                     else budget.max_level(now))
            if item is None:
                return
            if item.kind == "disallowed":
                self._unfetched(item, ErrorKind.ROBOTS, "disallowed by robots.txt")
                disallowed += 1
                if disallowed >= DRAIN_BATCH:   # a host's whole queue can be refused at once:
                    self._wake.set()            # look at stops and results between batches
                    return
                continue
            if item.kind in PAGE_KINDS:
                self._pages_dispatched += 1
                if budget is not None:
                    budget.spend(item.priority)
            self._in_flight += 1
            self._work.put(item)

    def _wait_for_work(self) -> None:
        """Sleep until a worker reports or the next host becomes ready (clock time)."""
        if self._in_flight >= self.settings.workers:
            self._wait_for_results()
            return
        now = self.clock.now()
        nxt = self.frontier.next_ready_time()
        limit = BACKGROUND if self.budget is None else self.budget.max_level(now)
        if limit == LOADER:  # G spent: wait for the next unit (a loader need wakes us)
            assert self.budget is not None
            nxt = self.budget.next_unit_at()
        elif limit < BACKGROUND and nxt is not None:
            # Due pages only, and the ready hosts may hold none: look again shortly.
            nxt = max(nxt, now + BUDGET_POLL_S)
        delay = 1.0 if nxt is None else max(0.0, nxt - now)
        if delay > 0 and self._done.empty():
            self.clock.wait(min(delay, 1.0), self._wake)

    def _wait_for_results(self) -> None:
        if self._done.empty():
            self.clock.wait(1.0, self._wake)

    # -- worker side ---------------------------------------------------------------------

    def _worker(self) -> None:
        while (work := self._work.get()) is not None:
            done = (self._resumed(work.held) if isinstance(work, Resume)
                    else self._processed(work))
            self._done.put(done)
            self._wake.set()

    def _in_scope(self, url: str) -> bool:
        """``url`` may be a warehouse document: the scope admits it (a DTD or entity need is
        fetched wherever it lives, but an out-of-scope one is kept as an entity only)."""
        return self.frontier.admission.scope.check(url, 0) is None

    def _processed(self, item: FrontierItem) -> Done:
        try:
            return self._items.process(item)
        except WarehouseWriteError as exc:
            return self._unstored(item, exc)
        except Exception as exc:  # a bug must not kill the worker or lose the item
            log.exception("internal error on %s", item.url)
            result = FetchResult(url=item.url, final_url=item.url,
                                 error_kind=ErrorKind.PARSE,
                                 error_detail=f"internal error: {type(exc).__name__}: {exc}")
            return Done(item, result, None if item.kind == "robots" else
                        PageOutcome(PageType.ERROR, error_kind=ErrorKind.PARSE.value,
                                    error_detail=result.error_detail))

    def _resumed(self, held: Held) -> Done:
        """Load a held document again; errors become ERROR outcomes."""
        try:
            return self._items.resume(held)
        except WarehouseWriteError as exc:
            return self._unstored(held.item, exc, held)
        except Exception as exc:  # a bug must not kill the worker or lose the document
            log.exception("internal error loading %s", held.item.url)
            return Done(held.item, held.result, error_outcome(
                held.result, LoadError.PARSE, f"internal error: {type(exc).__name__}: {exc}"),
                resumed=held)

    # -- dispatcher side: results --------------------------------------------------------

    def _drain(self) -> None:
        # Before this round's results: a give-up they bring is recorded from the next round
        # on, once the run loop has looked for a stop request in between.
        self._robots.drain_given_up(self._stop)
        while True:
            try:
                done = self._done.get_nowait()
            except queue.Empty:
                return
            self._in_flight -= 1
            if done.resumed is not None:
                self._resumed_done(done)
            elif done.outcome is None:
                self._robots_done(done.item, done.result)
            else:
                self._page_done(done)

    def _robots_done(self, item: FrontierItem, result: FetchResult) -> None:
        self._robots.done(item, result, self.clock.now(), cut=self._cut_by_stop(result))

    def _page_done(self, done: Done) -> None:
        item, result, outcome = done.item, done.result, done.outcome
        assert outcome is not None
        now = self.clock.now()
        if self._given_back(item, result) or self._retry_later(item, result, now):
            return
        self.frontier.done(item, result.retry_after_s,
                           error=(result.error_kind in HOST_FAILURES
                                  or result.status in HOST_FAILURE_STATUSES),
                           now=now, started_at=result.started_at)
        needs = self._needs
        if needs is not None and needs.wanted(item.url):
            outcome = needs.fetched(item, result, outcome)
        if done.needs:
            assert needs is not None
            needs.wait(item, result, done.needs, None, now)
            return
        outcome = self._redirects.outcome(item.url, result, outcome)
        if done.publication is not None:  # what its parser noted becomes an errors row
            outcome = done.publication.noted(outcome)
            # Its pages are queued before its own record: a listing spans several of the
            # writer's transactions, and a kill between them must leave the sitemap queued
            # (read again at restart), never recorded with part of its pages lost. Read when
            # its body was complete: a date stamped by the server while answering is no
            # later than that (the fetch start would make it look like the future).
            self._read_publication(item, done.publication, result.finished_at or now)
        self._record(item, result, outcome, now, done.version, done.prior)
        self.publication.answered(item.url, result.status)

    def _record(self, item: FrontierItem, result: FetchResult, outcome: PageOutcome,
                now: float, version: XmlVersion | None = None,
                prior: PriorFetch = NEVER_FETCHED) -> None:
        """Complete ``item`` with its page record; the frontier admits its links."""
        fetched_at = result.started_at or now
        record = FetchRecord(
            url=item.url, fetched_at=fetched_at, page_type=outcome.page_type,
            http_status=result.status, signature=outcome.signature,
            not_modified=result.not_modified,
            last_modified=self._change_date(item.url, result, outcome, prior, fetched_at),
            etag=result.etag, children=tuple(c.url for c in outcome.children),
            error_kind=outcome.error_kind, error_detail=outcome.error_detail,
            content_type=result.content_type, size=len(result.body))
        # An out-of-scope page (``links``) is no OPIC visit: it is outside the crawl's graph.
        if self.opic is not None and not result.not_modified and item.kind != "links":
            # Before the links are queued, so they are filed under the cash just received.
            self.opic.opic.visit(item.url, record.children,
                                 [c.likely_xml for c in outcome.children])
        if version is not None:
            # Before the page's record, which may go in a later transaction: a kill between
            # the two then leaves a version of a page still queued (its fetch again finds
            # the same signature), never a page recorded fetched with no version, whose
            # next fetch (conditional, a 304) would never load it again.
            self._submit(version)
        if self._redirects.is_redirect(outcome):
            # A hop keeps the level of the URL it replaces (a redirected seed stays urgent).
            links = [(c.url, item.priority) for c in outcome.children]
            moved = self._seed_moved(item, links[0][0], now)
            submitted = self.frontier.complete(item, record, links, Source.REDIRECT)
            # A sitemap or feed that moved: its target is read now and at every re-read
            # (the redirect's offer skips a target read before, so it was read only once).
            moved = self.publication.moved(self.frontier, item.url, links[0][0],
                                           item.depth) or moved
            queued = {o.url for o in submitted.queued} | ({links[0][0]} if moved else set())
            self._redirects.not_queued([u for u, _ in links if u not in queued],
                                       submitted.refused)
        else:
            links = [(c.url, DISCOVERY if c.likely_xml else BACKGROUND)
                     for c in outcome.children]
            submitted = self.frontier.complete(item, record, links)
        self._count(submitted)
        self.stats.page(outcome.page_type.value, len(result.body), outcome.error_kind,
                        result.not_modified, result.status, result.elapsed_s)
        if outcome.error_kind is not None and self._host_warnings is not None:
            self._host_warnings.error(item.url, outcome.error_kind, outcome.error_detail)

    def _seed_moved(self, item: FrontierItem, target: str, now: float) -> bool:
        """A seed's redirect that leaves a scope derived from the seeds: the target is a
        seed too, from now on and at every start (:mod:`xyro.crawl.redirects`), and is
        queued here even if known (a link may have found it before, refused then). False
        when the target is no such seed (or the admission refuses it for another reason:
        a denied domain, a suffix, a trap)."""
        seed = self._redirects.new_seed(target, item.depth)
        if seed is None or self.frontier.refusal(Source.OPERATOR, target, item.depth):
            return False
        self.frontier.admission.add_found([target])
        self._submit(FoundSeed(target, item.priority, now, seed))
        self.frontier.submit(Source.OPERATOR, [(target, item.depth)], item.priority)
        log.info("seed %s redirects to %s: that host joins the scope", seed, target)
        return True

    def _change_date(self, url: str, result: FetchResult, outcome: PageOutcome,
                     prior: PriorFetch, fetched_at: float) -> float | None:
        """The observation's change date: the server's Last-Modified, else a trusted
        published date (DESIGN.md §6); the interval since the previous fetch is judged
        against the listed date on the way (changed: the signature the writer compares)."""
        changed: bool | None = None
        if result.not_modified:
            changed = False
        elif outcome.signature is not None and prior.signature is not None:
            changed = outcome.signature != prior.signature
        return self.publication.change_date(url, prior.last_access, fetched_at, changed,
                                            result.last_modified)

    def _read_publication(self, item: FrontierItem, publication: Publication,
                          read_at: float) -> None:
        """The sitemap or feed ``item`` was read: its pages and sitemaps go to the
        frontier, and the new ones count as discovered."""
        for submitted in self.publication.read(self.frontier, item.url, item.depth,
                                               publication, read_at):
            if submitted is not None:
                self._count(submitted)

    def _count(self, submitted: Submitted) -> None:
        if submitted.new:
            self.stats.discovered += submitted.new
            for _, refusal in submitted.refused:
                self.stats.refuse(refusal.counter)

    def _given_back(self, item: FrontierItem, result: FetchResult) -> bool:
        """A fetch cut short by a stop request is not an observation: it stays queued."""
        if self._cut_by_stop(result):
            self.frontier.done(item, now=self.clock.now(), started_at=result.started_at)
            self.frontier.give_back(item)
            return True
        return False

    def _cut_by_stop(self, result: FetchResult) -> bool:
        """The fetch ended because the crawl is stopping (the fetcher's TIMEOUT on stop)."""
        return self._stop.is_set() and result.error_kind == ErrorKind.TIMEOUT

    def _retry_later(self, item: FrontierItem, result: FetchResult, now: float) -> bool:
        """429/503: slow the host down (Retry-After) and put the URL back, a few times."""
        wait = self._retries.pause(item.url, result.status, result.retry_after_s)
        if wait is None:
            return False
        # Retry-After alone sets the pause; the error back-off would stack on top of it.
        self.frontier.requeue(item, not_before=now + wait, retry_after_s=wait, now=now,
                              started_at=result.started_at)
        return True

    def _unfetched(self, item: FrontierItem, kind: ErrorKind, detail: str) -> None:
        """``item`` ends without a fetch (robots.txt forbids it, or could not be fetched)."""
        self.frontier.complete(item, FetchRecord(
            url=item.url, fetched_at=self.clock.now(), page_type=PageType.ERROR,
            error_kind=kind.value, error_detail=detail,
            requested=kind is not ErrorKind.ROBOTS))  # an unreachable host was tried
        self.stats.page(PageType.ERROR.value, 0, kind.value, False)
        if self._host_warnings is not None:
            self._host_warnings.error(item.url, kind.value, detail)
        if self._needs is not None:
            self._needs.refused(item, detail)

    # -- the loader: documents waiting for DTDs and entities ------------------------------

    def _resume_later(self, held: Held) -> None:
        """Load a held document again on a worker (its DTDs/entities have arrived)."""
        self._in_flight += 1
        self._work.put(Resume(held))

    def _resumed_done(self, done: Done) -> None:
        assert done.resumed is not None and self._needs is not None
        now = self.clock.now()
        if self._cut_by_stop(done.result):   # not stored: fetched again at the next start
            self._needs.give_back(done.resumed)
            return
        outcome = done.outcome
        if done.publication is not None and outcome is not None:
            outcome = done.publication.noted(outcome)
        self._needs.resumed(done.resumed, done.needs, outcome, done.version, now)
        if done.publication is not None:
            self._read_publication(done.item, done.publication, done.result.finished_at or now)

    def _unstored(self, item: FrontierItem, exc: WarehouseWriteError,
                  held: Held | None = None) -> Done:
        """The warehouse cannot take a document (worker side): the crawl stops
        (:attr:`fatal`), and the item, given back as a fetch the stop cut short, stays queued
        with nothing recorded."""
        self.fatal = self.fatal or f"{exc.strerror}; free space or fix storage.warehouse_dir"
        self._stop.set()
        cut = FetchResult(item.url, item.url, error_kind=ErrorKind.TIMEOUT,
                          error_detail=self.fatal)
        return Done(item, cut, PageOutcome(PageType.ERROR), resumed=held)

    def _expire_pending(self) -> None:
        if self._needs is not None:
            self._needs.expire(self.clock.now())

