"""RSS 2.0, RSS 1.0 (RDF) and Atom feeds parsed from bytes into entry URLs and dates.
Pure: no network.

Only lxml, configured like the sitemap parser (:data:`xyro.publication.sitemaps.SECURE_PARSER_OPTIONS`:
no DTD, no entity resolution, no network); feedparser is not used (DESIGN.md §8). A link or
date holding an entity reference is dropped, never expanded. Gzip bodies are decompressed
with a cap.

What is read, per format:

* RSS 2.0 (root ``rss``): each ``channel/item``'s URL is ``link``, else ``guid`` unless
  ``isPermaLink="false"``; its date ``pubDate`` (RFC 822), else ``dc:date`` (W3C). The
  feed's date is ``channel/lastBuildDate``, else ``channel/pubDate``, else ``dc:date``.
* RSS 1.0 / 0.9 (root ``rdf:RDF``): each ``item`` (a child of the root) gives ``link``, else
  its ``rdf:about``; its date ``dc:date``. The feed's date is ``channel/dc:date``.
* Atom 1.0 (root ``feed``): each ``entry``'s URL is the ``href`` of its first ``link`` whose
  ``rel`` is absent or ``alternate``, resolved against the ``xml:base`` of the link and its
  ancestors (RFC 4287 §2, XML Base), then against the feed's URL; its date ``updated``, else
  ``published`` (RFC 3339). The feed's date is ``feed/updated``.

Relative links are resolved against the feed's URL; only http(s) URLs are kept
(canonicalized). An item without a usable URL is skipped with a note in ``errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin

from lxml import etree

from xyro.content.parse_guard import PARSES
from xyro.publication.trust import parse_rfc822_datetime, parse_w3c_datetime
from xyro.publication.sitemaps import (
    MAX_SITEMAP_BYTES, SECURE_PARSER_OPTIONS, ErrorNotes, decoded_body, escape_bare_ampersands,
    split_tag,
)
from xyro.net.urls import canonicalize

MAX_FEED_ENTRIES = 10_000
ATOM = "http://www.w3.org/2005/Atom"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RSS1 = "http://purl.org/rss/1.0/"
RSS09 = "http://my.netscape.com/rdf/simple/0.9/"
DC = "http://purl.org/dc/elements/1.1/"
_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
_ALTERNATE = ("alternate", "http://www.iana.org/assignments/relation/alternate")


class FeedError(ValueError):
    """The body is not a usable feed (not XML, not RSS/Atom, corrupt gzip, over the cap)."""


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One item/entry: its canonical http(s) URL and date (POSIX seconds, None if absent)."""

    url: str
    updated: float | None = None


@dataclass(frozen=True, slots=True)
class FeedParse:
    """A parsed feed: its format, entries in document order, the feed's own date, notes."""

    kind: Literal["rss", "atom", "rdf"]
    entries: tuple[FeedEntry, ...]
    feed_updated: float | None = None
    errors: tuple[str, ...] = ()
    #: ``max_entries`` when the feed held more items and the rest were ignored, else None.
    capped_at: int | None = None


def parse_feed(body: bytes, base_url: str, *, max_entries: int = MAX_FEED_ENTRIES,
               max_bytes: int = MAX_SITEMAP_BYTES) -> FeedParse:
    """Parse a feed fetched from ``base_url`` (the final URL, after redirects).

    Raises :class:`FeedError` when the body is not an RSS/Atom feed; per-item problems are
    notes in ``errors``. At most ``max_entries`` entries are read.
    """
    if not isinstance(body, (bytes, bytearray)):
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    base = canonicalize(base_url)
    if base is None:
        raise FeedError(f"feed URL {base_url!r} is not an http(s) URL")
    notes = ErrorNotes()
    root = _parse_root(decoded_body(bytes(body), max_bytes, f"feed {base}", FeedError),
                       base, notes)
    name, ns = _name(root)
    if name == "rss":
        return _rss(root, base, max_entries, notes)
    if name == "RDF" and ns == RDF:
        return _rdf(root, base, max_entries, notes)
    if name == "feed" and ns == ATOM:
        return _atom(root, base, max_entries, notes)
    raise FeedError(f"{base} is not an RSS or Atom feed: its root element is "
                    f"<{name}>{f' in namespace {ns}' if ns else ''}")


def _parse_root(data: bytes, base: str, notes: ErrorNotes) -> etree._Element:
    """Strict parse; on a syntax error, escape bare ``&`` and retry; then recover."""
    first_error = ""
    escaped = escape_bare_ampersands(data)
    attempts = [(data, False, "")]
    if escaped != data:
        attempts.append((escaped, False, "bare '&' escaped"))
    attempts.append((data, True, "parsed in recovery mode, some items may be lost"))
    for text, recover, fix in attempts:
        parser = etree.XMLParser(recover=recover, **SECURE_PARSER_OPTIONS)
        try:
            with PARSES.shared():  # libxml2's entity loader is process-global (parse_guard)
                root = etree.fromstring(text, parser)
        except etree.XMLSyntaxError as exc:
            first_error = first_error or str(exc)
            continue
        if root is None:
            continue
        if fix:
            notes.add(f"not well-formed XML ({first_error}); {fix}")
        return root
    raise FeedError(f"feed {base} is not well-formed XML: {first_error or 'no root element'}")


def _name(elem: etree._Element) -> tuple[str, str]:
    """(local name, namespace) of an element; ("", "") for entity, comment or PI nodes."""
    return split_tag(elem)


def _children(elem: etree._Element, name: str, ns: str | tuple[str, ...]) -> list[etree._Element]:
    spaces = (ns,) if isinstance(ns, str) else ns
    found = []
    for child in elem:
        local, space = _name(child)
        if local == name and space in spaces:
            found.append(child)
    return found


def _text(elem: etree._Element | None) -> str | None:
    """Stripped text of a leaf; None when absent, empty, or holding entity references."""
    if elem is None or len(elem):
        return None
    return (elem.text or "").strip() or None


def _first_text(elem: etree._Element, name: str, ns: str | tuple[str, ...]) -> str | None:
    found = _children(elem, name, ns)
    return _text(found[0]) if found else None


def _date(elem: etree._Element, candidates: tuple[tuple[str, str, Callable[[str], float | None]], ...],
          notes: ErrorNotes) -> float | None:
    """The first present date among ``candidates`` (name, namespace, parser); a present but
    unreadable one gives a note and the next candidate is tried."""
    for name, ns, parse in candidates:
        found = _children(elem, name, ns)
        if not found:
            continue
        value = _text(found[0])
        parsed = parse(value) if value else None
        if parsed is not None:
            return parsed
        notes.add(f"line {found[0].sourceline}: <{name}> {value!r} is not a valid date; ignored")
    return None


def _url(raw: str | None, base: str | None, line: int | None, what: str,
         notes: ErrorNotes) -> str | None:
    if base is None:
        notes.add(f"line {line}: {what} lies under an xml:base that is not a URL; item "
                  "skipped")
        return None
    url = canonicalize(raw, base=base) if raw else None
    if url is None:
        notes.add(f"line {line}: {what} {raw!r} is not an http(s) URL; item skipped"
                  if raw else f"line {line}: {what} has no usable link; item skipped")
    return url


def _capped(items: list[etree._Element], max_entries: int,
            notes: ErrorNotes) -> list[etree._Element]:
    if len(items) > max_entries:
        notes.cap(max_entries, f"{len(items)} items; only the first {max_entries} are read")
    return items[:max_entries]


_RSS_DATES = (("pubDate", "", parse_rfc822_datetime), ("date", DC, parse_w3c_datetime))


def _rss(root: etree._Element, base: str, max_entries: int, notes: ErrorNotes) -> FeedParse:
    channels = _children(root, "channel", "")
    if not channels:
        raise FeedError(f"RSS feed {base} has no <channel>")
    channel = channels[0]
    entries = []
    for item in _capped(_children(channel, "item", ""), max_entries, notes):
        raw = _first_text(item, "link", "")
        if raw is None:
            guids = _children(item, "guid", "")
            if guids and guids[0].get("isPermaLink", "true").strip().lower() != "false":
                raw = _text(guids[0])
        url = _url(raw, _xml_base(item, base), item.sourceline, "RSS <item>", notes)
        if url:
            entries.append(FeedEntry(url, _date(item, _RSS_DATES, notes)))
    updated = _date(channel, (("lastBuildDate", "", parse_rfc822_datetime),) + _RSS_DATES,
                    notes)
    return FeedParse("rss", tuple(entries), updated, notes.final(), notes.capped_at)


def _rdf(root: etree._Element, base: str, max_entries: int, notes: ErrorNotes) -> FeedParse:
    spaces = (RSS1, RSS09)
    entries = []
    for item in _capped(_children(root, "item", spaces), max_entries, notes):
        raw = _first_text(item, "link", spaces) or (item.get(f"{{{RDF}}}about") or "").strip()
        url = _url(raw or None, _xml_base(item, base), item.sourceline, "RSS 1.0 <item>",
                   notes)
        if url:
            entries.append(FeedEntry(url, _date(item, (("date", DC, parse_w3c_datetime),),
                                                notes)))
    channels = _children(root, "channel", spaces)
    updated = (_date(channels[0], (("date", DC, parse_w3c_datetime),), notes)
               if channels else None)
    return FeedParse("rdf", tuple(entries), updated, notes.final(), notes.capped_at)


_ATOM_DATES = (("updated", ATOM, parse_w3c_datetime), ("published", ATOM, parse_w3c_datetime))


def _atom(root: etree._Element, base: str, max_entries: int, notes: ErrorNotes) -> FeedParse:
    entries = []
    for entry in _capped(_children(root, "entry", ATOM), max_entries, notes):
        link = next((l for l in _children(entry, "link", ATOM)
                     if (l.get("rel") or "alternate").strip() in _ALTERNATE), None)
        href = (link.get("href") or "").strip() if link is not None else ""
        where = link if link is not None else entry
        url = _url(href or None, _xml_base(where, base), where.sourceline, "Atom <entry>",
                   notes)
        if url:
            entries.append(FeedEntry(url, _date(entry, _ATOM_DATES, notes)))
    updated = _date(root, (("updated", ATOM, parse_w3c_datetime),), notes)
    return FeedParse("atom", tuple(entries), updated, notes.final(), notes.capped_at)


def _xml_base(elem: etree._Element, base: str) -> str | None:
    """The base URI in effect at ``elem``: ``base`` with every ``xml:base`` from the root
    down to ``elem`` applied in turn (XML Base §4.2: each resolved against its parent's);
    None when one of them is no URL (``http://[oops/``)."""
    chain = [e.get(_XML_BASE) for e in (elem, *elem.iterancestors())]
    current = base
    for value in reversed(chain):
        if value is not None:
            try:
                current = urljoin(current, value.strip())
            except ValueError:
                return None
    return current
