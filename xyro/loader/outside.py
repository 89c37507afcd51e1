"""Links of an XML page fetched for its links alone: the out-of-scope pages of the global
PageRank estimate (DESIGN.md §5), whose links F needs and whose bodies the warehouse must not
keep.

The body is parsed, never loaded: no DTD or external entity is read (no fetch, no catalog, no
local file, no wait for the crawler), no entity is expanded (so no XML bomb grows), nothing is
validated, signed or stored. Links live in elements and attributes
(:func:`xyro.loader.links.extract_xml_links`), which need none of that; what a DTD alone would
add (defaulted attributes) is not counted, as in a loaded document. A body that is not
well-formed XML has no links.
"""

from __future__ import annotations

import sys

from lxml import etree

from xyro.content.parse_guard import PARSES
from xyro.loader.crowding import crowded
from xyro.loader.links import XmlLink, extract_xml_links
from xyro.loader.settings import LoaderSettings


class _NoExternals(etree.Resolver):
    """Answers every external load with nothing, so that libxml2's own loader (files,
    catalogs, network) is never reached even if a load were attempted."""

    def resolve(self, system_url: str, public_id: str, context: object) -> object:
        return self.resolve_string("", context)


def _parser() -> etree.XMLParser:
    """DTDs off, entities left unexpanded, libxml2's limits kept (DESIGN.md §7); one per
    parse, as lxml parsers are not thread-safe."""
    parser = etree.XMLParser(load_dtd=False, no_network=True, resolve_entities=False,
                             huge_tree=False, attribute_defaults=False, recover=False,
                             compact=True, collect_ids=False)
    parser.resolvers.add(_NoExternals())
    return parser


def outside_links(body: bytes, url: str, max_url_length: int = 2048,
                  settings: LoaderSettings | None = None) -> tuple[XmlLink, ...]:
    """The canonical links of the XML document ``body`` at ``url``; () when it does not
    parse, or is larger or more crowded than the loader would take (``max_document_bytes``,
    ``max_attributes_per_element``: reading the attributes of an element costs their square,
    :mod:`xyro.loader.crowding`, and these pages come from any host). Nothing external is
    loaded, so the shared parse guard suffices. ``settings``: the loader's (its defaults
    when None)."""
    settings = settings or LoaderSettings()
    if len(body) > settings.max_document_bytes:
        return ()
    try:
        with PARSES.shared():
            root = etree.fromstring(body, _parser(), base_url=url)
    except (etree.XMLSyntaxError, ValueError, MemoryError, RecursionError):
        return ()
    if root is None:
        return ()
    # Namespaces in scope cost the canonical form only, which is not computed here.
    if crowded(root, settings.max_attributes_per_element, sys.maxsize) is not None:
        return ()
    return extract_xml_links(root.getroottree(), url, max_url_length)
