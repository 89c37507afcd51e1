"""What the fetcher refuses before reading a body: skipped URL suffixes and accepted
Content-Types (paper 003 §3), and the lowercased path both look at.

Moved out of xyro/content/classify.py so the network edge does not import xyro.content
(DESIGN.md §1: the fetcher hands bodies up to content; content may import net, not the
reverse). ``classify`` re-exports these names.
"""

from __future__ import annotations

import fnmatch
from urllib.parse import urlsplit


# Never fetched: media, archives, binaries, office documents, fonts, styles and scripts.
DEFAULT_SKIP_SUFFIXES: frozenset[str] = frozenset("""
    .jpg .jpeg .jpe .png .gif .bmp .tif .tiff .webp .ico .svgz .avif .heic .psd .raw
    .mp3 .wav .ogg .oga .flac .aac .m4a .wma .mid .midi .ra .ram
    .mp4 .m4v .avi .mov .mkv .wmv .flv .webm .mpg .mpeg .3gp .swf
    .zip .gz .tgz .bz2 .xz .zst .7z .rar .tar .z .lz .lzma .cab .arj .sit
    .exe .msi .dll .bin .dmg .iso .img .deb .rpm .apk .jar .class .so .o
    .pdf .ps .eps .doc .docx .xls .xlsx .ppt .pptx .odt .ods .odp .rtf
    .woff .woff2 .ttf .otf .eot .css .js .mjs .map .wasm .torrent
""".split())


# Fetched and kept; anything else is an ERROR content_type without reading the body.
DEFAULT_ACCEPT_CONTENT_TYPES: tuple[str, ...] = (
    "text/html", "application/xhtml+xml", "text/xml", "application/xml",
    "application/*+xml", "application/xml-dtd", "text/plain", "application/octet-stream",
)


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


def content_type_accepted(mime: str | None, accepted: tuple[str, ...]) -> bool:
    """Missing types are accepted (the body gets sniffed); patterns like application/*+xml."""
    if mime is None:
        return True
    return any(mime == pattern or fnmatch.fnmatchcase(mime, pattern) for pattern in accepted)


def url_path(url: str) -> str:
    """The lowercased path; a URL urlsplit rejects (bad IPv6 brackets) is cut by hand."""
    try:
        return urlsplit(url).path.lower()
    except ValueError:
        return url.split("#", 1)[0].split("?", 1)[0].lower()
