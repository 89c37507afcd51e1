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
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from xyro.loader.cache import EntityCache
from xyro.loader.catalogs import Catalogs
from xyro.net.urls import canonicalize

_WEB_SCHEMES = ("http://", "https://")


class CacheResolver(etree.Resolver):
    """Records what one parse asked for; serves only cached bytes."""

    def __init__(self, cache: EntityCache, max_url_length: int = 2048,
                 catalogs: Catalogs | None = None) -> None:
        super().__init__()
        self._cache = cache
        self._catalogs = catalogs
        self._max_url_length = max_url_length
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
            self.served.append(key)
            # base_url: relative references inside the DTD resolve against the DTD itself.
            return self.resolve_string(body, context, base_url=url)
        reason = self._cache.failure(key)
        if reason is not None:
            self.failed.append((key, reason))
        elif key not in self.needs:
            self.needs.append(key)
        return self.resolve_string(b"", context, base_url=url)
