"""Xyro's link extraction against two independent extractors, page by page, on a real site.

Used by tests/html/test_html_real_site.py (a bounded sample) and tests/bench/html_extract.py
(the full Python documentation). Not a test module itself (no ``test_`` prefix).

The peers, configured to the same elements as Xyro:

- Scrapy's ``LinkExtractor(tags=(a, area, frame, iframe), attrs=(href, src), canonicalize=False,
  unique=False, deny_extensions=[])``, plus a second one restricted by XPath to ``link``
  elements whose rel has the token ``alternate`` (and neither ``stylesheet`` nor ``icon``):
  Scrapy cannot filter a tag by another attribute any other way. Scrapy has no meta refresh.
- lxml's ``make_links_absolute(url, resolve_base_href=True, handle_failures="discard")`` then
  ``iterlinks()``, kept to the same (tag, attribute) pairs and the meta refresh; everything else
  iterlinks yields (img, script, stylesheets, icons, CSS url(), ...) is counted by tag only.

Both sides are compared as sets after the same normalization: the fragment is dropped.
Each difference is put in a class; "unexplained" must stay empty.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import lxml.html
import requests
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from w3lib.url import safe_url_string

from xyro.content.html_links import HtmlExtraction, extract_links

DOCS_ROOT = Path("/usr/share/doc/python3.11/html")
ALTERNATE_XPATH = (
    "//link[contains(concat(' ', normalize-space(translate(@rel, 'ALTERNATE', 'alternate')), ' '),"
    " ' alternate ') and not(contains(@rel, 'stylesheet')) and not(contains(@rel, 'icon'))]"
)
SAME_PAIRS = {("a", "href"), ("area", "href"), ("frame", "src"), ("iframe", "src"), ("link", "href")}

# Difference classes (peer-only: "<peer> only: ..."; Xyro-only: "xyro only: ...").
SELF = "fragment-only or empty href: the peer keeps the page (or its <base>) itself, Xyro drops it"
SCHEME = "non-http(s) scheme (mailto:, javascript:, file:, ftp:...): Xyro drops it"
PERCENT = "Scrapy percent-encodes the URL (safe_url_string); Xyro leaves that to the canonicalizer"
REFRESH = "meta refresh: Scrapy's LinkExtractor does not read it"
UNEXPLAINED = "unexplained"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128   # the default 5 drops SYNs under concurrent fetches (1 s retry)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        return


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """A threaded static HTTP server on 127.0.0.1 (ephemeral port); yields its base URL."""
    server = _Server(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="docs-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def site_pages(root: Path, limit: int | None = None) -> list[str]:
    """Relative paths of the HTML pages, sorted (the first ``limit`` of them)."""
    pages = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))
    return pages if limit is None else pages[:limit]


@dataclass
class Fetched:
    url: str
    body: bytes
    content_type: str
    charset: str | None


def fetch(session: requests.Session, url: str) -> Fetched:
    response = session.get(url, timeout=10)
    response.raise_for_status()
    content_type = response.headers.get("Content-Type", "text/html")
    charset = None
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'")
    return Fetched(url, response.content, content_type, charset)


def defrag(url: str) -> str:
    return url.split("#", 1)[0]


def xyro_links(page: Fetched) -> HtmlExtraction:
    # follow_nofollow: the peers do not drop nofollow links; Xyro's nofollow count is reported.
    return extract_links(page.body, page.url, content_type_charset=page.charset, follow_nofollow=True)


def scrapy_links(page: Fetched) -> list[str]:
    response = HtmlResponse(url=page.url, body=page.body, headers={"Content-Type": page.content_type})
    common = {"canonicalize": False, "unique": False, "deny_extensions": []}
    main = LinkExtractor(tags=("a", "area", "frame", "iframe"), attrs=("href", "src"), **common)
    alternate = LinkExtractor(tags=("link",), attrs=("href",), restrict_xpaths=ALTERNATE_XPATH, **common)
    return [link.url for link in main.extract_links(response) + alternate.extract_links(response)]


def iterlinks_links(page: Fetched, encoding: str, extras: Counter[str]) -> list[str]:
    """lxml iterlinks on lxml.html's own tree, decoded with the encoding Xyro found."""
    parser = lxml.html.HTMLParser(encoding=encoding)
    doc = lxml.html.document_fromstring(page.body, parser=parser)
    doc.make_links_absolute(page.url, resolve_base_href=True, handle_failures="discard")
    out = []
    for el, attr, link, _pos in doc.iterlinks():
        tag = el.tag if isinstance(el.tag, str) else "?"
        if tag == "meta" and (el.get("http-equiv") or "").lower() == "refresh":
            out.append(link)
        elif (tag, attr) in SAME_PAIRS and (tag != "link" or _is_alternate(el.get("rel"))):
            out.append(link)
        else:
            rel = f"[rel={el.get('rel')}]" if tag == "link" else ""
            extras[f"<{tag}{rel}> {attr or 'text'}"] += 1
    return out


def _is_alternate(rel: str | None) -> bool:
    tokens = (rel or "").lower().split()
    return "alternate" in tokens and "stylesheet" not in tokens and "icon" not in tokens


def classify_peer_only(url: str, selves: tuple[str, ...], xyro_encoded: set[str] = frozenset()) -> str:
    """``selves``: the page URL and its base URL, without fragments."""
    if url in xyro_encoded:
        return PERCENT
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme not in ("http", "https"):
        return SCHEME
    if url in selves:
        return SELF
    return UNEXPLAINED


def classify_xyro_only(url: str, peer: set[str], refresh: set[str]) -> str:
    if safe_url_string(url) in peer:
        return PERCENT
    if url in refresh:
        return REFRESH
    return UNEXPLAINED


def same_order(page_url: str, ours: HtmlExtraction, peer_raw: list[str]) -> bool:
    """Document order and duplicates agree too, once both lists are normalized alike:
    fragments dropped, percent-encoded as Scrapy does, links to the page itself (which a
    fragment-only href also gives the peer) and non-http(s) URLs removed from both."""
    selves = (defrag(page_url), defrag(ours.base_url))

    def norm(urls: list[str]) -> list[str]:
        out = (safe_url_string(defrag(u)) for u in urls)
        return [u for u in out if classify_peer_only(u, selves) == UNEXPLAINED]
    return norm([link.url for link in ours.links if link.kind != "refresh"]) == norm(peer_raw)


@dataclass
class PeerTally:
    """Agreement with one peer over many pages."""

    name: str
    pages: int = 0
    identical_pages: int = 0
    explained_pages: int = 0
    xyro_urls: int = 0
    peer_urls: int = 0
    common_urls: int = 0
    jaccard_sum: float = 0.0
    classes: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, page_url: str, ours: HtmlExtraction, peer_raw: list[str], peer_has_refresh: bool) -> None:
        xyro = {defrag(link.url) for link in ours.links}
        refresh = set() if peer_has_refresh else {defrag(link.url) for link in ours.links if link.kind == "refresh"}
        selves = (defrag(page_url), defrag(ours.base_url))
        peer = {defrag(u) for u in peer_raw}
        self.pages += 1
        self.xyro_urls += len(xyro)
        self.peer_urls += len(peer)
        self.common_urls += len(xyro & peer)
        union = xyro | peer
        self.jaccard_sum += len(xyro & peer) / len(union) if union else 1.0
        if xyro == peer:
            self.identical_pages += 1
        unexplained = 0
        xyro_encoded = {safe_url_string(u) for u in xyro - peer}
        for url in sorted(peer - xyro):
            cls = classify_peer_only(url, selves, xyro_encoded)
            unexplained += self._note(f"{self.name} only: {cls}", page_url, url)
        for url in sorted(xyro - peer):
            unexplained += self._note("xyro only: " + classify_xyro_only(url, peer, refresh), page_url, url)
        if unexplained == 0:
            self.explained_pages += 1

    def _note(self, cls: str, page_url: str, url: str) -> int:
        self.classes[cls] += 1
        examples = self.examples.setdefault(cls, [])
        if len(examples) < 3:
            examples.append(f"{page_url} -> {url}")
        return int(cls.endswith(UNEXPLAINED))

    def summary(self) -> dict[str, object]:
        return {
            "pages": self.pages,
            "identical_pages": self.identical_pages,
            "explained_pages": self.explained_pages,
            "explained_share": round(self.explained_pages / self.pages, 6) if self.pages else None,
            "mean_jaccard": round(self.jaccard_sum / self.pages, 6) if self.pages else None,
            "xyro_distinct_urls": self.xyro_urls,
            "peer_distinct_urls": self.peer_urls,
            "common_distinct_urls": self.common_urls,
            "difference_classes": dict(sorted(self.classes.items())),
            "examples": self.examples,
        }


@dataclass
class Comparison:
    scrapy: PeerTally = field(default_factory=lambda: PeerTally("scrapy"))
    iterlinks: PeerTally = field(default_factory=lambda: PeerTally("iterlinks"))
    iterlinks_other_tags: Counter[str] = field(default_factory=Counter)
    xyro_links: int = 0
    xyro_skipped: int = 0
    xyro_nofollow: int = 0
    xyro_errors: list[str] = field(default_factory=list)
    scrapy_ordered_equal_pages: int = 0

    def add_page(self, page: Fetched) -> None:
        ours = xyro_links(page)
        if ours.error:
            self.xyro_errors.append(f"{page.url}: {ours.error}")
        self.xyro_links += len(ours.links)
        self.xyro_skipped += ours.skipped
        self.xyro_nofollow += sum(link.nofollow for link in ours.links)
        scrapy_raw = scrapy_links(page)
        self.scrapy.add(page.url, ours, scrapy_raw, peer_has_refresh=False)
        lxml_raw = iterlinks_links(page, ours.encoding, self.iterlinks_other_tags)
        self.iterlinks.add(page.url, ours, lxml_raw, peer_has_refresh=True)
        self.scrapy_ordered_equal_pages += int(same_order(page.url, ours, scrapy_raw))

    def summary(self) -> dict[str, object]:
        return {
            "pages": self.scrapy.pages,
            "xyro_links": self.xyro_links,
            "xyro_skipped_hrefs": self.xyro_skipped,
            "xyro_nofollow_links": self.xyro_nofollow,
            "xyro_errors": self.xyro_errors,
            "scrapy": self.scrapy.summary(),
            "scrapy_same_order_pages": self.scrapy_ordered_equal_pages,
            "iterlinks": self.iterlinks.summary(),
            "iterlinks_other_tags_not_compared": dict(self.iterlinks_other_tags.most_common()),
        }

    def unexplained(self) -> int:
        return sum(n for tally in (self.scrapy, self.iterlinks)
                   for cls, n in tally.classes.items() if cls.endswith(UNEXPLAINED))


def compare_site(root: Path, limit: int | None = None) -> Comparison:
    """Serve ``root`` on 127.0.0.1, fetch each page over HTTP, compare the three extractors."""
    comparison = Comparison()
    with serve_directory(root) as base, requests.Session() as session:
        session.trust_env = False
        for rel in site_pages(root, limit):
            comparison.add_page(fetch(session, base + rel))
    return comparison
