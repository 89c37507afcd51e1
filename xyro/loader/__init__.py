"""The XML loader (paper 003 §2–4): safe parsing, checks, links, canonical
signatures, the warehouse of versions, and the bookkeeping of documents waiting for DTDs.

libxml2 never fetches anything by itself here (DESIGN.md §7): every external DTD, parameter
entity and general entity is served from an in-memory :class:`EntityCache` that only the
crawler fills. A document whose DTD/entities are not cached yet comes out *pending* with the
list of URLs it needs; the crawl engine fetches them at priority 0 (LOADER) and loads the
document again.
"""

from xyro.loader.cache import EntityCache
from xyro.loader.canonical import canonical_signature
from xyro.loader.document import LoadResult, LoadStatus, load_document
from xyro.loader.links import XmlLink, extract_xml_links
from xyro.loader.settings import LoaderSettings
from xyro.loader.warehouse import Warehouse

__all__ = [
    "EntityCache", "LoadResult", "LoadStatus", "LoaderSettings", "Warehouse", "XmlLink",
    "canonical_signature", "extract_xml_links", "load_document",
]
