"""The local domain of a scoped warehouse as the store holds it (DESIGN.md §5 "Global
PageRank of a local domain"): the stored link graph, which pages the configured ``scope``
admits, and which pages' links are known.

Shared by ``xyro rank --global-estimate`` on the stored graph
(:mod:`xyro.jobs.global_estimate`) and the daemon's rounds (:mod:`xyro.jobs.global_round`).
Node ids are URL ids − 1, as in :meth:`metadata.MetadataStore.export_graph`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from metadata import MetadataStore, PageType
from metadata.records import TYPE_CODES
from ranking.global_domain import (DomainView, Subgraph, graph_out_links, simple_graph,
                                   subgraph_pagerank)
from ranking.global_select import resolve_selector, top_candidates
from ranking.graph import LinkGraph
from xyro.config import XyroConfig
from xyro.net.urls import Scope, ScopeSeeds

#: Pages whose links the store holds: fetched HTML and XML documents in scope, and the
#: out-of-scope pages fetched for their links (``outside``; in scope too once the scope grew
#: over them, until they are fetched again as pages).
_LOCAL_TYPES = (PageType.HTML, PageType.XML, PageType.OUTSIDE)
_OUTSIDE_TYPES = (PageType.HTML, PageType.XML, PageType.OUTSIDE)
#: Out-of-scope frontier pages that may still be fetched (known as link targets only).
_FETCHABLE_TYPES = (PageType.UNREAD, PageType.REFUSED)


def config_scope(cfg: XyroConfig, seeds: ScopeSeeds) -> Scope:
    """The configured scope without its depth limit: a page is in the local domain by its
    URL, whatever the path that found it. ``seeds``: ``xyro.app.scope_seeds``."""
    scope = cfg.scope
    return Scope(seeds.urls, scope.allowed_domains, scope.denied_domains,
                 scope.allow_patterns, scope.deny_patterns, found=seeds.found)


def _codes(types: tuple[PageType, ...]) -> list[int]:
    return [TYPE_CODES.index(t.value) for t in types]


@dataclass(frozen=True)
class StoredDomain:
    """``graph``: the stored links as the paper's 0/1 graph; ``urls``: the URL of each node;
    ``in_scope``/``fetchable``: bool per node (fetchable: known only as a link target);
    ``local``: in-scope nodes with stored links (L); ``outside``: out-of-scope nodes with
    stored links (pages F already holds)."""

    graph: LinkGraph
    urls: list[str]
    in_scope: np.ndarray
    fetchable: np.ndarray
    local: np.ndarray
    outside: np.ndarray


def stored_domain(store: MetadataStore, scope: Scope) -> StoredDomain:
    """Read the graph and the URLs of ``store`` and split them by ``scope`` (module doc)."""
    exported = store.export_graph()
    conn = store.read_connection()
    try:
        by_id = dict(conn.execute("SELECT id, url FROM urls"))
    finally:
        conn.close()
    rows = np.arange(exported.n)
    urls = [by_id.get(int(i) + 1, "") for i in rows]
    in_scope = np.array([scope.check(u, 0, seed=False) is None for u in urls], dtype=bool)
    types = exported.types
    local = rows[in_scope & np.isin(types, _codes(_LOCAL_TYPES))]
    outside = rows[~in_scope & np.isin(types, _codes(_OUTSIDE_TYPES))]
    return StoredDomain(simple_graph(LinkGraph.from_csr(exported.indptr, exported.indices)),
                        urls, in_scope, np.isin(types, _codes(_FETCHABLE_TYPES)), local,
                        outside)


#: (URL id, URL) of pages -> those accepted (queued by the frontier, or admitted).
AcceptFn = Callable[[list[tuple[int, str]]], list[tuple[int, str]]]


@dataclass(frozen=True)
class StoredRound:
    """One round of FindGlobalPR over the stored F (L plus the out-of-scope pages with
    stored links): ``local_pr`` (L alone) and ``estimate`` (f on L), both over
    ``StoredDomain.local`` and summing to 1; the frontier ``view`` and a score per candidate,
    −inf for those that are not out-of-scope pages still to fetch (in-scope unread pages
    are the crawl's; a failed fetch is not tried again)."""

    local_pr: np.ndarray
    estimate: np.ndarray
    view: DomainView
    scores: np.ndarray

    def best(self, k: int, excluded: np.ndarray | None = None) -> np.ndarray:
        """Node ids of the ``k`` best candidates that may be fetched, leaving out the node
        ids ``excluded`` (those the crawler's admission refused this round)."""
        scores = self.scores
        if excluded is not None and excluded.size:
            scores = np.where(np.isin(self.view.candidates, excluded), -np.inf, scores)
        chosen = top_candidates(self.view, scores, k)
        return chosen[np.isfinite(scores[np.searchsorted(self.view.candidates, chosen)])]

    def best_accepted(self, k: int, urls: list[str], accept: AcceptFn
                      ) -> list[tuple[int, str]]:
        """(URL id, URL) of the k best candidates that ``accept`` takes (it returns those
        of the pages it is given that it takes): the crawler's admission refuses some for
        good (a skipped suffix such as .pdf, a trap, another scheme), and the next best
        take their place, or a round of refused links would end the rounds unspent."""
        taken: list[tuple[int, str]] = []
        tried = np.empty(0, dtype=np.int64)
        while len(taken) < k:
            chosen = self.best(k - len(taken), tried)
            if chosen.size == 0:
                break
            taken += accept([(int(j) + 1, urls[int(j)]) for j in chosen])
            tried = np.concatenate([tried, chosen])
        return taken


def score_stored(stored: StoredDomain, selector: str, degree: str,
                 damping: float) -> StoredRound:
    """PageRank of L, of F, and the selector's scores of F's frontier (ValueError when the
    store holds no fetched page in scope)."""
    if stored.local.size == 0:
        raise ValueError("the store holds no fetched page inside the configured scope")
    domain = Subgraph(stored.local, graph_out_links(stored.graph))
    n = domain.n_local
    local_pr, _ = subgraph_pagerank(domain.view(degree, damping))
    domain.add(stored.outside)
    view = domain.view(degree, damping)
    f, _ = subgraph_pagerank(view)
    scores = resolve_selector(selector)(view, f, np.random.default_rng(0))
    wanted = ~stored.in_scope[view.candidates] & stored.fetchable[view.candidates]
    return StoredRound(local_pr, f[:n] / f[:n].sum(), view, np.where(wanted, scores, -np.inf))
