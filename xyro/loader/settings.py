"""Loader limits, built from the ``loader:`` config section by the composition root."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoaderSettings:
    """Bounds on what one document may cost (DESIGN.md §7).

    ``max_expansion_factor``: the canonical form may be at most this many times the raw
    size (plus 1 MiB): our own entity-expansion bound on top of libxml2's amplification
    limit. ``max_entity_bytes``/``max_cache_entries``/``max_cache_bytes`` cap the DTD/entity
    cache (each entry, their number, their total);
    ``max_pending_bytes`` caps the bodies of documents held while their DTDs are fetched.
    ``max_attributes_per_element`` and ``max_namespaces_in_scope`` bound the work lxml's
    C14N and attribute access do per element, which grows with the square of an
    element's attributes and with the namespace declarations in scope
    (:mod:`xyro.loader.crowding`). The defaults equal those of the ``loader:`` config section.
    """

    max_document_bytes: int = 8 * 2**20
    validate: bool = True
    dtd_timeout_s: float = 600.0
    versions_per_url: int = 10
    max_expansion_factor: float = 10.0
    max_entity_bytes: int = 2 * 2**20
    max_cache_entries: int = 1000
    max_cache_bytes: int = 256 * 2**20
    max_pending_bytes: int = 256 * 2**20
    max_url_length: int = 2048
    max_attributes_per_element: int = 512
    max_namespaces_in_scope: int = 128
    #: How long a fetched DTD or entity serves documents before it is fetched again (it
    #: may have changed; documents are validated against it).
    entity_max_age_s: float = 86400.0
    #: DTD and entity URLs one document may have fetched, over all its rounds.
    max_entity_urls: int = 128
    #: How long a DTD or entity that could not be fetched fails the documents needing it
    #: at once; then it is asked again (a server's outage, a 500, is rarely for good).
    failed_need_retry_s: float = 3600.0
