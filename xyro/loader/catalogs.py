"""OASIS XML Catalogs: DTDs and entities resolved to local files before any fetch.

The mechanism ``xmllint --catalogs`` and every XML toolchain use (OASIS Standard *XML
Catalogs* 1.1, §6–7): a catalog maps the public and system identifiers a document names
(``-//OASIS//DTD DocBook XML V4.5//EN``, ``http://www.w3.org/TR/xhtml1/DTD/...``) to local
copies, so the loader neither fetches them nor asks W3C's servers for them again.

Supported entries: ``public``, ``system``, ``rewriteSystem``, ``systemSuffix``,
``delegatePublic``, ``delegateSystem``, ``nextCatalog``, ``group`` (``prefer`` and
``xml:base`` on the catalog and on groups). External-identifier resolution follows §7.1.2:
per catalog file, in order: exact system match, the longest ``rewriteSystem`` prefix, the
longest ``systemSuffix``, then ``delegateSystem`` (only the delegated catalogs are consulted,
longest prefix first, and their failure ends the resolution); then, when a public id is given
and either no system id is or ``prefer="public"`` applies, ``public`` and ``delegatePublic``
likewise; then the ``nextCatalog`` entries; then the next catalog file of the list.
``urn:publicid:`` identifiers are unwrapped (§6.4); public ids are whitespace-normalized (§6.2).

One departure, on purpose: when a system delegation cut the resolution short, the public id
alone is tried. The loader keeps a catalogued DTD's *web* address as its base (see
:mod:`xyro.loader.resolver`), so its modules arrive as ``http://www.oasis-open.org/.../dbpoolx.mod``
with their public ids, and Debian's catalog delegates that whole system prefix to a catalog that
lists only the driver file. libxml2 gets the same answer by another road: it takes the local
file as the base, so the modules' system ids are ``file:`` paths no delegation matches.

Security (DESIGN.md §8): only files a catalog names are ever opened: the configured catalog
files, the catalogs they delegate to or chain to, and the targets of their entries. A target
must be a regular file of at most ``max_entity_bytes``; catalog files are parsed without DTD,
entities or network. A catalog or target that cannot be read is a warning (logged once) and
leaves the identifier unresolved; never an error of the crawl. A target may also be an
http(s) URL (a mirror): the loader then fetches that URL instead.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from lxml import etree

from xyro.content.parse_guard import PARSES

log = logging.getLogger("xyro.loader.catalogs")

NS = "urn:oasis:names:tc:entity:xmlns:xml:catalog"
SYSTEM_CATALOG = "/etc/xml/catalog"
_MAX_CATALOG_BYTES = 16 * 2**20
_MAX_CATALOG_FILES = 1000     # a delegation web larger than this is a broken installation
_MAX_DEPTH = 16               # nextCatalog/delegate chains deeper than this are cut
_URN = "urn:publicid:"
_URN_CODES = (("%2B", "+"), ("%3A", ":"), ("%2F", "/"), ("%3B", ";"), ("%27", "'"),
              ("%3F", "?"), ("%23", "#"), ("%25", "%"))


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where an identifier resolves: a local file's bytes (``body``, read from ``path``),
    or another web address (``url``) to load instead."""

    path: str | None = None
    body: bytes | None = None
    url: str | None = None


@dataclass(slots=True)
class CatalogFile:
    """The entries of one catalog file, by kind, in document order."""

    system: dict[str, str] = field(default_factory=dict)
    rewrite_system: list[tuple[str, str]] = field(default_factory=list)
    system_suffix: list[tuple[str, str]] = field(default_factory=list)
    delegate_system: list[tuple[str, str]] = field(default_factory=list)
    public: dict[str, tuple[str, bool]] = field(default_factory=dict)
    delegate_public: list[tuple[str, str, bool]] = field(default_factory=list)
    next_catalogs: list[str] = field(default_factory=list)


class _NoMatch:
    """Delegation found candidate catalogs that all failed: the resolution ends (§7.1.2)."""


_NO_MATCH = _NoMatch()


def normalize_public(public_id: str) -> str:
    """§6.2: runs of whitespace become one space, none at either end."""
    return " ".join(public_id.split())


def unwrap_urn(identifier: str) -> str | None:
    """§6.4: ``urn:publicid:-:OASIS:DTD+DocBook...`` → ``-//OASIS//DTD DocBook...``; None
    when ``identifier`` is not such a URN."""
    if not identifier.lower().startswith(_URN):
        return None
    text = identifier[len(_URN):].replace("+", " ").replace(":", "//").replace(";", "::")
    for code, char in _URN_CODES:
        text = text.replace(code, char).replace(code.lower(), char)
    return text


def parse_catalog(data: bytes, base: str) -> CatalogFile:
    """The entries of a catalog file's bytes (``base``: its URI). Raises etree.XMLSyntaxError."""
    parser = etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True,
                             huge_tree=False, dtd_validation=False, remove_comments=True)
    with PARSES.shared():  # libxml2's entity loader is process-global (parse_guard)
        root = etree.fromstring(data, parser, base_url=base)
    out = CatalogFile()
    if root.tag != f"{{{NS}}}catalog":
        return out
    _read_entries(root, root.get("prefer", "public") == "public", out)
    return out


def _read_entries(parent: etree._Element, prefer_public: bool, out: CatalogFile) -> None:
    for el in parent:
        if not isinstance(el.tag, str) or not el.tag.startswith(f"{{{NS}}}"):
            continue
        name = el.tag[len(NS) + 2:]
        base = el.base or ""
        if name == "group":
            _read_entries(el, el.get("prefer", "public" if prefer_public else "system")
                          == "public", out)
        elif name == "system" and el.get("systemId") and el.get("uri"):
            out.system.setdefault(el.get("systemId"), urljoin(base, el.get("uri")))
        elif name == "public" and el.get("publicId") and el.get("uri"):
            out.public.setdefault(normalize_public(el.get("publicId")),
                                  (urljoin(base, el.get("uri")), prefer_public))
        elif name == "rewriteSystem" and el.get("systemIdStartString") and el.get("rewritePrefix"):
            out.rewrite_system.append((el.get("systemIdStartString"),
                                       urljoin(base, el.get("rewritePrefix"))))
        elif name == "systemSuffix" and el.get("systemIdSuffix") and el.get("uri"):
            out.system_suffix.append((el.get("systemIdSuffix"), urljoin(base, el.get("uri"))))
        elif name == "delegateSystem" and el.get("systemIdStartString") and el.get("catalog"):
            out.delegate_system.append((el.get("systemIdStartString"),
                                        urljoin(base, el.get("catalog"))))
        elif name == "delegatePublic" and el.get("publicIdStartString") and el.get("catalog"):
            out.delegate_public.append((normalize_public(el.get("publicIdStartString")),
                                        urljoin(base, el.get("catalog")), prefer_public))
        elif name == "nextCatalog" and el.get("catalog"):
            out.next_catalogs.append(urljoin(base, el.get("catalog")))


def local_path(uri: str) -> str | None:
    """The file-system path of a ``file:`` URI or a plain absolute path, else None."""
    parts = urlsplit(uri)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return unquote(parts.path) or None
    if not parts.scheme and uri.startswith("/"):
        return uri
    return None


def _file_uri(path: str) -> str:
    return Path(path).absolute().as_uri()


class Catalogs:
    """The catalog list of ``loader.catalogs``, loaded lazily, shared by every load.

    Thread-safe: fetch workers resolve while others load catalog files. Catalog files are
    parsed once; target files are kept in a small LRU (``max_cached`` bodies).
    """

    def __init__(self, paths: tuple[str, ...], max_entity_bytes: int = 2 * 2**20,
                 max_cached: int = 256) -> None:
        self.roots = tuple(_file_uri(p) if local_path(p) is None and "://" not in p
                           else p for p in paths)
        self.max_entity_bytes = max_entity_bytes
        self._max_cached = max_cached
        self._files: dict[str, CatalogFile | None] = {}
        self._bodies: OrderedDict[str, bytes] = OrderedDict()
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def preload(self) -> list[str]:
        """Load the configured catalog files now; why those that cannot be used (missing,
        unreadable, not well-formed) cannot, each also logged once as a warning."""
        out = []
        for uri in self.roots:
            problem = self._load(uri)[1]
            if problem is not None:
                out.append(problem)
        return out

    def resolve(self, system_id: str | None, public_id: str | None) -> Resolved | None:
        """The local file (or mirror URL) for an external identifier, or None."""
        if not self.roots:
            return None
        system, public = _identifiers(system_id, public_id)
        if not system and not public:
            return None
        target = self._in_list(self.roots, system, public, set(), 0)
        if target is _NO_MATCH and system and public:
            # The modules a catalogued DTD names by public id keep the DTD's web base here,
            # so a system delegation for that base must not hide their public entries.
            target = self._in_list(self.roots, None, public, set(), 0)
        if target is None or target is _NO_MATCH:
            return None
        assert isinstance(target, str)
        if target.lower().startswith(("http://", "https://")):
            return Resolved(url=target)
        path = local_path(target)
        if path is None:
            self._warn(target, f"catalog entry for {system or public!r} names {target!r}, which "
                               "is neither a local file nor an http(s) URL; ignored")
            return None
        body = self._read_target(path, system or public or "")
        return None if body is None else Resolved(path=path, body=body)

    # -- the §7.1.2 walk --------------------------------------------------------------------

    def _in_list(self, uris: list[str] | tuple[str, ...], system: str | None,
                 public: str | None, seen: set[tuple[str, str | None, str | None]],
                 depth: int) -> str | _NoMatch | None:
        if depth > _MAX_DEPTH:
            return None
        for uri in uris:
            if (uri, system, public) in seen:   # a catalog chain that loops
                continue
            seen.add((uri, system, public))
            catalog = self._load(uri)[0]
            if catalog is None:
                continue
            found = self._in_file(catalog, system, public, seen, depth)
            if found is not None:
                return found
        return None

    def _in_file(self, cat: CatalogFile, system: str | None, public: str | None,
                 seen: set[tuple[str, str | None, str | None]], depth: int) -> str | _NoMatch | None:
        if system:
            found = _system_match(cat, system)
            if found is not None:
                return found
            delegates = _delegates(cat.delegate_system, system)
            if delegates:
                return self._in_list(delegates, system, None, seen, depth + 1) or _NO_MATCH
        if public:
            entry = cat.public.get(public)
            if entry is not None and (not system or entry[1]):
                return entry[0]
            delegates = _delegates([(p, c) for p, c, prefer in cat.delegate_public
                                    if not system or prefer], public)
            if delegates:
                return self._in_list(delegates, None, public, seen, depth + 1) or _NO_MATCH
        for uri in cat.next_catalogs:
            found = self._in_list([uri], system, public, seen, depth + 1)
            if found is not None:
                return found
        return None

    # -- files ------------------------------------------------------------------------------

    def _load(self, uri: str) -> tuple[CatalogFile | None, str | None]:
        with self._lock:
            if uri in self._files:
                return self._files[uri], None
            if len(self._files) >= _MAX_CATALOG_FILES:
                return None, None
        path = local_path(uri)
        problem = None
        catalog = None
        if path is None:
            problem = f"XML catalog {uri!r} is not a local file; only local catalogs are read"
        else:
            data, problem = _read_regular(path, _MAX_CATALOG_BYTES, "XML catalog")
            if data is not None:
                try:
                    catalog = parse_catalog(data, uri)
                except etree.XMLSyntaxError as exc:
                    problem = f"XML catalog {path} is not well-formed XML ({exc}); ignored"
        if problem is not None:
            problem += " (loader.catalogs)"
            self._warn(uri, problem)
        with self._lock:
            self._files[uri] = catalog
        return catalog, problem

    def _read_target(self, path: str, identifier: str) -> bytes | None:
        with self._lock:
            body = self._bodies.get(path)
            if body is not None:
                self._bodies.move_to_end(path)
                return body
        body, problem = _read_regular(path, self.max_entity_bytes,
                                      f"the file an XML catalog names for {identifier!r}")
        if body is None:
            self._warn(path, f"{problem}; the identifier is loaded from the web instead")
            return None
        with self._lock:
            self._bodies[path] = body
            while len(self._bodies) > self._max_cached:
                self._bodies.popitem(last=False)
        return body

    def _warn(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        log.warning("%s", message)


def _identifiers(system_id: str | None, public_id: str | None) -> tuple[str | None, str | None]:
    """§7.1.1: unwrap urn:publicid: identifiers; a system id that is one becomes the public id."""
    public = normalize_public(public_id) if public_id else None
    if public:
        public = normalize_public(unwrap_urn(public) or public)
    system = system_id or None
    if system:
        unwrapped = unwrap_urn(system)
        if unwrapped is not None:
            public = public or normalize_public(unwrapped)
            system = None
    return system, public


def _system_match(cat: CatalogFile, system: str) -> str | None:
    exact = cat.system.get(system)
    if exact is not None:
        return exact
    prefixes = [(len(p), rewrite + system[len(p):]) for p, rewrite in cat.rewrite_system
                if system.startswith(p) and _stays_below(system[len(p):])]
    if prefixes:
        return max(prefixes)[1]
    suffixes = [(len(s), uri) for s, uri in cat.system_suffix if system.endswith(s)]
    return max(suffixes)[1] if suffixes else None


def _stays_below(rest: str) -> bool:
    """False if the part of a system id after a ``rewriteSystem`` prefix climbs out of the
    rewrite's folder (a ``..`` segment, percent-encoded or not): only files a catalog names,
    or files below a folder it names, are ever opened (DESIGN.md §7)."""
    return not any(seg in ("..", ".") for seg in unquote(rest).replace("\\", "/").split("/"))


def _delegates(entries: list[tuple[str, str]], identifier: str) -> list[str]:
    """Catalogs of the entries whose start string ``identifier`` begins with, longest first."""
    matching = sorted(((len(start), i, catalog) for i, (start, catalog) in enumerate(entries)
                       if identifier.startswith(start)), key=lambda t: (-t[0], t[1]))
    return list(dict.fromkeys(catalog for _, _, catalog in matching))


def _read_regular(path: str, max_bytes: int, what: str) -> tuple[bytes | None, str | None]:
    """The bytes of a regular file of at most ``max_bytes``, or (None, why not).

    Opened without blocking (a FIFO must not hang a worker) and checked with fstat, so a
    device, FIFO or directory is refused whatever a symlink pointed at.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, f"{what} {path} cannot be opened: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"{what} {path} is not a regular file"
        if info.st_size > max_bytes:
            return None, f"{what} {path} is {info.st_size} bytes, more than {max_bytes}"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return None, f"{what} {path} cannot be read: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return None, f"{what} {path} grew past {max_bytes} bytes while read"
    return data, None
