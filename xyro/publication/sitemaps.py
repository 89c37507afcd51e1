"""Sitemaps (https://www.sitemaps.org/protocol.html): XML ``urlset`` and ``sitemapindex``,
gzip, and plain-text sitemaps, parsed from bytes into typed entries. Pure: no network.

Safety (DESIGN.md §7, §8): gzip is detected by its magic bytes and decompressed here with a
cap (a bomb stops at ``max_bytes`` of output); lxml never loads a DTD, resolves an entity or
touches the network, and a ``<loc>`` holding an entity reference is dropped, not expanded;
the XML is pulled in chunks and each entry freed once read, so memory stays bounded and
parsing stops at ``max_urls`` entries.

Location rule (sitemaps.org, "Sitemap file location"): a sitemap at
``http://example.com/catalog/sitemap.xml`` may list only URLs that start with
``http://example.com/catalog/`` — same scheme, host and port, under the sitemap's directory.
A sitemap index may list sitemaps on its own scheme, host and port. ``location`` chooses:

* ``"directory"`` (default): the protocol's rule above;
* ``"host"``: same scheme, host and port, any path (a site that puts its sitemaps in
  ``/sitemaps/`` but lists its whole site — common, and harmless for a crawler);
* ``"any"``: no location check (the crawl scope still applies downstream).

``also_allowed`` adds URL prefixes that are accepted in every mode: when a sitemap was
announced by the ``Sitemap:`` line of host H's robots.txt, the protocol lets it list H's URLs
wherever it is stored, so pass ``("https://H/",)``. Refused entries give an error note.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from lxml import etree

from xyro.content.parse_guard import PARSES
from xyro.net.body import BodyEncodingError, BodyTooLarge, Decoder
from xyro.net.urls import canonicalize
from xyro.publication.trust import parse_w3c_datetime

MAX_SITEMAP_URLS = 50_000
MAX_SITEMAP_BYTES = 50 * 2**20
#: Error notes kept per parse; the rest are counted in one final note.
MAX_ERROR_NOTES = 100
CHANGEFREQS = frozenset({"always", "hourly", "daily", "weekly", "monthly", "yearly", "never"})
GZIP_MAGIC = b"\x1f\x8b"
#: UTF-16 and UTF-32 byte order marks: such a body is XML, not a text sitemap (UTF-8 only),
#: and the pull parser reads it in UTF-16 as the crawl's sniff recognises it (libxml2's push
#: parser reads no UTF-32: such a sitemap is refused as not well-formed XML).
WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")
_CHUNK = 1 << 16

#: Options for every lxml parser of untrusted publication XML (DESIGN.md §7).
SECURE_PARSER_OPTIONS = dict(resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False, remove_comments=True, remove_pis=True)

# "&" not starting a reference: the most common sitemap/feed syntax error (raw query strings).
_BARE_AMPERSAND = re.compile(rb"&(?!#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z_][A-Za-z0-9._-]*;)")

Location = Literal["directory", "host", "any"]


class SitemapError(ValueError):
    """The body is not a usable sitemap (not one, corrupt gzip, over the size cap)."""


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<url>`` (or ``<sitemap>`` of an index, or one line of a text sitemap).

    ``url`` is canonical http(s); ``lastmod`` POSIX seconds; ``changefreq`` one of
    :data:`CHANGEFREQS`; ``priority`` in [0, 1]. Absent or invalid values are None.
    """

    url: str
    lastmod: float | None = None
    changefreq: str | None = None
    priority: float | None = None


@dataclass(frozen=True, slots=True)
class SitemapParse:
    """A parsed sitemap: ``kind`` "urlset" (pages; text sitemaps too) or "index" (sitemaps)."""

    kind: Literal["urlset", "index"]
    entries: tuple[SitemapEntry, ...]
    errors: tuple[str, ...] = ()
    #: ``max_urls`` when the sitemap held more entries and the rest were ignored, else None.
    capped_at: int | None = None


@dataclass
class ErrorNotes:
    """Error notes, capped so a million bad entries cannot fill memory."""

    notes: list[str] = field(default_factory=list)
    dropped: int = 0
    capped_at: int | None = None  # the entry cap, once entries past it were ignored
    cap_note: str | None = None

    def cap(self, limit: int, note: str) -> None:
        """Entries past ``limit`` are ignored: the limit and a note, always the last one of
        :meth:`final` (kept past the note cap too: it says pages were lost)."""
        self.capped_at, self.cap_note = limit, note

    def add(self, note: str) -> None:
        if len(self.notes) < MAX_ERROR_NOTES:
            self.notes.append(note)
        else:
            self.dropped += 1

    def final(self) -> tuple[str, ...]:
        more = [f"... and {self.dropped} more error(s)"] if self.dropped else []
        cut = [self.cap_note] if self.cap_note is not None else []
        return tuple(self.notes + more + cut)


def escape_bare_ampersands(data: bytes) -> bytes:
    """``&`` that starts no entity or character reference, written as ``&amp;``."""
    return _BARE_AMPERSAND.sub(b"&amp;", data)


def gunzip_capped(body: bytes, max_bytes: int, what: str = "body",
                  error: type[ValueError] = SitemapError) -> bytes:
    """Decompress gzip ``body`` (multi-member allowed), stopping at ``max_bytes`` of output.

    Raises ``error`` for corrupt or truncated data and when the output would exceed the
    cap; at most about ``max_bytes`` are ever allocated. The fetcher's own gzip decoder does
    the work: linear in the members however many (DESIGN.md §7), padding after the last
    one ignored, as gzip(1) does.
    """
    decoder = Decoder(["gzip"], max_bytes)
    try:
        decoder.feed(body)
        return decoder.finish()
    except BodyTooLarge:
        raise error(f"{what} decompresses to more than {max_bytes} bytes (cap)") from None
    except BodyEncodingError as exc:
        raise error(f"{what} is not valid gzip: {exc}") from None


def decoded_body(body: bytes, max_bytes: int, what: str,
                 error: type[ValueError] = SitemapError) -> bytes:
    """``body`` gunzipped when it starts with the gzip magic, checked against ``max_bytes``."""
    if body.startswith(GZIP_MAGIC):
        return gunzip_capped(body, max_bytes, what, error)
    if len(body) > max_bytes:
        raise error(f"{what} is {len(body)} bytes, over the cap of {max_bytes}")
    return body


def parse_sitemap(body: bytes, base_url: str, *, max_urls: int = MAX_SITEMAP_URLS,
                  max_bytes: int = MAX_SITEMAP_BYTES, location: Location = "directory",
                  also_allowed: tuple[str, ...] = ()) -> SitemapParse:
    """Parse a sitemap fetched from ``base_url`` (the final URL, after redirects).

    Entries beyond ``max_urls`` are dropped with a note; per-entry problems (bad URL, bad
    date, location rule) drop the field or the entry with a note in ``errors``. Raises
    :class:`SitemapError` when the body is not a sitemap at all.
    """
    if not isinstance(body, (bytes, bytearray)):
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    if location not in ("directory", "host", "any"):
        raise ValueError(f"location must be 'directory', 'host' or 'any', got {location!r}")
    base = canonicalize(base_url)
    if base is None:
        raise SitemapError(f"sitemap URL {base_url!r} is not an http(s) URL")
    text = decoded_body(bytes(body), max_bytes, f"sitemap {base}")
    head = text.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        raise SitemapError(f"sitemap {base} is empty")
    rule = _LocationRule(base, location, also_allowed)
    notes = ErrorNotes()
    if head != b"<" and not text.startswith(WIDE_BOMS):
        entries = _text_entries(text, rule, max_urls, notes)
        return SitemapParse("urlset", entries, notes.final(), notes.capped_at)
    kind, entries = _xml_entries(text, base, rule, max_urls, notes)
    return SitemapParse(kind, entries, notes.final(), notes.capped_at)


class _LocationRule:
    """Which entry URLs a sitemap at ``base`` may list (module doc)."""

    def __init__(self, base: str, location: Location, also_allowed: tuple[str, ...]) -> None:
        parts = urlsplit(base)
        self.location = location
        self.origin = f"{parts.scheme}://{parts.netloc}/"
        self.directory = f"{parts.scheme}://{parts.netloc}{parts.path[:parts.path.rfind('/') + 1] or '/'}"
        self.extra = tuple(p for p in (canonicalize(a) for a in also_allowed) if p)

    def refusal(self, url: str, index: bool) -> str | None:
        """None when ``url`` may be listed, else why not."""
        if self.location == "any" or url.startswith(self.extra):
            return None
        if index or self.location == "host":
            return None if url.startswith(self.origin) else f"not on {self.origin}"
        return None if url.startswith(self.directory) else f"not under {self.directory}"


def _text_entries(text: bytes, rule: _LocationRule, max_urls: int,
                  notes: ErrorNotes) -> tuple[SitemapEntry, ...]:
    """A text sitemap: one absolute URL per line, UTF-8 (sitemaps.org "Text file")."""
    entries: list[SitemapEntry] = []
    seen = 0
    for number, raw in enumerate(text.lstrip(b"\xef\xbb\xbf").splitlines(), start=1):
        raw = raw.strip()
        if not raw or raw.startswith(b"#"):
            continue
        seen += 1
        if seen > max_urls:
            notes.cap(max_urls, f"more than {max_urls} URLs; the rest are ignored")
            break
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            notes.add(f"line {number}: not UTF-8; skipped")
            continue
        url = canonicalize(line) if line.lower().startswith(("http://", "https://")) else None
        if url is None:
            notes.add(f"line {number}: {line[:200]!r} is not an absolute http(s) URL; skipped")
            continue
        why = rule.refusal(url, index=False)
        if why:
            notes.add(f"line {number}: {url} is {why} (sitemap location rule); skipped")
            continue
        entries.append(SitemapEntry(url))
    return tuple(entries)


def _xml_entries(text: bytes, base: str, rule: _LocationRule, max_urls: int,
                 notes: ErrorNotes) -> tuple[Literal["urlset", "index"], tuple[SitemapEntry, ...]]:
    """Strict parse first; on a syntax error, escape bare ``&`` and retry; then recover."""
    attempts = ((text, False, None),
                (None, False, "bare '&' escaped"),
                (text, True, "parsed in recovery mode, some entries may be lost"))
    first_error = ""
    for data, recover, fix in attempts:
        if data is None:
            fixed = escape_bare_ampersands(text)
            if fixed == text:
                continue
            data = fixed
        trial = ErrorNotes()
        try:
            kind, entries = _pull(data, base, rule, max_urls, trial, recover)
        except etree.XMLSyntaxError as exc:
            first_error = first_error or str(exc)
            continue
        if kind is None:  # recovery found no element at all
            continue
        if fix:
            notes.add(f"not well-formed XML ({first_error}); {fix}")
        for note in trial.notes:
            notes.add(note)
        notes.dropped += trial.dropped
        notes.capped_at, notes.cap_note = trial.capped_at, trial.cap_note
        return kind, entries
    raise SitemapError(f"sitemap {base} is not well-formed XML: "
                       f"{first_error or 'no root element'}")


def _pull(data: bytes, base: str, rule: _LocationRule, max_urls: int, notes: ErrorNotes,
          recover: bool) -> tuple[Literal["urlset", "index"] | None, tuple[SitemapEntry, ...]]:
    """One pass of the pull parser; kind None when no root element was seen."""
    parser = etree.XMLPullParser(events=("start", "end"), recover=recover,
                                 **SECURE_PARSER_OPTIONS)
    kind: Literal["urlset", "index"] | None = None
    namespace = ""
    entries: list[SitemapEntry] = []
    items = 0
    for event, elem in _events(parser, data):
        if kind is None:
            kind, namespace = _root_kind(elem, base)
            continue
        if event != "end" or elem.getparent() is None or elem.getparent().getparent() is not None:
            continue
        if split_tag(elem)[0] == ("url" if kind == "urlset" else "sitemap") \
                and _ns(elem) == namespace:
            items += 1
            if items > max_urls:
                notes.cap(max_urls, f"more than {max_urls} entries; the rest are ignored")
                break
            entry = _entry(elem, namespace, base, rule, kind == "index", notes)
            if entry is not None:
                entries.append(entry)
        _free(elem)
    return kind, tuple(entries)


def _events(parser: etree.XMLPullParser, data: bytes) -> Iterator[tuple[str, etree._Element]]:
    """Feed ``data`` in chunks, yielding parse events as they come (bounded memory).

    Each ``feed`` and the ``close`` run under a shared hold of the process's parse guard:
    lxml swaps libxml2's process-global entity loader around every one of them, which
    would hand a concurrent DOCTYPE parse libxml2's default loader (DESIGN.md §7,
    :mod:`xyro.content.parse_guard`). Held per chunk, not across the yields: a DOCTYPE
    parse waits for one chunk, not for a 50 MB sitemap, and no hold outlives a pass that
    stops at the entry cap."""
    for start in range(0, len(data), _CHUNK):
        with PARSES.shared():
            parser.feed(data[start:start + _CHUNK])
        yield from parser.read_events()
    with PARSES.shared():
        parser.close()
    yield from parser.read_events()


def _root_kind(root: etree._Element, base: str) -> tuple[Literal["urlset", "index"], str]:
    name = split_tag(root)[0]
    if name == "urlset":
        return "urlset", _ns(root)
    if name == "sitemapindex":
        return "index", _ns(root)
    raise SitemapError(f"{base} is not a sitemap: its root element is <{name or root.tag}>, "
                       "not <urlset> or <sitemapindex>")


def _ns(elem: etree._Element) -> str:
    """Namespace URI of an element ("" for none; a sentinel for entity and other nodes)."""
    if not isinstance(elem.tag, str):
        return "\0"
    return split_tag(elem)[1]


def split_tag(elem: etree._Element) -> tuple[str, str]:
    """(local name, namespace URI) of an element; ("", "") for entity, comment or PI nodes.
    The recovering parse keeps an undeclared prefix in the name (``image:image`` without
    ``xmlns:image``), which ``etree.QName`` refuses with ValueError: such a name is taken
    whole, in no namespace, so the entry around it is still read."""
    tag = elem.tag
    if not isinstance(tag, str):
        return "", ""
    if tag[:1] == "{":
        namespace, _, local = tag[1:].partition("}")
        return local, namespace
    return tag, ""


def _free(elem: etree._Element) -> None:
    """Drop a finished top-level entry and its earlier siblings from the tree."""
    elem.clear(keep_tail=False)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]


def _entry(elem: etree._Element, namespace: str, base: str, rule: _LocationRule,
           index: bool, notes: ErrorNotes) -> SitemapEntry | None:
    """One ``<url>``/``<sitemap>``: fields in the sitemap's namespace only (extensions such
    as image:loc are other namespaces and ignored)."""
    fields: dict[str, tuple[str | None, int]] = {}
    for child in elem:
        if isinstance(child.tag, str) and _ns(child) == namespace:
            name = split_tag(child)[0]
            if name not in fields:
                fields[name] = (_plain_text(child), child.sourceline or 0)
    line = elem.sourceline or 0
    loc, loc_line = fields.get("loc", (None, line))
    if not loc:
        notes.add(f"line {loc_line}: <loc> missing, empty or made of entity references; "
                  "entry skipped")
        return None
    url = canonicalize(loc, base=base)
    if url is None:
        notes.add(f"line {loc_line}: <loc> {loc[:200]!r} is not an http(s) URL; entry skipped")
        return None
    why = rule.refusal(url, index)
    if why:
        notes.add(f"line {loc_line}: {url} is {why} (sitemap location rule); entry skipped")
        return None
    return SitemapEntry(url, _lastmod(fields, notes),
                        None if index else _changefreq(fields, notes),
                        None if index else _priority(fields, notes))


def _plain_text(elem: etree._Element) -> str | None:
    """Text of a leaf element; None when it holds child nodes (entity references, markup):
    an unresolved entity must never become part of a URL or a date."""
    if len(elem):
        return None
    return (elem.text or "").strip()


def _lastmod(fields: dict[str, tuple[str | None, int]], notes: ErrorNotes) -> float | None:
    if "lastmod" not in fields:
        return None
    value, line = fields["lastmod"]
    parsed = parse_w3c_datetime(value) if value else None
    if parsed is None:
        notes.add(f"line {line}: <lastmod> {value!r} is not a W3C datetime; date ignored")
    return parsed


def _changefreq(fields: dict[str, tuple[str | None, int]], notes: ErrorNotes) -> str | None:
    if "changefreq" not in fields:
        return None
    value, line = fields["changefreq"]
    freq = (value or "").lower()
    if freq not in CHANGEFREQS:
        notes.add(f"line {line}: <changefreq> {value!r} is not one of "
                  f"{', '.join(sorted(CHANGEFREQS))}; ignored")
        return None
    return freq


def _priority(fields: dict[str, tuple[str | None, int]], notes: ErrorNotes) -> float | None:
    if "priority" not in fields:
        return None
    value, line = fields["priority"]
    try:
        priority = float(value or "")
    except ValueError:
        priority = -1.0
    if not 0.0 <= priority <= 1.0:
        notes.add(f"line {line}: <priority> {value!r} is not a number in [0, 1]; ignored")
        return None
    return priority
