"""Link extraction from HTML pages (paper 003 §3: HTML pages are read only
to discover links towards XML documents and other HTML pages).

``extract_links(body, url)`` is a pure function: bytes in, an ``HtmlExtraction`` out, no
network, never raises. The engine canonicalizes the returned URLs itself (xyro/net/urls.py);
here they are only resolved against the document's base URL.

What is extracted, in document order (one ``HtmlLink(url, kind, nofollow, likely_xml)`` each):

- ``a[href]``, ``area[href]`` (kinds "a", "area"), ``frame[src]``, ``iframe[src]``;
- ``link[href]`` whose ``rel`` has the token ``alternate`` (kind "alternate"), whatever its
  ``type``: feeds (RSS, Atom, XML) are what an XML warehouse wants most, and the other
  alternates (translations with ``hreflang``, print or mobile versions) are ordinary pages the
  crawler would discover anyway; the fetcher's Content-Type filter sorts them out. Excluded:
  ``rel="alternate stylesheet"`` and ``rel="alternate icon"`` (a style sheet and an icon, not
  documents). Other ``link`` rels (stylesheet, icon, next, prev, canonical, ...) are not links
  to follow here;
- ``meta http-equiv=refresh`` (kind "refresh"), with the URL parsed as the WHATWG "shared
  declarative refresh steps" do (``0; url=x``, ``0;URL='x'``, ``5, x``, ``0; x``).

Rules:

- Encoding: a byte-order mark first, then the charset of the Content-Type header, then the
  document's own ``<meta charset>`` / ``http-equiv`` / XML declaration, then UTF-8
  (``w3lib.encoding.html_to_unicode``: WHATWG order, where the BOM overrides the header).
  A charset naming a non-text codec (``base64``, ``rot13``, ``zlib``) or an unknown name is
  ignored. Never requests' guess.
- ``<base href>``: the first one with an ``href`` (HTML: "the first base element with an href
  attribute in tree order") applies to every link of the page, even those before it; it is
  itself resolved against the page URL, and ignored unless it is http(s).
- Whitespace: leading and trailing C0 controls and spaces are stripped, and tabs and newlines
  inside are removed, as the URL parser of browsers does.
- Dropped: empty and fragment-only hrefs (they point at the page itself), and every href
  with a scheme other than http or https (``javascript:``, ``mailto:``, ``data:``, ``tel:``,
  ``ftp:``, ``file:``...: the crawler fetches only http and https), and hrefs that cannot be
  resolved (e.g. a broken IPv6 literal). They are counted in ``skipped``.
- Resolution: RFC 3986 §5.2 against the base, split once per page (several times faster than
  ``urllib.parse.urljoin``, which remains the fallback for unusual shapes); equal to urljoin
  except that empty path segments (``a//b``) are kept, as browsers keep them.
- nofollow: an element whose ``rel`` has the token ``nofollow``, and every link of a page
  whose ``<meta name=robots>`` says ``nofollow`` or ``none``, is dropped (counted in
  ``nofollow_dropped``) unless ``follow_nofollow``; then it is kept with ``nofollow=True``.
  A meta refresh is a redirect of the page itself, not a link on it: the page-wide nofollow
  does not drop it (Google treats it likewise).
- ``likely_xml``: the ``type`` attribute is an XML media type (``*/xml``, ``*+xml``, RSS,
  Atom; XHTML excluded: the crawler treats it as HTML), or the URL path ends with ``.xml``,
  ``.rss``, ``.atom`` or ``.rdf``. The engine uses it to prioritize.
- At most ``MAX_LINKS`` (65534, the paper's per-page limit) links are kept; ``truncated`` says
  when the cap bound.

When is a page an error (``error`` starts with ``"parse: "``)? lxml's HTML parser recovers from
almost anything, so an error is set only when there is no HTML to speak of or the parse
stopped early:

- the body is empty or only whitespace;
- it is binary (C0 control characters, NUL included, make up more than 5 % of the first
  4096 characters, and at least 16 of them: text in any encoding never does; this is the
  WHATWG "binary data byte" idea), or it has no ``<`` at all (plain text, not HTML);
- lxml reported no element or raised;
- the scan stopped early (elements nested deeper than 2048) or libxml2 stopped with a fatal
  error (resource limits): the links found before that point are still returned (a partial
  result with ``error`` set).

NUL bytes, invalid byte sequences (decoded as U+FFFD), bogus charsets, unclosed and misnested
tags, and 10 MB single-line pages are handled as browsers do and give a normal result. The
parse builds no tree (its events go to a scanner), so the cost stays linear in the page even
for a tag of a million attributes (DESIGN.md §7).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin, urlsplit

from lxml import etree
from w3lib.encoding import (
    html_body_declared_encoding, html_to_unicode, read_bom, resolve_encoding,
)

from xyro.content.parse_guard import PARSES

MAX_LINKS = 65534
# Raw candidates (before dropping fragments, nofollow...) scanned per page: bounds the work
# on a hostile page with millions of anchors.
MAX_CANDIDATES = 4 * MAX_LINKS
MAX_TITLE_CHARS = 512
MAX_DEPTH = 2048  # nesting at which the scan ends, as libxml2 ends a tree it builds
# Bytes fed to libxml2 at a time: past MAX_DEPTH, one slice can open at most this many / 5
# more elements before the scan stops the parse.
_FEED_BYTES = 16384
BINARY_SNIFF_CHARS = 4096
BINARY_SHARE = 0.05
BINARY_MIN_COUNT = 16  # a few stray NULs in a short page are not enough
FALLBACK_ENCODING = "utf-8"
_WIDE_CODECS = frozenset({"utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be",
                          "utf-32-le"})
# The encodings of the WHATWG Encoding Standard, as the Python codecs w3lib resolves their
# labels to (x-user-defined and iso-8859-8-i have none), and UTF-32, read by its BOM.
_WEB_CODECS = frozenset({
    "utf-8", "cp866", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874",
    *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
    *(f"cp{n}" for n in range(1250, 1259)),
    "gbk", "gb18030", "big5", "big5hkscs", "euc_jp", "iso2022_jp", "shift_jis", "cp932",
    "euc_kr", "cp949", *_WIDE_CODECS})
# Labels whose web encoding is not the Python codec of the same name: the bare "utf-16"
# label is UTF-16LE (WHATWG Encoding Standard), where Python's codec (and w3lib's, with no
# BOM) reads big-endian.
_LABEL_CODECS = {"utf-16": "utf-16-le"}

LinkKind = Literal["a", "area", "frame", "iframe", "alternate", "refresh"]

_SCANNED_TAGS = frozenset({"a", "area", "frame", "iframe", "link", "meta", "base", "title"})
_FOLLOWED_SCHEMES = frozenset({"http", "https"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# What the URL parser strips at both ends (C0 controls and space) and removes inside.
_C0_AND_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_BINARY_CHARS = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_XML_SUFFIXES = (".xml", ".rss", ".atom", ".rdf")
# Absolute hrefs urljoin must see: backslashes, and brackets (IPv6 literals it validates).
_NEEDS_URLJOIN = re.compile(r"[\\\[\]]")
_ASCII_WS = " \t\n\f\r"


@dataclass(frozen=True, slots=True)
class HtmlLink:
    """One outgoing link, resolved to an absolute URL but not canonicalized."""

    url: str
    kind: LinkKind
    nofollow: bool
    likely_xml: bool


@dataclass(frozen=True, slots=True)
class MetaRobots:
    """The page's ``<meta name=robots>`` directives (``none`` sets both)."""

    noindex: bool = False
    nofollow: bool = False


@dataclass(frozen=True, slots=True)
class HtmlExtraction:
    """What the crawler keeps from one HTML page.

    ``error`` is None for a usable page, else ``"parse: <reason>"``; with an error the links
    (possibly none) are those found before the parser stopped.
    """

    links: tuple[HtmlLink, ...]
    base_url: str
    encoding: str
    title: str | None
    meta_robots: MetaRobots
    error: str | None
    nofollow_dropped: int = 0
    skipped: int = 0
    truncated: bool = False

    @property
    def urls(self) -> list[str]:
        return [link.url for link in self.links]


@dataclass(slots=True)
class _Scan:
    """Raw findings of the single pass over the tree, before resolution."""

    candidates: list[tuple[str, LinkKind, bool, str | None]]
    base_href: str | None = None
    title: str | None = None
    robots: MetaRobots = MetaRobots()
    truncated: bool = False


def extract_links(
    body: bytes,
    url: str,
    *,
    content_type_charset: str | None = None,
    follow_nofollow: bool = False,
) -> HtmlExtraction:
    """Links of the HTML page ``body`` fetched from ``url`` (see the module docstring)."""
    encoding, text = decode_html(body, content_type_charset)
    problem = _not_html(text)
    if problem is not None:
        return _failed(url, encoding, problem)
    try:
        scan, fatal = _parse(text)
    except Exception as exc:  # untrusted input: any parser failure is a parse error
        return _failed(url, encoding, f"parse: lxml refused the document ({type(exc).__name__}: {exc})")
    if scan is None:
        return _failed(url, encoding, "parse: lxml found no document element")
    base = document_base(url, scan.base_href)
    links, dropped, skipped, capped = _resolve(scan, base, follow_nofollow)
    error = None
    if fatal is not None:
        error = f"parse: stopped early, links after that point are missing ({fatal})"
    return HtmlExtraction(
        links=links,
        base_url=base,
        encoding=encoding,
        title=scan.title,
        meta_robots=scan.robots,
        error=error,
        nofollow_dropped=dropped,
        skipped=skipped,
        truncated=capped or scan.truncated,
    )


def decode_html(body: bytes, content_type_charset: str | None) -> tuple[str, str]:
    """(encoding name, text): BOM, then the header's charset, then the document's declaration
    (``<meta>`` or an XML declaration), the order of the WHATWG HTML standard. Names that are
    not web encodings (WHATWG Encoding Standard: not base64, punycode, unicode_escape) are
    ignored, and a declared UTF-16 or UTF-32 is read as UTF-8, as browsers do: the bytes that
    declared it were readable as ASCII, so they are not UTF-16 (HTML §13.2.3.2)."""
    charset = (content_type_charset or "").strip(_ASCII_WS + "\"'")
    codec = _web_codec(charset) if charset else None
    if codec is None and read_bom(body[:4])[0] is None:
        declared = html_body_declared_encoding(body)
        if declared is not None:  # decided here: html_to_unicode would take any codec
            codec = _web_codec(declared) or FALLBACK_ENCODING
            codec = FALLBACK_ENCODING if codec in _WIDE_CODECS else codec
    header = f"text/html; charset={codec}" if codec else None
    try:
        encoding, text = html_to_unicode(header, body)
        return codecs.lookup(encoding).name, text
    except (LookupError, UnicodeError):
        return FALLBACK_ENCODING, body.decode(FALLBACK_ENCODING, "replace")


def _web_codec(name: str) -> str | None:
    """The Python codec of a web encoding's label (w3lib's resolution, which also maps
    latin-1 and ascii to cp1252 as browsers do, and "utf-16" read as the WHATWG reads it,
    little-endian; a BOM still decides first), or None for unknown names and for codecs that
    are no web encoding."""
    resolved = resolve_encoding(name)
    return _LABEL_CODECS.get(resolved, resolved) if resolved in _WEB_CODECS else None


def parse_meta_refresh(content: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh content=...>``, or None when it has none.

    Follows the WHATWG "shared declarative refresh steps": a time (digits and dots), then
    ``;`` or ``,`` or whitespace, then an optional ``url=``, then an optionally quoted URL.
    """
    s = content.lstrip(_ASCII_WS)
    i = 0
    while i < len(s) and (s[i].isdigit() or s[i] == "."):
        i += 1
    if i == 0 or i == len(s) or s[i] not in ";," + _ASCII_WS:
        return None
    rest = s[i:].lstrip(_ASCII_WS)
    if rest[:1] in (";", ","):
        rest = rest[1:].lstrip(_ASCII_WS)
    if rest[:3].lower() == "url":
        after = rest[3:].lstrip(_ASCII_WS)
        if after[:1] == "=":
            rest = after[1:].lstrip(_ASCII_WS)
    if rest[:1] in ("'", '"'):
        quote, rest = rest[0], rest[1:]
        end = rest.find(quote)
        if end >= 0:
            rest = rest[:end]
    return rest or None


def document_base(url: str, base_href: str | None) -> str:
    """The base URL links resolve against: ``<base href>`` if usable, else the page URL."""
    if base_href is None:
        return url
    resolved = resolve_href(url, base_href)
    return resolved if resolved else url


def resolve_href(base: str, href: str) -> str:
    """``href`` resolved against ``base``, or "" when it is not a link to follow."""
    return Resolver(base).resolve(href)


class Resolver:
    """RFC 3986 §5.2 reference resolution against one base, several times faster than
    ``urllib.parse.urljoin`` for the common shapes of hrefs (the base is split once per page).

    Shapes it does not handle itself (a base that is not plain http(s), backslashes, an href
    with a scheme of its own but no "//") go to ``urljoin``. It keeps empty path segments
    (``a//b``) as RFC 3986 and browsers do, where ``urljoin`` collapses them.
    """

    __slots__ = ("_base", "_origin", "_scheme", "_path", "_dir", "_query", "_fast")

    def __init__(self, base: str) -> None:
        self._base = base
        try:
            parts = urlsplit(base)
        except ValueError:
            parts = None
        self._fast = (
            parts is not None and parts.scheme in _FOLLOWED_SCHEMES and bool(parts.netloc)
            and "\\" not in base and base.startswith(parts.scheme + "://")
        )
        if parts is None or not self._fast:
            self._scheme = self._origin = self._path = self._dir = self._query = ""
            return
        self._scheme = parts.scheme
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._path = parts.path or "/"
        self._dir = self._path[: self._path.rfind("/") + 1]
        self._query = parts.query

    def resolve(self, href: str) -> str:
        h = href.strip(_C0_AND_SPACE)
        if "\t" in h or "\n" in h or "\r" in h:
            h = h.translate(_TAB_NEWLINE)
        if not h or h[0] == "#":
            return ""
        scheme = _SCHEME.match(h)
        if scheme is not None:
            if scheme.group(1).lower() not in _FOLLOWED_SCHEMES:
                return ""
            if h.startswith(("http://", "https://")) and not _NEEDS_URLJOIN.search(h):
                return h  # absolute: nothing to resolve
            return self._urljoin(h)
        if not self._fast or "\\" in h:
            return self._urljoin(h)
        if h[0] == "/" and h[1:2] == "/":
            return f"{self._scheme}:{h}"
        cut = _first_of(h, "?#")
        path, rest = h[:cut], h[cut:]
        if not path:  # "?q": same path, new query
            return self._origin + self._path + rest
        if path[0] != "/":
            path = self._dir + path
        return self._origin + _remove_dot_segments(path) + rest

    def _urljoin(self, h: str) -> str:
        try:
            return urljoin(self._base, h)
        except ValueError:  # e.g. "http://[::1" (an unclosed IPv6 literal)
            return ""


def _first_of(s: str, chars: str) -> int:
    """Index of the first character of ``s`` that is in ``chars``, or len(s)."""
    cut = len(s)
    for ch in chars:
        i = s.find(ch, 0, cut)
        if i >= 0:
            cut = i
    return cut


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path ("/a/b/../c" -> "/a/c")."""
    if "." not in path:
        return path
    segments = path.split("/")
    if "." not in segments and ".." not in segments:
        return path
    out: list[str] = []
    for seg in segments[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


def likely_xml(url: str, media_type: str | None) -> bool:
    """True when the link probably leads to an XML document (by type attribute or suffix)."""
    if media_type:
        t = media_type.split(";", 1)[0].strip().lower()
        if t != "application/xhtml+xml" and (t.endswith(("/xml", "+xml")) or "rss" in t or "atom" in t):
            return True
    path = url[: _first_of(url, "?#")] if ("?" in url or "#" in url) else url
    return path[-5:].lower().endswith(_XML_SUFFIXES)


def _not_html(text: str) -> str | None:
    if not text or text.isspace():
        return "parse: empty document"
    head = text[:BINARY_SNIFF_CHARS]
    if _BINARY_CHARS.search(head) is not None:
        count = len(_BINARY_CHARS.findall(head))
        share = count / len(head)
        if share > BINARY_SHARE and count >= BINARY_MIN_COUNT:
            return f"parse: binary content, not HTML ({share:.0%} control characters at the start)"
    if "<" not in text:
        return "parse: no HTML markup (plain text, no '<' at all)"
    return None


def _parse(text: str) -> tuple[_Scan | None, str | None]:
    """(what the scan found, or None when there is no element; why the parse stopped early,
    or None). huge_tree lifts libxml2's 10 MB text-node limit (bodies are already size-capped
    by the fetcher); the HTML parser has no entities or DTDs to expand, and no_network keeps
    libxml2 off the network.

    The parse builds no tree: :class:`_Scanner` takes its events. The page is fed in slices
    so that the scan can end the parse: libxml2 matches each end tag against every open
    element, which costs the depth of nesting per end tag once nothing bounds the depth."""
    scanner = _Scanner()
    parser = etree.HTMLParser(
        encoding="utf-8",
        recover=True,
        no_network=True,
        huge_tree=True,
        collect_ids=False,
        remove_comments=True,
        remove_pis=True,
        default_doctype=False,
        target=scanner,
    )
    data = text.encode("utf-8", "replace")
    with PARSES.shared():  # libxml2's entity loader is process-global (parse_guard)
        for offset in range(0, len(data), _FEED_BYTES):
            parser.feed(data[offset:offset + _FEED_BYTES])
            if scanner.stopped:
                break
        scan = parser.close()  # also ends the parse for lxml (its entity loader back)
    fatal = scanner.too_deep
    for entry in parser.error_log.filter_from_fatals():
        fatal = fatal or entry.message.strip()
        break
    return (scan if scanner.elements else None), fatal


def _rel_tokens(rel: str | None) -> list[str]:
    return rel.lower().split() if rel else []


class _Scanner:
    """The lxml parser target of :func:`_parse`: one pass over the elements that matter, in
    document order, as libxml2 reports them.

    No tree is built because building one costs the square of a tag's attributes: libxml2
    appends each attribute node by walking the element's list from its start (a tag of
    100,000 attributes took 15 s, 200,000 took 146 s), while a target receives each tag's
    attributes as one dict, built in linear time. Without a tree there is no libxml2 depth
    limit either: nesting deeper than :data:`MAX_DEPTH` ends the scan as that limit ended the
    parse, keeping the links found before it.
    """

    __slots__ = ("scan", "elements", "too_deep", "stopped", "_depth", "_title")

    def __init__(self) -> None:
        self.scan = _Scan(candidates=[])
        self.elements = 0
        self.too_deep: str | None = None
        self._depth = 0
        self.stopped = False  # the candidates reached their cap, or the nesting its limit
        self._title: list[str] | None = None  # text of the first <title>, while inside it

    # start, end and data run for every element and text of the page: kept lean.
    def start(self, tag: str, attrib: Mapping[str, str]) -> None:
        if self._title is not None:
            self._end_title()
        if self.stopped:
            return
        self.elements += 1
        self._depth += 1
        if tag in _SCANNED_TAGS or self._depth > MAX_DEPTH:
            self._element(tag, attrib)

    def end(self, tag: str) -> None:
        if self._title is not None:
            self._end_title()
        self._depth -= 1

    def data(self, text: str) -> None:
        if self._title is not None:
            self._title.append(text)

    def close(self) -> _Scan:
        if self._title is not None:
            self._end_title()
        return self.scan

    def _element(self, tag: str, attrib: Mapping[str, str]) -> None:
        scan = self.scan
        if self._depth > MAX_DEPTH:
            self.too_deep = f"elements nested deeper than {MAX_DEPTH}: depth limit"
            self.stopped = True
        elif tag == "title":
            if scan.title is None:
                self._title = []
        else:
            _scan_element(tag, attrib, scan)
            if len(scan.candidates) >= MAX_CANDIDATES:
                scan.truncated = self.stopped = True

    def _end_title(self) -> None:
        """The first <title>'s text is what comes before its end or its first child."""
        title, self._title = self._title or [], None
        self.scan.title = " ".join("".join(title).split())[:MAX_TITLE_CHARS]


def _scan_element(tag: str, attrib: Mapping[str, str], scan: _Scan) -> None:
    """The candidates, base or robots directives one scanned element (not title) gives."""
    add = scan.candidates.append
    if tag == "a" or tag == "area":
        href = attrib.get("href")
        if href is not None:
            rel = attrib.get("rel")
            add((href, tag, rel is not None and "nofollow" in _rel_tokens(rel), attrib.get("type")))
    elif tag == "frame" or tag == "iframe":
        src = attrib.get("src")
        if src is not None:
            add((src, tag, False, None))
    elif tag == "link":
        href = attrib.get("href")
        tokens = _rel_tokens(attrib.get("rel"))
        if href is not None and "alternate" in tokens and "stylesheet" not in tokens and "icon" not in tokens:
            add((href, "alternate", "nofollow" in tokens, attrib.get("type")))
    elif tag == "meta":
        _scan_meta(attrib, scan)
    elif tag == "base":
        if scan.base_href is None:
            scan.base_href = attrib.get("href")


def _scan_meta(attrib: Mapping[str, str], scan: _Scan) -> None:
    http_equiv = attrib.get("http-equiv")
    if http_equiv is not None and http_equiv.strip(_ASCII_WS).lower() == "refresh":
        target = parse_meta_refresh(attrib.get("content") or "")
        if target is not None:
            scan.candidates.append((target, "refresh", False, None))
        return
    name = attrib.get("name")
    if name is not None and name.strip(_ASCII_WS).lower() == "robots":
        words = set(re.split(r"[\s,]+", (attrib.get("content") or "").lower()))
        none = "none" in words
        scan.robots = MetaRobots(
            noindex=scan.robots.noindex or none or "noindex" in words,
            nofollow=scan.robots.nofollow or none or "nofollow" in words,
        )


def _resolve(
    scan: _Scan, base: str, follow_nofollow: bool
) -> tuple[tuple[HtmlLink, ...], int, int, bool]:
    """(links, nofollow dropped, skipped, capped): resolution with a per-page cache (index
    pages repeat the same hrefs many times)."""
    page_nofollow = scan.robots.nofollow
    resolver = Resolver(base)
    resolved: dict[str, str] = {}
    links: list[HtmlLink] = []
    dropped = skipped = 0
    for href, kind, rel_nofollow, media_type in scan.candidates:
        url = resolved.get(href)
        if url is None:
            url = resolved[href] = resolver.resolve(href)
        if not url:
            skipped += 1
            continue
        nofollow = rel_nofollow or (page_nofollow and kind != "refresh")
        if nofollow and not follow_nofollow:
            dropped += 1
            continue
        links.append(HtmlLink(url, kind, nofollow, likely_xml(url, media_type)))
        if len(links) >= MAX_LINKS:
            return tuple(links), dropped, skipped, True
    return tuple(links), dropped, skipped, False


def _failed(url: str, encoding: str, reason: str) -> HtmlExtraction:
    return HtmlExtraction(
        links=(), base_url=url, encoding=encoding, title=None,
        meta_robots=MetaRobots(), error=reason,
    )
