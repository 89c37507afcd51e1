"""What the fetcher refuses before reading a body: skipped URL suffixes and accepted
Content-Types (paper 003 §3; gzip files of wanted documents included), and the lowercased
path both look at.

Moved out of xyro/content/classify.py so the network edge does not import xyro.content
(DESIGN.md §1: the fetcher hands bodies up to content; content may import net, not the
reverse). ``classify`` re-exports these names.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from xyro import media_types


#: The default of ``crawler.skip_suffixes`` (one list, in :mod:`xyro.media_types`).
DEFAULT_SKIP_SUFFIXES: frozenset[str] = frozenset(media_types.DEFAULT_SKIP_SUFFIXES)
#: The default of ``crawler.accept_content_types`` (likewise).
DEFAULT_ACCEPT_CONTENT_TYPES: tuple[str, ...] = media_types.DEFAULT_ACCEPT_CONTENT_TYPES


def suffix_skipped(url: str, suffixes: frozenset[str] | set[str] = DEFAULT_SKIP_SUFFIXES) -> bool:
    """True when the URL's path ends with a skipped suffix (query and fragment ignored)."""
    name = url_path(url).rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return dot > 0 and name[dot:] in suffixes


def mime_type(header: str | None) -> str | None:
    """``text/HTML; charset=x`` → ``text/html``; None when absent or empty."""
    if not header:
        return None
    mime = header.split(";", 1)[0].strip().lower()
    return mime or None


def content_type_accepted(mime: str | None, patterns: tuple[str, ...]) -> bool:
    """Missing types are accepted (the body gets sniffed); patterns like ``*/*+xml``
    (:func:`xyro.media_types.accepted`)."""
    return media_types.accepted(mime, patterns)


def gzip_file(url: str, mime: str | None,
              suffixes: frozenset[str] | set[str] = DEFAULT_SKIP_SUFFIXES) -> bool:
    """True when the body at ``url`` served as ``mime`` is a gzip file, decompressed before
    it is read (:func:`media_types.gzip_file`)."""
    return media_types.gzip_file(mime, url_path(url).rsplit("/", 1)[-1], suffixes)


def accepted_for(url: str, mime: str | None, patterns: tuple[str, ...],
                 suffixes: frozenset[str] | set[str] = DEFAULT_SKIP_SUFFIXES) -> bool:
    """The fetcher's verdict on a response's type: an accept pattern matches, or it is the
    gzip file of a wanted document (``sitemap.xml.gz``; :func:`media_types.gzip_file_wanted`)."""
    if content_type_accepted(mime, patterns):
        return True
    return media_types.gzip_file_wanted(mime, url_path(url).rsplit("/", 1)[-1], suffixes)


def url_path(url: str) -> str:
    """The lowercased path; a URL urlsplit rejects (bad IPv6 brackets) is cut by hand.

    An http(s) URL is cut by hand anyway: the path runs from the authority's end (the first
    "/", "?" or "#" after "//") to the query or fragment, as urlsplit cuts it, at a fifth
    of its cost (the admission asks it of every URL offered, and a start of every URL
    queued)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("http", "https") and url.isprintable():
        rest = rest.partition("#")[0].partition("?")[0]
        slash = rest.find("/")
        return rest[slash:].lower() if slash >= 0 else ""
    try:
        return urlsplit(url).path.lower()
    except ValueError:
        return url.split("#", 1)[0].split("?", 1)[0].lower()
