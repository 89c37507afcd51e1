"""What one fetch tells about a page: its type, signature, links and error (DESIGN.md §2).

Runs in the fetch worker threads (the CPU-heavy part of a crawl: HTML parsing and URL
canonicalization), so the dispatcher thread only does frontier bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata import PageType
from xyro.content.classify import classify
from xyro.content.html_links import extract_links
from xyro.content.signature import md5_signature
from xyro.net.urls import canonicalize
from xyro.records import ErrorKind, FetchResult

#: HTTP statuses that slow the host down and put the URL back, instead of an ERROR record.
RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class Child:
    """A canonical out-link, in document order."""

    url: str
    likely_xml: bool


@dataclass(frozen=True, slots=True)
class PageOutcome:
    """The page-level facts the engine turns into frontier pushes and a FetchRecord."""

    page_type: PageType
    children: tuple[Child, ...] = ()
    signature: bytes | None = None
    error_kind: str | None = None
    error_detail: str | None = None


def analyse(result: FetchResult, known_type: PageType | None, follow_nofollow: bool,
            max_url_length: int) -> PageOutcome:
    """Classify ``result`` and, for HTML, extract canonical links.

    A 304 keeps the type the page already had (``known_type``). XML and DTD bodies are kept
    as metadata with their MD5 signature here; the XML loader parses them (DESIGN.md §2).
    """
    if result.error_kind is not None:
        return PageOutcome(PageType.ERROR, error_kind=str(result.error_kind),
                           error_detail=result.error_detail)
    if result.not_modified:
        return PageOutcome(known_type or PageType.HTML)
    kind = classify(result)
    signature = md5_signature(result.body)
    if kind == "html":
        return _html(result, signature, follow_nofollow, max_url_length)
    if kind == "xml":
        return PageOutcome(PageType.XML, signature=signature)
    if kind == "dtd":
        return PageOutcome(PageType.DTD, signature=signature)
    return PageOutcome(PageType.ERROR, signature=signature, error_kind=ErrorKind.CONTENT_TYPE.value,
                       error_detail=f"content type {result.content_type or 'missing'} is neither "
                                    f"HTML nor XML (and the body does not look like either)")


def _html(result: FetchResult, signature: bytes, follow_nofollow: bool,
          max_url_length: int) -> PageOutcome:
    extraction = extract_links(result.body, result.final_url, content_type_charset=result.charset,
                               follow_nofollow=follow_nofollow)
    children = []
    for link in extraction.links:
        url = canonicalize(link.url, max_length=max_url_length)
        if url is not None:
            children.append(Child(url, link.likely_xml))
    if extraction.error is not None and not children:
        return PageOutcome(PageType.ERROR, signature=signature, error_kind=ErrorKind.PARSE.value,
                           error_detail=extraction.error)
    # A partial parse keeps the links found before the break; the page stays HTML.
    return PageOutcome(PageType.HTML, tuple(children), signature)
