"""The lxml resolver of one load: serves DTDs and entities from the XML catalogs and the
cache, nothing else.

libxml2 hands every external subset, parameter entity and general entity it wants to the
registered resolvers first; returning a document from here means its own loader (files,
libxml2's own catalog lookup, the network) is never consulted. So this resolver ALWAYS
returns something:

- an identifier the configured XML catalogs (:mod:`xyro.loader.catalogs`) resolve to a local
  file → that file's bytes, with the requested http(s) URL kept as its base, so the relative
  references inside it resolve as they would on the web (and are looked up in turn); a
  catalog that maps to another http(s) URL (a mirror) → that URL, as below;
- an http(s) URL in the cache → its cached bytes;
- an http(s) URL not cached (or known to have failed) → an empty entity, and the URL is
  recorded as a *need* (the crawler fetches it at priority 0, then the document is loaded
  again) or as a failure;
- anything else (``file:``, ``ftp:``, ``jar:``, a bare path, ``urn:``...) → an empty entity,
  recorded as *refused*: the document ends in ERROR. Nothing local is ever read.

External entities on other hosts are treated like DTDs: fetched through the crawler (robots
.txt, politeness, private-address rules, caps), never by libxml2.

What one parse may draw from the cache is bounded (``max_served_bytes``; catalog files, the
operator's own, do not count): libxml2's amplification limit counts the bytes of external
entities as input, so each entity served lets the tree grow several times its size (a
document of a few hundred bytes referencing three cached 2 MiB entities four times each
took 1 GB). Past the bound the resolver answers with an empty entity and records it
(``over_budget``): the document ends in ERROR.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from xyro.loader.cache import EntityCache
from xyro.loader.catalogs import Catalogs
from xyro.net.urls import canonicalize

_WEB_SCHEMES = ("http://", "https://")
# "<!ELEMENT" as it is spelt in ASCII-compatible encodings, UTF-16 and UTF-32.
_ELEMENT_DECLARATIONS = tuple("<!ELEMENT".encode(codec) for codec in (
    "ascii", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))


def mentions_element_declaration(data: bytes) -> bool:
    """True when ``data`` holds the text ``<!ELEMENT`` (an element type declaration, or that
    text in a comment or literal), in an ASCII-compatible encoding, UTF-16 or UTF-32."""
    return any(spelt in data for spelt in _ELEMENT_DECLARATIONS)


class CacheResolver(etree.Resolver):
    """Records what one parse asked for; serves only cached bytes, at most
    ``max_served_bytes`` of them (None: no bound)."""

    def __init__(self, cache: EntityCache, max_url_length: int = 2048,
                 catalogs: Catalogs | None = None, max_served_bytes: int | None = None) -> None:
        super().__init__()
        self._cache = cache
        self._catalogs = catalogs
        self._max_url_length = max_url_length
        self.max_served_bytes = max_served_bytes
        self.served_bytes = 0
        self.over_budget: tuple[str, int] | None = None  # the first URL refused, its size
        # Whether a DTD or entity served spells out an element declaration (whether an
        # internal subset that loads parameter entities is a grammar: xyro.loader.document).
        self.declares_elements = False
        self.from_catalog: list[str] = []
        self.catalog_bases: dict[str, str] = {}  # base URL given to libxml2 → local path
        self.needs: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.refused: list[str] = []
        self.served: list[str] = []

    def resolve(self, system_url: str | None, public_id: str | None, context: object) -> object:
        url = system_url or ""
        if self._catalogs is not None:
            found = self._catalogs.resolve(system_url, public_id)
            if found is not None and found.body is not None and found.path is not None:
                self.from_catalog.append(found.path)
                web = url.lower().startswith(_WEB_SCHEMES)
                base = url if web else Path(found.path).as_uri()
                self.catalog_bases[base] = found.path
                self._saw(found.body)
                return self.resolve_string(found.body, context, base_url=base)
            if found is not None and found.url is not None:
                url = found.url
        if not url.lower().startswith(_WEB_SCHEMES):
            self.refused.append(url or f"(public id {public_id!r} without a system id)")
            return self.resolve_string(b"", context)
        key = canonicalize(url, max_length=self._max_url_length)
        if key is None:
            self.refused.append(url)
            return self.resolve_string(b"", context)
        body = self._cache.get(key)
        if body is not None:
            return self._serve(key, url, body, context)
        reason = self._cache.failure(key)
        if reason is not None:
            self.failed.append((key, reason))
        elif key not in self.needs:
            self.needs.append(key)
        return self.resolve_string(b"", context, base_url=url)

    def _serve(self, key: str, url: str, body: bytes, context: object) -> object:
        """``body``, cached for ``key``, unless it would pass ``max_served_bytes`` (then, and
        for every load after, an empty entity)."""
        limit = self.max_served_bytes
        if self.over_budget is not None or (
                limit is not None and self.served_bytes + len(body) > limit):
            self.over_budget = self.over_budget or (key, len(body))
            return self.resolve_string(b"", context, base_url=url)
        self.served.append(key)
        self.served_bytes += len(body)
        self._saw(body)
        # base_url: relative references inside the DTD resolve against the DTD itself.
        return self.resolve_string(body, context, base_url=url)

    def _saw(self, body: bytes) -> None:
        if not self.declares_elements:
            self.declares_elements = mentions_element_declaration(body)
