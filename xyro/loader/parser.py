"""The one way Xyro builds an lxml parser for untrusted XML (DESIGN.md §7, §8).

- ``no_network=True`` and a :class:`CacheResolver` that answers every external load, so
  libxml2's own loader (files, catalogs, network) is never reached;
- ``load_dtd=True`` and ``resolve_entities=True``: DTDs and parameter entities are needed
  for validation and entity declarations (lxml's ``"internal"`` mode silently drops
  external declarations, which breaks DocBook-style DTDs); external ones come only from
  the cache;
- ``huge_tree=False``: libxml2 keeps its limits — nesting depth 256, text nodes and names
  of at most 10 MB, and its entity amplification bound (billion laughs, quadratic blow-up
  end in "Maximum entity amplification factor exceeded");
- ``attribute_defaults=False``: DTD defaults do not leak into the canonical form, so a DTD
  change is not a document change; ``recover=False``: a broken document is an error, not a
  guessed tree (recover mode would also swallow the amplification error);
- ``remove_comments`` off (comments are kept in the stored bytes; the canonical form drops
  them), ``compact=True`` and ``collect_ids=False`` for speed.

lxml parsers are not thread-safe: build one per load (cheap next to parsing).

The charset parameter of the Content-Type is authoritative (RFC 7303 §3.1, §3.2, §8) unless
the body starts with a byte order mark (RFC 7303 §4.2, XML 1.0 Appendix F):
:func:`header_encoding` picks the encoding handed to the parser, which then ignores the
document's own declaration. External DTDs and entities are decoded by their own BOM and text
declaration either way (libxml2 applies the override to the document entity only).

A parse that may load external DTDs/entities (a document with a DOCTYPE, see
:func:`may_load_externals`) must run exclusive of every other lxml parse in the process,
since libxml2's entity loader is process-global: :mod:`xyro.content.parse_guard`.
"""

from __future__ import annotations

import re

from lxml import etree

from xyro.loader.resolver import CacheResolver

_ENCODING_DECL = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*<\?xml\b[^>]*?\bencoding\s*=\s*[\"']([^\"']*)[\"']")
# Encodings in which every ASCII character is its own byte, so "<!DOCTYPE" is found as such.
_ASCII_COMPATIBLE = re.compile(
    rb"utf-?8|(us-)?ascii|iso[-_]?8859[-_]\d+|latin-?\d|(windows|cp)-?12\d\d|koi8-[ru]|"
    rb"shift[-_]jis|euc-(jp|kr)|gb2312|gbk|gb18030|big5")
# UTF-8, UTF-16 BE/LE (and so UTF-32 LE), UTF-32 BE.
_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe", b"\x00\x00\xfe\xff")


def header_encoding(body: bytes, charset: str | None) -> str | None:
    """The encoding to parse ``body`` with, from its Content-Type ``charset``; None leaves it
    to the document (BOM, XML declaration, else UTF-8).

    None as well when the body starts with a BOM (it wins: RFC 7303 §4.2) and when libxml2
    does not know the name (a bogus charset must not end the document: its own declaration
    is used instead, as without a header).
    """
    name = (charset or "").strip()
    if not name or body.startswith(_BOMS):
        return None
    try:
        etree.XMLParser(encoding=name)  # lxml looks the name up here, before any parse
    except (LookupError, ValueError):  # unknown to libxml2 and iconv, or not a name at all
        return None
    return name


def may_load_externals(body: bytes, encoding: str | None = None) -> bool:
    """False only when ``body`` certainly has no DOCTYPE (ASCII-compatible, no "<!DOCTYPE").

    UTF-16/32 bodies (a BOM or NUL bytes up front) are assumed to have one, and so are
    bodies read in (``encoding``, from the Content-Type) or declaring an encoding that may
    spell "<!DOCTYPE" in other bytes (UTF-7 writes it "+ADwAIQ-DOCTYPE"): only the
    ASCII-compatible ones are trusted. The declaration is checked even under ``encoding``,
    since a load may fall back to it.
    """
    if encoding is not None and not _ascii_compatible(encoding.encode("ascii", "replace")):
        return True
    head = body[:4]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        return True
    declared = _ENCODING_DECL.match(body[:200])
    if declared is not None and not _ascii_compatible(declared.group(1)):
        return True
    return b"<!DOCTYPE" in body


def _ascii_compatible(name: bytes) -> bool:
    return _ASCII_COMPATIBLE.fullmatch(name.lower()) is not None


def safe_parser(resolver: CacheResolver, *, validate: bool = False,
                encoding: str | None = None) -> etree.XMLParser:
    """The parser of one load; ``encoding`` (from :func:`header_encoding`) overrides the
    document's declaration, nothing else."""
    parser = etree.XMLParser(
        encoding=encoding, load_dtd=True, dtd_validation=validate, no_network=True,
        resolve_entities=True, huge_tree=False, attribute_defaults=False, recover=False,
        compact=True, collect_ids=False, remove_blank_text=False)
    parser.resolvers.add(resolver)
    return parser
