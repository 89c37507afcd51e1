"""Documents waiting for their DTDs and entities: the loader as a producer of the frontier.

DESIGN.md §2: "Everything that needs a URL (the loader's DTDs and entities included) asks the
crawler, at a priority." A document whose DTDs or entities are missing is held (bounded
memory) while its needs go into the frontier at level 0 (:data:`~xyro.crawl.admission.Source.LOADER`:
off-scope hosts and any depth are allowed, since DTDs live elsewhere, but the scheme and
the trap shapes are checked); when a need arrives the document is loaded again on a worker,
when one fails or is refused the document ends as an ERROR record with the reason, and a
document that waits longer than ``loader.dtd_timeout_s`` ends as a ``timeout``.

The crawler hands this class what concerns the loader and gives it two ways back: ``resume``
(load a held document again on a worker) and ``record`` (complete a fetch with its outcome).
Dispatcher thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metadata import ClearPending, Op, PageType, SetPending, XmlVersion
from xyro.clock import Clock
from xyro.content.page import PageOutcome
from xyro.crawl.admission import Source
from xyro.crawl.frontier import LOADER, Frontier
from xyro.crawl.frontier_queues import FrontierItem
from xyro.loader.document import LoadError
from xyro.loader.pending import Held
from xyro.loader.stage import Arrival, LoaderStage, error_outcome
from xyro.net.urls import canonicalize
from xyro.records import FetchResult

#: Completes a fetch: (item, result, outcome, now, version).
Record = Callable[[FrontierItem, FetchResult, PageOutcome, float, "XmlVersion | None"], None]

#: A document the loader's memory cap cannot hold is fetched again this much later.
RETRY_WHEN_FULL_S = 60.0


class LoaderNeeds:
    """The DTD-wait protocol between the loader stage and the frontier (module docstring)."""

    def __init__(self, loader: LoaderStage, frontier: Frontier, submit: Callable[[Op], Any],
                 clock: Clock, max_url_length: int, resume: Callable[[Held], None],
                 record: Record) -> None:
        self.loader = loader
        self.frontier = frontier
        self._submit = submit
        self._clock = clock
        self._max_url_length = max_url_length
        self._resume = resume
        self._record = record

    def wanted(self, url: str) -> bool:
        """True when a held document waits for ``url``."""
        return self.loader.wanted(url)

    def fetched(self, item: FrontierItem, result: FetchResult,
                outcome: PageOutcome) -> PageOutcome:
        """A URL the loader waits for was fetched: feed the cache, wake its documents; returns
        the outcome to record for it."""
        if result.not_modified:  # fetched as a page with validators: ask again, unconditionally
            self.frontier.submit(Source.LOADER, [item.url], LOADER, depth=item.depth)
            return outcome
        ok = result.error_kind is None and result.status is not None and 200 <= result.status < 300
        detail = result.error_detail or outcome.error_detail
        if ok and outcome.page_type == PageType.HTML:   # a "not found" page answered with 200
            ok, detail = False, (f"HTTP {result.status} with an HTML page "
                                 f"({result.content_type or 'no Content-Type'}), not a DTD "
                                 f"or entity")
        arrival = self.loader.arrived(item.url, result, ok, detail)
        if arrival.follow is not None:
            arrival = self._follow(item, result, arrival.follow)
        self._arrival(arrival)
        if ok and outcome.page_type not in (PageType.XML, PageType.HTML):
            # An entity or DTD served as text/plain or with an odd type is still a DTD part.
            return PageOutcome(PageType.DTD, signature=outcome.signature)
        return outcome

    def _follow(self, item: FrontierItem, result: FetchResult, location: str) -> Arrival:
        """A need answered by a redirect waits for its target, which enters the frontier."""
        target = canonicalize(location, max_length=self._max_url_length)
        refusal = (None if target is None
                   else self.frontier.refusal(Source.LOADER, target, item.depth))
        if target is None or refusal is not None:
            why = "" if refusal is None else f", refused: {refusal}"
            return self.loader.arrived(item.url, result, False,
                                       f"redirected to {location!r}{why}")
        self.loader.alias(target, item.url)
        self.frontier.submit(Source.LOADER, [target], LOADER, depth=item.depth)
        return Arrival()

    def refused(self, item: FrontierItem, detail: str) -> None:
        """``item`` ends without a fetch (robots.txt): documents waiting for it fail."""
        if self.loader.wanted(item.url):
            self._arrival(self.loader.arrived(item.url, FetchResult(item.url, item.url), False,
                                              detail))

    def wait(self, item: FrontierItem, result: FetchResult, needs: tuple[str, ...],
             previous: Held | None, now: float) -> None:
        """Hold the document and ask for its needs at level 0; too many held → fetch it later."""
        cache = self.loader.cache
        asked = (previous.asked if previous is not None else set()) | set(needs)
        limit = self.loader.settings.max_entity_urls
        if len(asked) > limit:
            self.loader.pending.release(item.url)
            self._fail(previous or Held(item, result, now), LoadError.ENTITY_REFUSED,
                       f"needs more than {limit} DTD and entity URLs "
                       f"(loader.max_entity_urls); none more is fetched for it")
            return
        for need in needs:
            kind, reason = LoadError.ENTITY, cache.failure(need)  # failed meanwhile
            if reason is None:
                refusal = self.frontier.refusal(Source.LOADER, need, item.depth)
                kind, reason = LoadError.ENTITY_REFUSED, refusal and f"refused: {refusal}"
            if reason is not None:
                self.loader.pending.release(item.url)
                self._fail(previous or Held(item, result, now), kind, f"needed {need}: {reason}")
                return
        needs = tuple(n for n in needs if n not in cache)
        if not needs:  # arrived while this document was being parsed: load it again now
            self.loader.pending.release(item.url)
            self._resume(previous or Held(item, result, now))
            return
        held = self.loader.hold(item, result, needs, now, previous)
        self.frontier.submit(Source.LOADER, needs, LOADER, depth=item.depth)
        if held is not None:
            held.asked = asked
        if held is None:  # memory cap: not recorded; its row stays in the store
            self.frontier.give_back(item, now + RETRY_WHEN_FULL_S)
            return
        self._submit(SetPending(item.url, tuple(needs), held.since,
                                f"waiting for {len(needs)} DTD/entity URL(s), "
                                f"round {held.rounds}"))

    def resumed(self, held: Held, needs: tuple[str, ...], outcome: PageOutcome | None,
                version: XmlVersion | None, now: float) -> None:
        """A held document was loaded again: it needs more, or it is done."""
        if needs:
            self.wait(held.item, held.result, needs, held, now)
            return
        assert outcome is not None
        self._finish(held, outcome, version, now)

    def expire(self, now: float) -> None:
        """Fail the documents that waited longer than ``loader.dtd_timeout_s``."""
        if len(self.loader.pending):
            for held, reason in self.loader.expire(now):
                self._fail(held, LoadError.TIMEOUT, reason)

    def _arrival(self, arrival: Arrival) -> None:
        for held in arrival.ready:
            self._resume(held)
        for held, reason in arrival.failed:
            self._fail(held, LoadError.ENTITY, reason)

    def give_back(self, held: Held) -> None:
        """A held document that could not be stored: not recorded, queued again (its row
        never left the store's frontier)."""
        self.loader.pending.release(held.item.url)
        self.frontier.give_back(held.item)

    def _finish(self, held: Held, outcome: PageOutcome, version: XmlVersion | None,
                now: float) -> None:
        self._record(held.item, held.result, outcome, now, version)
        self._submit(ClearPending(held.item.url))

    def _fail(self, held: Held, kind: LoadError, reason: str) -> None:
        detail = f"{held.item.url} not loaded: {reason}"
        self._finish(held, error_outcome(held.result, kind, detail), None, self._clock.now())
