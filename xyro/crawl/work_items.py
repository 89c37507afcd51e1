"""What the crawl engine's dispatcher and its fetch workers hand each other
(:mod:`xyro.crawl.crawler`): a frontier item or a held document to load again, and what
came of it."""

from __future__ import annotations

from dataclasses import dataclass

from metadata import XmlVersion
from metadata.crawl_queries import NEVER_FETCHED, PriorFetch
from xyro.content.page import PageOutcome
from xyro.crawl.frontier_queues import FrontierItem
from xyro.crawl.publishing import Publication
from xyro.loader.pending import Held
from xyro.records import FetchResult


@dataclass(frozen=True, slots=True)
class Done:
    """What a fetch worker hands back to the dispatcher."""

    item: FrontierItem
    result: FetchResult
    outcome: PageOutcome | None  # None for robots.txt fetches
    needs: tuple[str, ...] = ()  # an XML document waiting for these DTDs/entities
    version: XmlVersion | None = None
    resumed: Held | None = None  # a pending document loaded again (its fetch is done)
    prior: PriorFetch = NEVER_FETCHED  # the page's previous fetch, for its change date
    publication: Publication | None = None  # the body was a sitemap or a feed


@dataclass(frozen=True, slots=True)
class Resume:
    """Work item: load a held document again, its DTDs/entities having arrived."""

    held: Held
