"""Links in XML documents (paper 003 §3: "the loader discovers what Xyro
cannot"): the loader hands them back to the crawler and to Link-Data.

What counts as a link, in document order:

- ``<?xml-stylesheet href?>`` processing instructions of the prolog (kind ``stylesheet``);
- ``xlink:href`` on any element (``xlink``);
- ``xsi:schemaLocation`` (the location of each namespace/location pair) and
  ``xsi:noNamespaceSchemaLocation`` (``schema``); ``schemaLocation`` of ``xs:import``,
  ``xs:include``, ``xs:redefine`` (``schema``);
- ``xi:include href`` (``xinclude``) — recorded, never processed;
- ``xsl:import``/``xsl:include href`` (``xsl``);
- ``rdf:resource`` on any element (``rdf``): RDF/XML's reference to another resource;
- RSS ``<link>`` text and ``<enclosure url>`` (``rss``), Atom ``<link href>`` (``atom``);
- other attributes named href, src, url or uri in any namespace (``href``).

In an XSLT stylesheet, attribute values of literal result elements holding ``{`` are
attribute value templates (``href="{$filename}"``), written into the output, not links of
the stylesheet: they are skipped.

Relative references resolve against ``xml:base`` (the chain of xml:base values over the
document URL, RFC 3986 resolution at each step) and are canonicalized; what is not crawlable
(mailto:, javascript:, fragments only) is dropped.

At most ``MAX_LINKS`` (65534, the paper's per-page limit, as for HTML pages:
:mod:`xyro.content.html_links`) links are kept, the first in document order; the walk ends
at the next one, and ``truncated`` of the returned :class:`XmlLinks` says when the cap bound.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urljoin

from lxml import etree

from xyro.content.html_links import MAX_LINKS, Resolver, likely_xml
from xyro.net.urls import canonicalize, join_plain, plain_directory

XLINK = "http://www.w3.org/1999/xlink"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
XSD = "http://www.w3.org/2001/XMLSchema"
XSL = "http://www.w3.org/1999/XSL/Transform"
ATOM = "http://www.w3.org/2005/Atom"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
XINCLUDE = frozenset({"http://www.w3.org/2001/XInclude", "http://www.w3.org/2003/XInclude"})

_XLINK_HREF = f"{{{XLINK}}}href"
_RDF_RESOURCE = f"{{{RDF}}}resource"
_XSI_LOC = f"{{{XSI}}}schemaLocation"
_XSI_NONS = f"{{{XSI}}}noNamespaceSchemaLocation"
_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
_URL_NAMES = frozenset({"href", "src", "url", "uri"})
_XSD_REFS = frozenset({f"{{{XSD}}}import", f"{{{XSD}}}include", f"{{{XSD}}}redefine"})
_XSL_REFS = frozenset({f"{{{XSL}}}import", f"{{{XSL}}}include"})
_ALWAYS_XML = frozenset({"stylesheet", "schema", "xinclude", "xsl"})


class XmlLink(NamedTuple):
    """A canonical out-link of an XML document (a named tuple: a document has hundreds, and a
    frozen dataclass costs four times as much to build)."""

    url: str
    kind: str
    likely_xml: bool


class XmlLinks(tuple[XmlLink, ...]):
    """The links of one document in document order (a tuple), and ``truncated``: True when
    it had more than ``MAX_LINKS`` and those past the cap were dropped."""

    truncated: bool

    def __new__(cls, links: tuple[XmlLink, ...] | list[XmlLink] = (),
                truncated: bool = False) -> XmlLinks:
        self = super().__new__(cls, links)
        self.truncated = truncated
        return self


class _Full(Exception):
    """Raised by the walk of :func:`extract_xml_links` at the link past ``MAX_LINKS``."""


def extract_xml_links(tree: etree._ElementTree, url: str,
                      max_url_length: int = 2048) -> XmlLinks:
    """The links of ``tree`` (parsed with ``base_url=url``), canonical, in document order: the
    first ``MAX_LINKS`` of them (the module doc)."""
    out: list[XmlLink] = []
    try:
        _walk(tree, url, max_url_length, out)
    except _Full:
        # Links past the paper's per-page limit would reach the frontier and the OPIC visit
        # while the page's stored links stop at the limit (DESIGN.md §4: at most 65534).
        return XmlLinks(out[:MAX_LINKS], truncated=True)
    return XmlLinks(out)


def _walk(tree: etree._ElementTree, url: str, max_url_length: int,
          out: list[XmlLink]) -> None:
    """Append the links of ``tree`` to ``out``; raises :class:`_Full` past ``MAX_LINKS``."""
    root = tree.getroot()
    # The xml:base chain, as a stack kept along the walk: (the first element after the subtree
    # of an element carrying xml:base, or None at the document's end; the base it sets),
    # innermost last. lxml's ``el.base`` would walk every ancestor for every link, minutes
    # for a document of deeply nested xml:base elements.
    bases: list[tuple[etree._Element | None, str]] = []
    resolvers: dict[str, Resolver] = {url: Resolver(url)}  # the base is split once, not per link
    plain = plain_directory(url)   # fast joins outside every xml:base
    templates = _is_stylesheet(root)

    def resolver_of(base: str) -> Resolver:
        resolver = resolvers.get(base)
        if resolver is None:
            resolver = resolvers[base] = Resolver(base)
        return resolver

    def add(href: str | None, kind: str, el: etree._Element | None) -> None:
        if not href or (templates and "{" in href and kind == "href"):
            return
        directory = plain if el is None or not bases else None
        # Most hrefs ("d12.xml", "sub/a.xml") join a plain base directly.
        canon = None if directory is None else join_plain(directory, href, max_url_length)
        if canon is None:
            base = bases[-1][1] if el is not None and bases else url
            absolute = resolver_of(base).resolve(href)
            if not absolute:
                return
            canon = canonicalize(absolute, max_length=max_url_length)
            if canon is None:
                return
        out.append(XmlLink(canon, kind, kind in _ALWAYS_XML or likely_xml(canon, None)))
        if len(out) > MAX_LINKS:
            raise _Full

    for pi in reversed(list(root.itersiblings(preceding=True))):
        if isinstance(pi, etree._ProcessingInstruction) and pi.target == "xml-stylesheet":
            add(pi.get("href"), "stylesheet", None)
    # Tag and attribute names repeat throughout a document: classify each name once.
    element_kinds: dict[str, str | None] = {}
    roles: dict[tuple[str, str], str | None] = {}
    for el in root.iter(etree.Element):
        while bases and bases[-1][0] is el:   # past the subtree of the innermost xml:base
            bases.pop()
        tag = el.tag
        own_base = el.get(_XML_BASE)
        if own_base is not None:   # it covers the element's own attributes too
            # urljoin, not the crawl's resolver: a base of a scheme the crawl does not follow
            # (file:, ftp:, urn:) is a base still, and the links under it are not crawlable.
            bases.append((_after_subtree(el),
                          urljoin(bases[-1][1] if bases else url, own_base)))
        kind = element_kinds.get(tag, _UNSEEN)
        if kind is _UNSEEN:
            kind = element_kinds[tag] = _element_kind(tag)
        if kind is not None:
            _element_links(el, kind, add)
        # items() reads each value by a scan of the attribute list (the square of their
        # number): bounded by loader.max_attributes_per_element (xyro/loader/crowding.py).
        for name, value in el.items():
            key = (tag, name)
            role = roles.get(key, _UNSEEN)
            if role is _UNSEEN:
                role = roles[key] = _attribute_role(tag, kind, name)
            if role is None:
                continue
            if role == "schema-pairs":
                for loc in value.split()[1::2]:
                    add(loc, "schema", el)
            else:
                add(value, role, el)


_UNSEEN = "?"


def _after_subtree(el: etree._Element) -> etree._Element | None:
    """The first element after ``el``'s subtree in document order (None: the document ends
    first): its next element sibling, or its nearest ancestor's. O(depth), once per element
    carrying xml:base, where the walk itself stays a plain ``iter``."""
    node: etree._Element | None = el
    while node is not None:
        following = next(node.itersiblings(etree.Element), None)
        if following is not None:
            return following
        node = node.getparent()
    return None


def _element_kind(tag: str) -> str | None:
    """What kind of element-borne link elements named ``tag`` may carry, or None."""
    if tag in _XSL_REFS:
        return "xsl"
    if tag in _XSD_REFS:
        return "schema"
    if tag[0] == "{" and tag.endswith("}include") and tag[1:tag.index("}")] in XINCLUDE:
        return "xinclude"
    if _local(tag) == "link":
        return "rss-link"
    if tag == "enclosure":
        return "enclosure"
    return None


def _element_links(el: etree._Element, kind: str, add) -> None:  # type: ignore[no-untyped-def]
    """Links that depend on the element: XInclude, XSLT and XSD references, RSS."""
    if kind == "xsl":
        add(el.get("href"), "xsl", el)
    elif kind == "schema":
        add(el.get("schemaLocation"), "schema", el)
    elif kind == "xinclude":
        add(el.get("href"), "xinclude", el)
    elif kind == "rss-link":
        if len(el) == 0 and el.text and not el.attrib:
            add(el.text.strip(), "rss", el)  # RSS 0.9x/2.0 and RSS 1.0 (RDF) channel/item link
    elif kind == "enclosure":
        add(el.get("url"), "rss", el)


def _attribute_role(tag: str, kind: str | None, name: str) -> str | None:
    """The link kind of attribute ``name`` on an element ``tag`` of element kind ``kind``,
    or None (not a link, or already taken by :func:`_element_links`)."""
    if name == _XLINK_HREF:
        return "xlink"
    if name == _RDF_RESOURCE:
        return "rdf"
    if name == _XSI_LOC:
        return "schema-pairs"
    if name == _XSI_NONS:
        return "schema"
    taken = ((name == "href" and kind in ("xsl", "xinclude"))
             or (name == "url" and kind == "enclosure"))
    if _local(name).lower() in _URL_NAMES and not taken:
        return "atom" if tag == f"{{{ATOM}}}link" else "href"
    return None


def _is_stylesheet(root: etree._Element) -> bool:
    """An XSLT stylesheet, or a simplified one (a literal result element with xsl:version)."""
    tag = root.tag
    return (isinstance(tag, str) and tag.startswith(f"{{{XSL}}}")) or (
        root.get(f"{{{XSL}}}version") is not None)


def _local(name: str) -> str:
    return name[name.index("}") + 1:] if name[0] == "{" else name

