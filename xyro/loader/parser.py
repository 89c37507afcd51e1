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
since libxml2's entity loader is process-global: :mod:`xyro.content.parse_guard`. Every other
parse runs shared, and its parser loads nothing external whatever the body holds
(:func:`safe_parser` outside an exclusive hold, :func:`closed_parser`): another parse may
have put libxml2's own loader back, which reads local files.
"""

from __future__ import annotations

import re

from lxml import etree

from xyro.content.parse_guard import PARSES
from xyro.loader.resolver import CacheResolver

# An XML declaration may hold any whitespace between its pseudo-attributes (libxml2 takes it
# all): its end is looked for this far into the body, and a body whose declaration does not
# end by then is assumed to declare anything.
DECLARATION_BOUND = 1024
_BLANK = rb"[ \t\r\n]"
# "<?xml" not followed by a name character: a declaration ("<?xml-stylesheet" is a PI).
_DECLARATION_START = re.compile(rb"(?:\xef\xbb\xbf)?" + _BLANK + rb"*<\?xml(?![\w.:\x80-\xff-])")
_PSEUDO_ATTRIBUTE = rb"([A-Za-z]+)" + _BLANK + rb"*=" + _BLANK + rb"*(?:\"([^\"<>]*)\"|'([^'<>]*)')"
_DECLARATION = re.compile(rb"<\?xml((?:" + _BLANK + rb"+" + _PSEUDO_ATTRIBUTE + rb")*)"
                          + _BLANK + rb"*\?>")
_PSEUDO_ATTRIBUTES = re.compile(_PSEUDO_ATTRIBUTE)
# "<?xm" in EBCDIC, which libxml2 detects and then reads the declared code page.
_EBCDIC_DECLARATION = b"\x4c\x6f\xa7\x94"
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

    UTF-16/32 and EBCDIC bodies (a BOM, NUL bytes or "<?xm" in EBCDIC up front) are assumed
    to have one, and so are bodies read in (``encoding``, from the Content-Type) or declaring
    an encoding that may spell "<!DOCTYPE" in other bytes (UTF-7 writes it "+ADwAIQ-DOCTYPE"):
    only the ASCII-compatible ones are trusted. The declaration is read to its end, however
    much whitespace it holds, and one that does not end within :data:`DECLARATION_BOUND`
    bytes or does not parse is assumed to declare such an encoding. The declaration is
    checked even under ``encoding``, since a load may fall back to it.
    """
    if encoding is not None and not _ascii_compatible(encoding.encode("ascii", "replace")):
        return True
    head = body[:4]
    if (head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head
            or head == _EBCDIC_DECLARATION):
        return True
    if not _declares_ascii(body):
        return True
    return b"<!DOCTYPE" in body


def _declares_ascii(body: bytes) -> bool:
    """True when ``body`` has no XML declaration, or a well-formed one naming no encoding or
    only ASCII-compatible ones (every ``encoding`` pseudo-attribute counts, whatever its case
    or place: libxml2's reading of a broken declaration is not guessed)."""
    start = _DECLARATION_START.match(body)
    if start is None:
        return True
    begin = start.end() - len(b"<?xml")
    end = body.find(b"?>", begin, begin + DECLARATION_BOUND)
    if end < 0:
        return False
    declaration = _DECLARATION.fullmatch(body, begin, end + 2)
    if declaration is None:
        return False
    return all(_ascii_compatible(double or single)
               for name, double, single in _PSEUDO_ATTRIBUTES.findall(declaration.group(1))
               if name.lower() == b"encoding")


def _ascii_compatible(name: bytes) -> bool:
    return _ASCII_COMPATIBLE.fullmatch(name.lower()) is not None


class NoExternals(etree.Resolver):
    """Answers every external load with nothing, so that libxml2's own loader (files,
    catalogs, network) is never reached through lxml's resolvers."""

    def resolve(self, system_url: str, public_id: str, context: object) -> object:
        return self.resolve_string("", context)


def closed_parser(*, resolve_internal: bool, encoding: str | None = None) -> etree.XMLParser:
    """A parser that asks no loader for anything, whatever the body holds: for parses under
    the shared guard, during which another parse may have put libxml2's own loader (local
    files, FIFOs) back (:mod:`xyro.content.parse_guard`).

    No DTD is loaded and external entities are neither loaded nor declared: with
    ``resolve_internal`` internal entities are expanded and a reference to an external one is
    an undefined entity (a parse error), otherwise no entity is expanded and references stay
    in the tree. ``collect_ids`` stays on: lxml's ``collect_ids=False`` sets a bit of
    libxml2's ``loadsubset``, which then loads the external subset and external parameter
    entities even with ``load_dtd=False``.
    """
    parser = etree.XMLParser(
        encoding=encoding, load_dtd=False, dtd_validation=False, no_network=True,
        resolve_entities="internal" if resolve_internal else False, huge_tree=False,
        attribute_defaults=False, recover=False, compact=True, remove_blank_text=False)
    parser.resolvers.add(NoExternals())
    return parser


def safe_parser(resolver: CacheResolver, *, validate: bool = False,
                encoding: str | None = None) -> etree.XMLParser:
    """The parser of one load; ``encoding`` (from :func:`header_encoding`) overrides the
    document's declaration, nothing else.

    Built while the calling thread holds no exclusive hold of
    :data:`~xyro.content.parse_guard.PARSES` (a body :func:`may_load_externals` judged
    DOCTYPE-free), it is a :func:`closed_parser`: should the body declare externals after
    all, it fails to parse rather than have them read by whichever loader is installed. A
    validating parser loads the DTD: it is refused there (ValueError, which ends the load in
    an error).
    """
    if not PARSES.holds_exclusive():
        if validate:
            raise ValueError(
                "DTD validation of a document parsed under the shared parse guard: it would "
                "load the DTD while other parses may have swapped libxml2's entity loader; "
                "not validated (xyro.loader.parser.may_load_externals judged it DOCTYPE-free)")
        return closed_parser(resolve_internal=True, encoding=encoding)
    parser = etree.XMLParser(
        encoding=encoding, load_dtd=True, dtd_validation=validate, no_network=True,
        resolve_entities=True, huge_tree=False, attribute_defaults=False, recover=False,
        compact=True, collect_ids=False, remove_blank_text=False)
    parser.resolvers.add(resolver)
    return parser
