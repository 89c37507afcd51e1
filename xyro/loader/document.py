"""Loading one XML document: parse safely, check, sign, find links (paper 003 §3–4; DESIGN.md §7).

:func:`load_document` is pure CPU work on bytes already fetched; it runs in the crawler's
fetch workers. It never blocks on the network: a document whose DTD or external entities
are not in the :class:`EntityCache` comes back ``PENDING`` with the URLs it needs (resolved
against the document or DTD URL). The engine fetches them at priority 0 and calls it again;
a DTD that references more parameter entities yields more needs on the next call.

The charset of the Content-Type is authoritative unless a BOM says otherwise (RFC 7303 §3.2,
§4.2; :func:`~xyro.loader.parser.header_encoding`). A body whose bytes are invalid in that
charset is read once more by its own declaration, as mislabelled servers (a site-wide
``charset=utf-8`` over Latin-1 files that declare it) are common and were loaded before.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, replace

from lxml import etree

from xyro.content.html_links import resolve_href
from xyro.content.parse_guard import PARSES
from xyro.loader.cache import EntityCache
from xyro.loader.canonical import canonical_form
from xyro.loader.catalogs import Catalogs
from xyro.loader.crowding import crowded
from xyro.loader.links import XSI, XmlLink, extract_xml_links
from xyro.loader.parser import header_encoding, may_load_externals, safe_parser
from xyro.loader.resolver import CacheResolver, mentions_element_declaration
from xyro.loader.settings import LoaderSettings
from xyro.net.urls import canonicalize

_MAX_ERRORS = 3  # validation messages kept per version
_MAX_DETAIL = 500
# What lxml raises on input it cannot handle, past what _parse already turns into messages
# (XPath and C14N errors, refused values, exhausted memory or C recursion).
_LXML_FAILURES = (etree.LxmlError, ValueError, MemoryError, RecursionError)


class LoadStatus(enum.StrEnum):
    LOADED = "loaded"
    PENDING = "pending"
    ERROR = "error"


class LoadError(enum.StrEnum):
    """error_kind values of documents the loader rejects (stored as these strings)."""

    PARSE = "parse"          # not well-formed, bad encoding, too deep, entity amplification,
    #                          crowded elements, anything else lxml fails on
    TOO_LARGE = "too_large"  # more than loader.max_document_bytes, alone or with the DTDs
    #                          and external entities it draws from the cache
    ENTITY = "entity"        # a DTD or external entity could not be fetched
    ENTITY_REFUSED = "entity_refused"  # one it may not fetch: not http(s), refused by the
    #                                    admission, past loader.max_entity_urls (lasting)
    TIMEOUT = "timeout"      # its DTD/entities did not arrive within loader.dtd_timeout_s


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What loading one document produced.

    LOADED: ``signature`` (MD5 of the C14N 2.0 form), ``links``, ``valid`` (None when no
    DTD declares its elements or validation is off), ``validation_error``, ``dtd_url``,
    ``schema_url``. PENDING: ``needs``. ERROR: ``error_kind`` and ``error_detail``.
    """

    status: LoadStatus
    needs: tuple[str, ...] = ()
    signature: bytes | None = None
    links: tuple[XmlLink, ...] = ()
    valid: bool | None = None
    validation_error: str | None = None
    dtd_url: str | None = None
    schema_url: str | None = None
    canonical_bytes: int = 0
    error_kind: str | None = None
    error_detail: str | None = None
    from_catalog: int = 0   # external loads answered by an XML catalog's local file
    from_cache: int = 0     # ... and by the DTD/entity cache (fetched earlier)

    @classmethod
    def error(cls, kind: LoadError, detail: str) -> LoadResult:
        return cls(LoadStatus.ERROR, error_kind=kind.value, error_detail=detail[:_MAX_DETAIL])


@dataclass(slots=True)
class _Parsed:
    """One parse of the document: the tree or the problem, the resolver that served it, and
    the encoding it was read in (None: the document's own)."""

    tree: etree._ElementTree | None
    problem: str | None
    resolver: CacheResolver
    encoding: str | None
    bad_bytes: bool = False  # failed on bytes invalid in the encoding


def load_document(body: bytes, url: str, cache: EntityCache,
                  settings: LoaderSettings = LoaderSettings(), *,
                  signatures: bool = True, catalogs: Catalogs | None = None,
                  charset: str | None = None) -> LoadResult:
    """Parse ``body`` (the document at ``url``) under the safe parser and check it.

    ``catalogs``: XML catalogs consulted for every DTD and external entity before the cache.
    ``charset``: the charset parameter of its Content-Type, if any (RFC 7303 §3.2).
    Never raises for any body: whatever lxml raises ends in an ERROR result (DESIGN.md §7).
    """
    try:
        return _load(body, url, cache, settings, signatures, catalogs, charset)
    except _LXML_FAILURES as exc:
        return LoadResult.error(LoadError.PARSE, (
            f"{url}: lxml failed on it ({type(exc).__name__}: {exc}); not loaded"))


def _load(body: bytes, url: str, cache: EntityCache, settings: LoaderSettings,
          signatures: bool, catalogs: Catalogs | None, charset: str | None) -> LoadResult:
    if len(body) > settings.max_document_bytes:
        return LoadResult.error(LoadError.TOO_LARGE, (
            f"{url}: {len(body)} bytes, more than loader.max_document_bytes "
            f"({settings.max_document_bytes}); not loaded"))
    encoding = header_encoding(body, charset)
    guard = PARSES.exclusive if may_load_externals(body, encoding) else PARSES.shared
    with guard():
        parsed = _parse_document(body, url, cache, settings, catalogs, encoding)
    resolver, tree = parsed.resolver, parsed.tree
    blocked = _blocked(url, resolver)
    if blocked is not None:
        return blocked
    if tree is None:
        read_as = "" if parsed.encoding is None else (
            f" (read as {parsed.encoding}, the charset of its Content-Type)")
        return LoadResult.error(LoadError.PARSE,
                                f"{url} is not well-formed XML{read_as}: {parsed.problem}")
    # Before anything that reads attribute values or canonicalizes: on a crowded element
    # those cost minutes in C code no signal interrupts (xyro/loader/crowding.py).
    problem = crowded(tree.getroot(), settings.max_attributes_per_element,
                      settings.max_namespaces_in_scope)
    if problem is not None:
        return LoadResult.error(LoadError.PARSE, (
            f"{url}: {problem}; not loaded (raise that limit to load such documents)"))
    canonical = canonical_form(tree) if signatures else b""
    limit = settings.max_expansion_factor * len(body) + 2**20
    if len(canonical) > limit:
        return LoadResult.error(LoadError.PARSE, (
            f"{url}: entities expand the document to {len(canonical)} bytes, more than "
            f"{settings.max_expansion_factor:g}x its {len(body)} bytes + 1 MiB "
            f"(loader.max_expansion_factor); not loaded"))
    docinfo = tree.docinfo
    dtd_url = _dtd_url(docinfo.system_url, url, settings.max_url_length)
    grammar = settings.validate and _has_grammar(body, dtd_url, docinfo, resolver)
    loaded = LoadResult(
        LoadStatus.LOADED,
        signature=hashlib.md5(canonical, usedforsecurity=False).digest() if signatures else None,
        links=extract_xml_links(tree, url, settings.max_url_length), dtd_url=dtd_url,
        schema_url=_schema_url(tree.getroot(), url, settings.max_url_length),
        canonical_bytes=len(canonical), from_catalog=len(resolver.from_catalog),
        from_cache=len(resolver.served))
    if not grammar:
        return loaded
    # The validating parse builds a tree of its own: this one and the canonical form are
    # let go first, so the two never weigh on memory together.
    encoding = parsed.encoding
    del parsed, tree, docinfo, canonical
    with guard():
        valid, validation_error = _validate(body, url, cache, settings, catalogs, encoding)
    return replace(loaded, valid=valid, validation_error=validation_error)


def _parse_document(body: bytes, url: str, cache: EntityCache, settings: LoaderSettings,
                    catalogs: Catalogs | None, encoding: str | None) -> _Parsed:
    """Parse in the header's ``encoding``; when its bytes are invalid in it, once more by the
    document's own declaration, kept only if that succeeds (the caller holds the guard)."""
    first = _parse(body, url, _resolver(body, cache, settings, catalogs), encoding)
    if first.tree is not None or encoding is None or not first.bad_bytes:
        return first
    second = _parse(body, url, _resolver(body, cache, settings, catalogs), None)
    return second if second.tree is not None else first


def _resolver(body: bytes, cache: EntityCache, settings: LoaderSettings,
              catalogs: Catalogs | None) -> CacheResolver:
    """The resolver of one parse of ``body``: the document and what it draws from the cache
    together stay within loader.max_document_bytes, which bounds libxml2's input and so what
    its amplification limit lets entities expand to (xyro/loader/resolver.py)."""
    return CacheResolver(cache, settings.max_url_length, catalogs,
                         max_served_bytes=max(settings.max_document_bytes - len(body), 0))


def _parse(body: bytes, url: str, resolver: CacheResolver, encoding: str | None) -> _Parsed:
    """Parse under the safe parser (the caller holds the parse guard)."""
    parser = safe_parser(resolver, encoding=encoding)
    try:
        root = etree.fromstring(body, parser, base_url=url)
    except etree.XMLSyntaxError as exc:
        bad_bytes = exc.code == etree.ErrorTypes.ERR_INVALID_ENCODING
        return _Parsed(None, _withheld(exc, resolver) or str(exc), resolver, encoding, bad_bytes)
    except (ValueError, MemoryError, RecursionError) as exc:  # lxml refusing the input
        return _Parsed(None, f"{type(exc).__name__}: {exc}", resolver, encoding)
    if root is None:
        return _Parsed(None, "no root element", resolver, encoding)
    return _Parsed(root.getroottree(), None, resolver, encoding)


def _withheld(exc: etree.XMLSyntaxError, resolver: CacheResolver) -> str | None:
    """A message that names the local file instead of quoting it, when the error lies in a
    file an XML catalog resolved: libxml2's messages quote names and text of the input
    ("Premature end of data in tag x"), and an operator's catalog may name any file."""
    bases = resolver.catalog_bases
    if not bases:
        return None
    for entry in exc.error_log:
        path = bases.get(entry.filename or "")
        if path is not None:
            return (f"line {entry.line} of {path}, which an XML catalog (loader.catalogs) gave "
                    f"for {entry.filename}, is not a well-formed DTD or entity (libxml2's "
                    "message is withheld: it may quote the local file)")
    return None


def _blocked(url: str, resolver: CacheResolver) -> LoadResult | None:
    """Refused, failed or too large external loads end the document; missing ones make it
    wait."""
    if resolver.refused:
        return LoadResult.error(LoadError.ENTITY_REFUSED, (
            f"{url} refers to {resolver.refused[0]!r}: only http(s) DTDs and entities are "
            f"loaded, through the crawler; local files and other schemes are never read"))
    if resolver.over_budget is not None:
        dep, size = resolver.over_budget
        return LoadResult.error(LoadError.TOO_LARGE, (
            f"{url}: with {dep} ({size} bytes) its DTDs and external entities would pass "
            f"{resolver.max_served_bytes} bytes, what loader.max_document_bytes leaves beside "
            f"the document itself ({resolver.served_bytes} already read); not loaded (raise "
            f"that limit, or have an XML catalog (loader.catalogs) serve the DTD locally)"))
    if resolver.failed:
        dep, reason = resolver.failed[0]
        return LoadResult.error(LoadError.ENTITY, f"{url} needs {dep}, which failed: {reason}")
    if resolver.needs:
        return LoadResult(LoadStatus.PENDING, needs=tuple(resolver.needs))
    return None


def _has_grammar(body: bytes, dtd_url: str | None, docinfo: etree.DocInfo,
                 resolver: CacheResolver) -> bool:
    """Whether the document's DTD declares elements to validate against: an external subset
    is taken to; an internal subset (with no external one) when its text, or a DTD or entity
    it loaded, spells out an element declaration. One that declares only entities, as XSLT
    and SVG files use it, is no grammar: such a document is not judged valid or invalid.

    Never asks lxml (``docinfo.internalDTD.iterelements()``): building that DTD object copies
    the DTD in time quadratic in the attributes declared on one element, in C code holding
    the GIL (20,000 froze every thread of the daemon for 24 s). Scanning the bytes costs a
    pass over the body; it may judge a document quoting ``<!ELEMENT`` in a comment or
    CDATA section, or miss a declaration spelt with character references.
    """
    if dtd_url is not None:
        return True
    if not docinfo.doctype:  # no DOCTYPE at all (lxml reads only its name and ids here)
        return False
    return resolver.declares_elements or mentions_element_declaration(body)


def _validate(body: bytes, url: str, cache: EntityCache, settings: LoaderSettings,
              catalogs: Catalogs | None, encoding: str | None) -> tuple[bool, str | None]:
    """DTD validity: (valid, first messages), from a validating parse (in the ``encoding``
    the document was read in) that sees both subsets. libxml2 validates while it parses,
    without the GIL, in time linear in the DTD and in the document's elements times the
    attributes declared for each; lxml's DTD objects (``docinfo.externalDTD``) are never
    built: see :func:`_has_grammar`."""
    resolver = _resolver(body, cache, settings, catalogs)
    parser = safe_parser(resolver, validate=True, encoding=encoding)
    try:
        etree.fromstring(body, parser, base_url=url)
    except etree.XMLSyntaxError as exc:
        return False, _messages(parser.error_log) or str(exc)[:_MAX_DETAIL]
    return True, None


def _messages(log: etree._ListErrorLog) -> str:
    errors = [f"line {e.line}: {e.message}" for e in log if e.level >= etree.ErrorLevels.ERROR]
    return "; ".join(errors[:_MAX_ERRORS])[:_MAX_DETAIL]


def _dtd_url(system_url: str | None, url: str, max_length: int) -> str | None:
    if not system_url:
        return None
    absolute = resolve_href(url, system_url)
    return canonicalize(absolute, max_length=max_length) if absolute else system_url


def _schema_url(root: etree._Element, url: str, max_length: int) -> str | None:
    """The root's XML Schema location: noNamespaceSchemaLocation, else the first
    location of xsi:schemaLocation."""
    loc = root.get(f"{{{XSI}}}noNamespaceSchemaLocation")
    if not loc:
        pairs = (root.get(f"{{{XSI}}}schemaLocation") or "").split()
        loc = pairs[1] if len(pairs) >= 2 else None
    if not loc:
        return None
    absolute = resolve_href(url, loc)
    return canonicalize(absolute, max_length=max_length) if absolute else None
