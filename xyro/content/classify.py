"""What a fetched body is: html, xml, dtd or other, from its media type and first bytes.

Xyro wants XML documents and the HTML pages that lead to them (paper 003 §3). Servers
mislabel both: XML served as text/plain, application/octet-stream or text/html (RSS feeds),
HTML served as XML, DTDs served as text/plain. The media type's family
(:mod:`xyro.media_types`, RFC 7303) decides first; the first bytes correct it, and decide
alone for the sniffed family (WHATWG MIME sniffing: unknown types are read by their bytes).
A body served as HTML is XML when it has an XML declaration and a root other than ``html``,
or when its root is a sitemap's or a feed's, declaration or not (a feed read as HTML would
never have its items found).
"""

from __future__ import annotations

import re
from typing import Literal

from w3lib.encoding import read_bom

from xyro.media_types import family
from xyro.net.filters import url_path as _path
from xyro.records import FetchResult

Kind = Literal["html", "xml", "dtd", "other"]


_DTD_SUFFIXES = (".dtd", ".ent", ".mod")
_SNIFF_BYTES = 2048

_DECL = re.compile(r"<\?xml\s[^>]*\?>", re.I)
_PI = re.compile(r"<\?[^>]*\?>")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_DOCTYPE = re.compile(r"<!doctype\s+([^\s>\[]+)", re.I)
_DTD_DECL = re.compile(r"<!(element|entity|attlist|notation)\s", re.I)
_ELEMENT = re.compile(r"<([A-Za-z_][\w.:-]*)")
#: Local names of the roots of sitemaps and feeds (urlset, sitemapindex, rss, rdf:RDF,
#: feed), the ones :func:`xyro.crawl.publishing.sniff_publication` reads: such a root is
#: XML whatever the media type says (paper 003 §3: the push channel).
PUBLICATION_ROOTS = frozenset({"urlset", "sitemapindex", "rss", "RDF", "feed"})


def sniff(head: bytes) -> tuple[Kind | None, bool]:
    """Guess the kind from the first bytes: (kind or None, has an XML declaration).

    Skips a BOM, whitespace, the XML declaration, comments and processing instructions,
    then looks at the DOCTYPE, DTD declarations or the root element.
    """
    kind, has_decl, _ = _sniff(head)
    return kind, has_decl


def _sniff(head: bytes) -> tuple[Kind | None, bool, str | None]:
    """:func:`sniff`, and the root element's name when the head shows it: the DOCTYPE's
    (an RSS 0.91 feed often has one), else the first element's."""
    text = _head_text(head[:_SNIFF_BYTES]).lstrip()
    has_decl = False
    while text:
        match = _DECL.match(text)
        if match:
            has_decl = True
        else:
            match = _COMMENT.match(text) or _PI.match(text)
        if not match:
            break
        text = text[match.end():].lstrip()
    doctype = _DOCTYPE.match(text)
    if doctype:
        name = doctype.group(1)
        return ("html" if name.lower() == "html" else "xml"), has_decl, name
    if _DTD_DECL.match(text):
        return "dtd", has_decl, None
    element = _ELEMENT.match(text)
    if element:
        name = element.group(1)
        return ("html" if name.lower() == "html" else "xml"), has_decl, name
    return ("xml" if has_decl else None), has_decl, None


def classify(result: FetchResult) -> Kind:
    """html, xml, dtd or other, from the media type's family corrected by the first bytes."""
    mime = result.content_type or ""
    guess, has_decl, root = _sniff(result.body)
    kind = family(mime)
    if kind == "dtd":
        return "dtd"
    if guess == "dtd" and _path(result.final_url).endswith(_DTD_SUFFIXES):
        return "dtd"   # DTD declarations alone are too weak a sign without the file name
    if kind == "html":
        # An XML declaration and a non-HTML root: a feed or document served as text/html;
        # a sitemap's or feed's root needs no declaration (an HTML page never starts so).
        publication = root is not None and root.rpartition(":")[2] in PUBLICATION_ROOTS
        return "xml" if guess == "xml" and (has_decl or publication) else "html"
    if kind == "xml":
        return "html" if guess == "html" else "xml"
    return guess if guess in ("html", "xml") else "other"


def _head_text(head: bytes) -> str:
    """Enough of the head as text to sniff markup; UTF-16/32 by BOM, else byte-wise."""
    bom_encoding, bom = read_bom(head)
    if bom_encoding and bom:
        return head[len(bom):].decode(bom_encoding, errors="ignore")
    return head.decode("latin-1")
