"""Links of an XML page fetched for its links alone: the out-of-scope pages of the global
PageRank estimate (DESIGN.md §5), whose links F needs and whose bodies the warehouse must not
keep.

The body is parsed, never loaded: no DTD or external entity is read (no fetch, no catalog, no
local file, no wait for the crawler), no entity is expanded (so no XML bomb grows), nothing is
validated, signed or stored. Links live in elements and attributes
(:func:`xyro.loader.links.extract_xml_links`), which need none of that; what a DTD alone would
add (defaulted attributes) is not counted, as in a loaded document. A body that is not
well-formed XML has no links.

The parser asks no loader for anything (:func:`xyro.loader.parser.closed_parser`), and a body
that may hold a DOCTYPE is parsed under the exclusive parse guard all the same, as the loader
parses it (:func:`xyro.loader.parser.may_load_externals`): were libxml2 ever to ask for an
external subset, the loader that answers must be lxml's, not libxml2's own one put back by a
parse in another thread (:mod:`xyro.content.parse_guard`).
"""

from __future__ import annotations

import sys

from lxml import etree

from xyro.content.parse_guard import PARSES
from xyro.loader.crowding import crowded
from xyro.loader.links import XmlLinks, extract_xml_links
from xyro.loader.parser import closed_parser, may_load_externals
from xyro.loader.settings import LoaderSettings


def outside_links(body: bytes, url: str, max_url_length: int = 2048,
                  settings: LoaderSettings | None = None) -> XmlLinks:
    """The canonical links of the XML document ``body`` at ``url`` (at most ``MAX_LINKS``, as
    a loaded document's: :mod:`xyro.loader.links`); none when it does not parse, or is larger
    or more crowded than the loader would take (``max_document_bytes``,
    ``max_attributes_per_element``: reading the attributes of an element costs their square,
    :mod:`xyro.loader.crowding`, and these pages come from any host). Nothing external is
    loaded and no entity expanded (DESIGN.md §7; one parser per parse, as lxml parsers are
    not thread-safe). ``settings``: the loader's (its defaults when None)."""
    settings = settings or LoaderSettings()
    if len(body) > settings.max_document_bytes:
        return XmlLinks()
    guard = PARSES.exclusive if may_load_externals(body) else PARSES.shared
    try:
        with guard():
            root = etree.fromstring(body, closed_parser(resolve_internal=False), base_url=url)
    except (etree.XMLSyntaxError, ValueError, MemoryError, RecursionError):
        return XmlLinks()
    if root is None:
        return XmlLinks()
    # Namespaces in scope cost the canonical form only, which is not computed here.
    if crowded(root, settings.max_attributes_per_element, sys.maxsize) is not None:
        return XmlLinks()
    return extract_xml_links(root.getroottree(), url, max_url_length)
