"""Bodies of the synthetic web: HTML and XML pages, robots.txt, sitemaps, the DTD.

A page body is head + changing part + tail. Head and tail (title, static text, every link)
are rendered once per page; the changing part (a paragraph, a feed item) depends only on
the version, so a whole body costs one small string build per (page, version).
"""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Callable
from email.utils import formatdate

from xyro.synthweb.model import Host, Link, Page, WebModel, relative_ref

Url = Callable[[int, str], str]

WORDS = ("xml", "warehouse", "crawler", "page", "link", "graph", "rank", "change", "refresh",
         "catalog", "item", "price", "museum", "painting", "river", "city", "market", "news",
         "report", "index", "query", "store", "version", "delta", "schema", "element", "data",
         "archive", "journal", "site", "web", "server", "time", "rate", "importance", "fresh",
         "stale", "document", "feed", "entry", "title", "author", "paris", "inria", "verso",
         "crawl", "fetch", "robot", "polite", "delay", "host", "budget", "sample", "signal")

DTD = b"""<!-- Catalog documents of the Xyro synthetic web. -->
<!ENTITY % common SYSTEM "common.ent">
%common;
<!ELEMENT catalog (title, status, item*)>
<!ATTLIST catalog
  xmlns:xlink CDATA #FIXED "http://www.w3.org/1999/xlink"
  id CDATA #REQUIRED>
<!ELEMENT title (#PCDATA)>
<!ELEMENT status (#PCDATA)>
<!ATTLIST status rev CDATA #REQUIRED>
<!ELEMENT item (#PCDATA)>
<!ATTLIST item
  xlink:type (simple) #FIXED "simple"
  xlink:href CDATA #REQUIRED>
"""
COMMON_ENT = b'<!ENTITY site "Xyro synthetic web">\n'
XSL = b"""<?xml version="1.0" encoding="UTF-8"?>
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:template match="/"><html><body><xsl:value-of select="/catalog/title"/></body></html>
  </xsl:template>
</xsl:stylesheet>
"""
MALFORMED_ROBOTS = (
    b"\xef\xbb\xbfUser-agent *\n"
    b"Disalow: /p/\n"
    b"<html><body>This is not a robots.txt</body></html>\n"
    b"Crawl-delay: soon\n"
    b"\n"
    b"User-agent: *\n"
    b"Disallow: /private/\n"
    b"\x00\xff\xfe garbage line\n"
    b"Allow\n"
    b"Sitemap: ::not a url::\n")
CONTENT_TYPES = {"html": "text/html; charset=utf-8", "xml": "application/xml",
                 "rss": "application/rss+xml", "atom": "application/atom+xml"}


def http_date(t: float) -> str:
    return formatdate(t, usegmt=True)


class Renderer:
    """Renders page bodies for one web whose servers are bound (``url`` works)."""

    def __init__(self, model: WebModel, url: Url) -> None:
        self._model = model
        self._url = url
        self._seed = model.spec.seed
        self._parts: dict[int, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def body(self, page_id: int, version: int, last_change: float) -> bytes:
        parts = self._parts.get(page_id)
        if parts is None:
            parts = self._static(self._model.pages[page_id])
            with self._lock:
                self._parts[page_id] = parts
        head, tail = parts
        mid = self._changing(self._model.pages[page_id], version, last_change)
        return (head + mid + tail).encode("utf-8")

    def _words(self, key: str, n: int) -> str:
        r = random.Random(f"{self._seed}:{key}")
        return " ".join(r.choice(WORDS) for _ in range(n))

    def _href(self, page: Page, link: Link) -> str:
        if link.form == "absolute":
            return self._url(link.host, link.path)
        if link.form == "root":
            return link.path
        base = page.base_dir or (page.path.rsplit("/", 1)[0] + "/")
        return relative_ref(base, link.path)

    def _static(self, page: Page) -> tuple[str, str]:
        title = f"Page {page.id}: {self._words(f't{page.id}', 3)}"
        text = self._words(f"s{page.id}", 40 + page.id % 80)
        return {"html": self._html_static, "xml": self._xml_static, "rss": self._rss_static,
                "atom": self._atom_static}[page.kind](page, title, text)

    def _changing(self, page: Page, version: int, last_change: float) -> str:
        words = self._words(f"v{page.id}:{version}", 12)
        if page.kind == "html":
            return f'<p class="news" id="rev">Revision {version}: {words}</p>\n'
        if page.kind == "xml":
            return f'<status rev="{version}">{words}</status>\n'
        if page.kind == "rss":
            return (f"<lastBuildDate>{http_date(last_change)}</lastBuildDate>\n"
                    f"<item><title>Revision {version}</title><description>{words}"
                    f"</description><guid isPermaLink=\"false\">urn:xyro:{self._seed}:"
                    f"{page.id}:{version}</guid></item>\n")
        iso = _iso(last_change)
        return (f"<updated>{iso}</updated>\n<entry><title>Revision {version}</title>"
                f"<id>urn:xyro:{self._seed}:{page.id}:{version}</id><updated>{iso}</updated>"
                f"<summary>{words}</summary></entry>\n")

    def _html_static(self, page: Page, title: str, text: str) -> tuple[str, str]:
        head = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>{title}</title>\n"]
        if page.base_dir:
            head.append(f'<base href="{self._url(page.host, page.base_dir)}">\n')
        body = []
        for i, link in enumerate(page.links):
            href = self._href(page, link)
            if link.kind == "alternate":
                kind = "rss" if link.path.endswith(".rss") else "atom"
                head.append(f'<link rel="alternate" type="application/{kind}+xml" '
                            f'title="feed" href="{href}">\n')
            elif link.kind == "area":
                body.append(f'<map name="m{i}"><area shape="rect" coords="0,0,20,20" '
                            f'href="{href}" alt="area {i}"></map>\n')
            elif link.kind in ("iframe", "frame"):
                body.append(f'<{link.kind} src="{href}" title="frame {i}"></{link.kind}>\n')
            else:
                rel = ' rel="nofollow"' if link.nofollow else ""
                body.append(f'<li><a href="{href}"{rel}>link {i} to {link.path}</a></li>\n')
        head.append(f"</head>\n<body>\n<h1>{title}</h1>\n<p>{text}</p>\n")
        tail = "<ul>\n" + "".join(body) + "</ul>\n</body></html>\n"
        return "".join(head), tail

    def _xml_static(self, page: Page, title: str, text: str) -> tuple[str, str]:
        head = ['<?xml version="1.0" encoding="UTF-8"?>\n']
        if page.stylesheet:
            head.append('<?xml-stylesheet type="text/xsl" href="/style/catalog.xsl"?>\n')
        if page.doctype:
            dtd = self._url(page.host, "/dtd/catalog.dtd") if page.id % 2 else "/dtd/catalog.dtd"
            head.append(f'<!DOCTYPE catalog SYSTEM "{dtd}">\n')
        head.append(f'<catalog xmlns:xlink="http://www.w3.org/1999/xlink" id="p{page.id}">\n'
                    f"<title>{title}</title>\n")
        items = "".join(f'<item xlink:type="simple" xlink:href="{self._href(page, link)}">'
                        f"{text[: 30 + i % 20]}</item>\n" for i, link in enumerate(page.links))
        return "".join(head), items + "</catalog>\n"

    def _rss_static(self, page: Page, title: str, text: str) -> tuple[str, str]:
        channel, *rest = page.links
        head = (f'<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>\n'
                f"<title>{title}</title>\n<link>{self._href(page, channel)}</link>\n"
                f"<description>{text[:200]}</description>\n")
        items = "".join(f"<item><title>Item {i}</title><link>{self._href(page, link)}"
                        f"</link></item>\n" for i, link in enumerate(rest))
        return head, items + "</channel></rss>\n"

    def _atom_static(self, page: Page, title: str, text: str) -> tuple[str, str]:
        site, *rest = page.links
        head = (f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/'
                f'Atom">\n<title>{title}</title>\n<id>urn:xyro:{self._seed}:{page.id}</id>\n'
                f'<link href="{self._href(page, site)}"/>\n<author><name>{text[:20]}</name>'
                f"</author>\n")
        entries = "".join(f"<entry><title>Entry {i}</title><id>urn:xyro:{self._seed}:{page.id}"
                          f':e{i}</id><updated>2026-01-01T00:00:00Z</updated><link href="'
                          f'{self._href(page, link)}"/></entry>\n' for i, link in enumerate(rest))
        return head, entries + "</feed>\n"

    def robots(self, host: Host) -> bytes:
        """robots.txt of a host whose ``robots`` is ``rules`` or ``malformed``."""
        if host.robots == "malformed":
            return MALFORMED_ROBOTS
        lines = [f"# robots.txt of {host.address} (Xyro synthetic web)",
                 "User-agent: BadBot", "Disallow: /", "", "User-agent: *"]
        lines += [f"Disallow: {p}" for p in host.disallow] or ["Disallow:"]
        if host.crawl_delay is not None:
            lines.append(f"Crawl-delay: {host.crawl_delay:g}")
        if host.sitemap:
            lines += ["", f"Sitemap: {self._url(host.index, '/sitemap.xml')}"]
        return ("\n".join(lines) + "\n").encode()

    def sitemap(self, host: Host, lastmod: dict[int, float]) -> bytes:
        """Sitemap of a host: its pages outside the disallowed areas, each with the
        ``<lastmod>`` given (page id → clock time)."""
        locs = "".join(f"<url><loc>{self._url(host.index, self._model.pages[p].path)}</loc>"
                       f"<lastmod>{_iso(lastmod[p])}</lastmod></url>\n"
                       for p in host.pages if not self._model.pages[p].disallowed)
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
                f'schemas/sitemap/0.9">\n{locs}</urlset>\n').encode()


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
