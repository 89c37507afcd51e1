"""What a fetch worker does with one item (DESIGN.md §2): fetch it, analyse it (type, MD5,
canonical links: the CPU-heavy part), and load an XML document into the warehouse, or hold
it for the DTDs and entities it needs. The result is a :class:`Done` for the dispatcher,
which alone touches the frontier and the store's records.

Four kinds of items: a robots.txt (fetched, answered on the dispatcher), a DTD or entity the
loader wants (an unconditional fetch: a 304 would leave it without the bytes), an
out-of-scope page of the global PageRank estimate (its links alone), and a page (a
conditional fetch from its previous validators).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from metadata import PageType
from metadata.crawl_queries import NEVER_FETCHED, PriorFetch
from xyro.content.page import Child, PageOutcome, analyse
from xyro.crawl.frontier_queues import FrontierItem
from xyro.crawl.publishing import Publication, PublicationChannel, publication_of
from xyro.crawl.work_items import Done
from xyro.loader.outside import outside_links
from xyro.loader.pending import Held
from xyro.loader.stage import LoaderStage
from xyro.records import FetchResult


class ItemWork:
    """Turns a frontier item (or a held document whose needs arrived) into a :class:`Done`.

    Runs on the worker threads; holds nothing that changes. ``stop`` is the crawl's: set,
    it cuts the fetches in flight short. ``in_scope(url)``: the scope admits ``url`` as a
    warehouse document.
    """

    def __init__(self, *, fetch: Callable[..., FetchResult],
                 fetch_robots: Callable[..., FetchResult],
                 fetch_for_loader: Callable[..., FetchResult],
                 fetch_for_publication: Callable[..., FetchResult],
                 validators: Callable[[str], PriorFetch], loader: LoaderStage | None,
                 publication: PublicationChannel, in_scope: Callable[[str], bool],
                 follow_nofollow: bool, max_url_length: int, stop: threading.Event) -> None:
        self._fetch = fetch
        self._fetch_robots = fetch_robots
        self._fetch_for_loader = fetch_for_loader
        self._fetch_for_publication = fetch_for_publication
        self._validators = validators
        self._loader = loader
        self._publication = publication
        self._in_scope = in_scope
        self._follow_nofollow = follow_nofollow
        self._max_url_length = max_url_length
        self._stop = stop

    def _analyse(self, result: FetchResult, prior_type: PageType | None) -> PageOutcome:
        return analyse(result, prior_type, self._follow_nofollow, self._max_url_length)

    def process(self, item: FrontierItem) -> Done:
        if item.kind == "robots":
            return Done(item, self._fetch_robots(item.url, stop=self._stop), None)
        if item.kind == "links":
            return self._links_only(item)
        loader = self._loader
        if loader is not None and loader.wanted(item.url):
            return self._loader_need(item, loader)
        prior = self._validators(item.url)
        # A known sitemap or feed may be as large on the wire as decoded (sitemaps.org
        # allows 50 MB uncompressed, which servers often send as is).
        fetch = self._fetch_for_publication if item.url in self._publication else self._fetch
        result = fetch(item.url, etag=prior.etag, last_modified=prior.last_modified,
                       stop=self._stop)
        outcome = self._analyse(result, prior.page_type)
        if loader is not None and outcome.page_type == PageType.DTD:
            return Done(item, result, outcome, version=loader.store_entity(item.url, result),
                        prior=prior)
        publication = publication_of(item.url, result, outcome, self._publication.announced_by)
        if loader is not None and outcome.page_type == PageType.XML and not result.not_modified:
            if publication is not None and len(result.body) > loader.settings.max_document_bytes:
                return Done(item, result, outcome, prior=prior,
                            publication=_not_kept(publication, len(result.body),
                                                  loader.settings.max_document_bytes))
            return self._loaded(item, result, outcome, prior, publication)
        return Done(item, result, outcome, prior=prior, publication=publication)

    def _loader_need(self, item: FrontierItem, loader: LoaderStage) -> Done:
        """A DTD or entity some held document waits for. Unconditional: a 304 would leave
        the loader without the bytes it needs. An XML document fetched as one is also a
        warehouse document if the scope admits it, else kept as an entity only."""
        result = self._fetch_for_loader(item.url, etag=None, last_modified=None,
                                        stop=self._stop)
        outcome = self._analyse(result, None)
        ok = result.error_kind is None and result.status is not None and \
            result.status < 300 and outcome.page_type != PageType.HTML   # not an entity
        if ok and outcome.page_type == PageType.XML:
            if self._in_scope(item.url):
                return self._loaded(item, result, outcome, NEVER_FETCHED, None)
            outcome = PageOutcome(PageType.DTD, signature=outcome.signature)  # a part only
        return Done(item, result, outcome,
                    version=loader.store_entity(item.url, result) if ok else None)

    def _loaded(self, item: FrontierItem, result: FetchResult, outcome: PageOutcome,
                prior: PriorFetch, publication: Publication | None) -> Done:
        """An XML document loaded, or held for the DTDs it needs."""
        assert self._loader is not None
        loaded = self._loader.load(item.url, result)
        if loaded.outcome is None:
            return Done(item, result, outcome, needs=loaded.needs, prior=prior)
        return Done(item, result, loaded.outcome, version=loaded.version, prior=prior,
                    publication=publication)

    def _links_only(self, item: FrontierItem) -> Done:
        """An out-of-scope page of the global PageRank estimate (DESIGN.md §5): a plain
        fetch for its links alone. An HTML page keeps its links; an XML body is parsed for
        its links but never loaded (that would make it a warehouse document, and would
        fetch its DTD): :mod:`xyro.loader.outside`. Either is recorded as ``outside``: no
        document, no publication, no refresh."""
        result = self._fetch(item.url, etag=None, last_modified=None, stop=self._stop)
        outcome = self._analyse(result, None)
        if outcome.page_type == PageType.HTML:
            outcome = replace(outcome, page_type=PageType.OUTSIDE)
        elif outcome.page_type == PageType.XML:
            links = outside_links(result.body, result.final_url, self._max_url_length,
                                  None if self._loader is None else self._loader.settings)
            outcome = PageOutcome(PageType.OUTSIDE, tuple(Child(l.url, l.likely_xml)
                                                          for l in links), outcome.signature)
        elif outcome.page_type == PageType.DTD:
            outcome = PageOutcome(PageType.OUTSIDE, signature=outcome.signature)
        return Done(item, result, outcome)

    def resume(self, held: Held) -> Done:
        """Load a held document again (its DTDs and entities have arrived)."""
        assert self._loader is not None
        loaded = self._loader.load(held.item.url, held.result)
        if loaded.outcome is None:
            return Done(held.item, held.result, None, needs=loaded.needs, resumed=held)
        # A sitemap or feed that waited for its DTD is read as one now.
        publication = publication_of(held.item.url, held.result, loaded.outcome,
                                     self._publication.announced_by)
        return Done(held.item, held.result, loaded.outcome, version=loaded.version,
                    resumed=held, publication=publication)


def _not_kept(publication: Publication, size: int, limit: int) -> Publication:
    """A listing read for its entries but larger than the warehouse takes: it stays an XML
    page (read, re-read, its dates trusted or not), with a note saying why no version of it
    is stored. Loading it would have made the page an ERROR although its entries were read."""
    note = (f"read for its entries but not kept in the warehouse: {size} bytes, more than "
            f"loader.max_document_bytes ({limit})")
    return replace(publication, notes=(note, *publication.notes))
