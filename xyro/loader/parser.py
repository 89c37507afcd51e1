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


def may_load_externals(body: bytes) -> bool:
    """False only when ``body`` certainly has no DOCTYPE (ASCII-compatible, no "<!DOCTYPE").

    UTF-16/32 bodies (a BOM or NUL bytes up front) are assumed to have one, and so are
    bodies whose XML declaration names an encoding that may spell "<!DOCTYPE" in other
    bytes (UTF-7 writes it "+ADwAIQ-DOCTYPE"): only the ASCII-compatible ones are trusted.
    """
    head = body[:4]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        return True
    declared = _ENCODING_DECL.match(body[:200])
    if declared is not None and not _ASCII_COMPATIBLE.fullmatch(declared.group(1).lower()):
        return True
    return b"<!DOCTYPE" in body


def safe_parser(resolver: CacheResolver, *, validate: bool = False) -> etree.XMLParser:
    parser = etree.XMLParser(
        load_dtd=True, dtd_validation=validate, no_network=True, resolve_entities=True,
        huge_tree=False, attribute_defaults=False, recover=False, compact=True,
        collect_ids=False, remove_blank_text=False)
    parser.resolvers.add(resolver)
    return parser
