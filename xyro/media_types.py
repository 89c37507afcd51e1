"""Media types: which Content-Types Xyro fetches and how each is read (RFC 7303, WHATWG).

One home for the rules, used by the configuration's defaults (``crawler.accept_content_types``),
the fetcher's accept filter and the content classifier, so the three cannot disagree:

- **xml**: ``application/xml``, ``text/xml`` and every ``*/*+xml`` type (RFC 7303 §4.2 and
  §9.2: the ``+xml`` suffix says the body is XML; XSLT, RDF, SVG, Atom, RSS, MathML...);
- **html**: ``text/html`` and ``application/xhtml+xml`` (XHTML pages are read for their links
  as HTML pages are; the first bytes still turn an XML feed served as text/html into XML);
- **dtd**: ``application/xml-dtd`` and the external parsed entities
  ``application/xml-external-parsed-entity`` / ``text/xml-external-parsed-entity``
  (RFC 7303 §9.4–9.5): resources the loader uses for validation and entities;
- **sniff**: no Content-Type, ``text/plain``, ``application/octet-stream`` (and its old alias
  ``binary/octet-stream``), and any other type an operator adds to the accept list: the
  body's first bytes decide (as the WHATWG MIME sniffing rules do for unknown types), and a
  body that is neither HTML, XML nor a DTD is an ERROR ``content_type``.

Patterns in the accept list use ``fnmatch`` wildcards: ``*/*+xml`` matches every XML
suffix type. A type that no pattern matches is refused before its body is read, with one
exception: a gzip file (``application/gzip``, ``application/x-gzip``: :data:`GZIP_TYPES`)
is a wrapper, not a kind of content. It is fetched when an accept pattern names it, or when
its URL's file name ends in ``.gz`` and names no skipped suffix under it (``sitemap.xml.gz``
yes, ``logs.tar.gz`` no: :func:`gzip_file_wanted`); the fetcher decompresses it under the
decoded-bytes cap and the classifier reads what it holds by its first bytes (the sniff
family), as sitemaps.org's ``sitemap.xml.gz`` asks. The same wanted ``.gz`` name served under any
other type (``application/octet-stream``, none, or ``application/xml``, the type of what it
holds) is decompressed too when its bytes are gzip (:func:`gzip_file`).
"""

from __future__ import annotations

import fnmatch
from typing import Literal

Family = Literal["html", "xml", "dtd", "sniff"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
XML_TYPES = frozenset({"application/xml", "text/xml"})
XML_SUFFIX = "+xml"
DTD_TYPES = frozenset({"application/xml-dtd", "application/xml-external-parsed-entity",
                       "text/xml-external-parsed-entity"})
SNIFFED_TYPES = frozenset({"text/plain", "application/octet-stream", "binary/octet-stream"})
#: Media types of a gzip file: the body is decompressed, then read as what it holds.
GZIP_TYPES = frozenset({"application/gzip", "application/x-gzip"})
GZIP_SUFFIX = ".gz"

#: ``crawler.skip_suffixes`` by default: URL path endings never fetched (media, archives,
#: binaries, office documents, fonts, styles, scripts). ``.svg`` is absent (SVG is XML:
#: ``image/svg+xml``), and so is ``.gz`` (``sitemap.xml.gz`` and gzipped XML are wanted).
DEFAULT_SKIP_SUFFIXES: tuple[str, ...] = (
    # images
    ".jpg", ".jpeg", ".jpe", ".png", ".gif", ".bmp", ".webp", ".ico", ".tif", ".tiff",
    ".svgz", ".avif", ".heic", ".psd", ".raw",
    # archives
    ".zip", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".rar", ".zst", ".lz", ".lzma", ".cab",
    # audio and video
    ".mp3", ".mp4", ".m4a", ".m4v", ".wav", ".ogg", ".oga", ".flac", ".aac", ".wma", ".mid",
    ".midi", ".avi", ".mov", ".mkv", ".webm", ".wmv", ".flv", ".mpg", ".mpeg", ".3gp", ".swf",
    # fonts, styles, scripts
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".css", ".js", ".mjs", ".map", ".wasm",
    # binaries and packages
    ".exe", ".msi", ".dll", ".so", ".dmg", ".iso", ".img", ".bin", ".apk", ".deb", ".rpm",
    ".jar", ".class", ".torrent",
    # office documents
    ".pdf", ".ps", ".eps", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods",
    ".odp", ".rtf",
)

#: ``crawler.accept_content_types`` by default: every family above, by pattern.
DEFAULT_ACCEPT_CONTENT_TYPES: tuple[str, ...] = (
    "text/html", "application/xhtml+xml",
    "application/xml", "text/xml", "*/*+xml",
    "application/xml-dtd", "application/xml-external-parsed-entity",
    "text/xml-external-parsed-entity",
    "text/plain", "application/octet-stream",
)


def family(mime: str | None) -> Family:
    """How a body served as ``mime`` (lowercase, no parameters) is read.

    Types outside the known families are sniffed: they reach the classifier only when an
    operator accepted them, and then the body decides.
    """
    if not mime:
        return "sniff"
    if mime in HTML_TYPES:
        return "html"
    if mime in XML_TYPES or (mime.endswith(XML_SUFFIX) and "/" in mime):
        return "xml"
    if mime in DTD_TYPES:
        return "dtd"
    return "sniff"


def accepted(mime: str | None, patterns: tuple[str, ...]) -> bool:
    """True when ``mime`` matches one of ``patterns`` (exact or ``fnmatch`` wildcard).

    A missing Content-Type is accepted: the body gets sniffed.
    """
    if mime is None:
        return True
    return any(mime == pattern or fnmatch.fnmatchcase(mime, pattern) for pattern in patterns)


def gzip_file_wanted(mime: str | None, file_name: str, skipped: frozenset[str] | set[str],
                     ) -> bool:
    """True when a body served as ``mime`` under ``file_name`` (the URL path's last segment,
    lowercase) is a gzip file worth fetching without an accept pattern: a gzip media type and
    a ``.gz`` name whose inner suffix (``.xml`` of ``sitemap.xml.gz``) is not in ``skipped``
    (``.tar`` of ``logs.tar.gz`` is)."""
    return mime in GZIP_TYPES and _wanted_gz_name(file_name, skipped)


def gzip_file(mime: str | None, file_name: str, skipped: frozenset[str] | set[str]) -> bool:
    """True when the body is to be read as a gzip file (decompressed, then sniffed): a gzip
    media type, or a wanted ``.gz`` name whatever its type: with none or as
    ``application/octet-stream`` (a web server with no mapping for ``.gz``, as nginx by
    default), or as the type of what it holds (``application/xml`` for ``sitemap.xml.gz``,
    a server that maps the inner suffix and sends no Content-Encoding). Bytes that turn out
    not to be gzip pass unchanged (``xyro.net.body``), so a type that told the truth loses
    nothing."""
    return mime in GZIP_TYPES or _wanted_gz_name(file_name, skipped)


def _wanted_gz_name(file_name: str, skipped: frozenset[str] | set[str]) -> bool:
    if not file_name.endswith(GZIP_SUFFIX):
        return False
    inner = file_name[:-len(GZIP_SUFFIX)]
    dot = inner.rfind(".")
    return dot <= 0 or inner[dot:] not in skipped
