"""What one host of the synthetic web answers: routing, conditional GET, robots, throttling.

Pure request -> :class:`Reply` logic; the sockets are in server.py. Sitemaps carry
``<lastmod>``: the true last change on honest hosts, the generation time on the others. Conditional GET:
hosts with ETags answer If-None-Match with 304 when the version's tag matches; hosts with
reliable Last-Modified send the true time of the last change and answer If-Modified-Since
with 304 when nothing changed since; unreliable hosts send "now" and ignore
If-Modified-Since (like most dynamic sites).
"""

from __future__ import annotations

import hashlib
import threading
from email.utils import parsedate_to_datetime

from xyro.synthweb.changes import ChangeProcess
from xyro.synthweb.content import COMMON_ENT, CONTENT_TYPES, DTD, XSL, Renderer, http_date
from xyro.synthweb.hostile import CASES, HostileResponder
from xyro.synthweb.model import Host, WebModel
from xyro.synthweb.reply import Reply

NOT_FOUND = Reply(404, "text/html; charset=utf-8",
                  b"<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>\n")
RESOURCES = {"/dtd/catalog.dtd": ("application/xml-dtd", DTD),
             "/dtd/common.ent": ("application/xml-external-parsed-entity", COMMON_ENT),
             "/style/catalog.xsl": ("application/xslt+xml", XSL)}


class Site:
    """One normal host: its pages, robots.txt, sitemap, resources and hostile cases."""

    def __init__(self, host: Host, model: WebModel, changes: ChangeProcess,
                 renderer: Renderer, hostile: HostileResponder) -> None:
        self.host = host
        self._model = model
        self._changes = changes
        self._renderer = renderer
        self._hostile = hostile
        self._routes = {model.pages[p].path: p for p in host.pages}
        self._cases = [(CASES[h.name].prefix or h.path, h.name) for h in model.hostile
                       if h.host == host.index]
        self._cache: dict[int, tuple[int, bytes, str, float]] = {}
        self._throttle_lock = threading.Lock()
        self._last_served = float("-inf")
        self._robots: bytes | None = None

    def answer(self, target: str, if_none_match: str | None, if_modified_since: str | None,
               now: float) -> Reply:
        path = target.split("?", 1)[0]
        if path == "/robots.txt":
            return self._robots_reply(now)
        if path == "/sitemap.xml" and self.host.sitemap:
            return Reply(200, "application/xml", self._sitemap_body(now))
        resource = RESOURCES.get(path)
        if resource is not None:
            return Reply(200, resource[0], resource[1])
        for prefix, name in self._cases:
            if path.startswith(prefix):
                reply = self._hostile.reply(name, self.host.index, path, now)
                if reply is not None:
                    return reply
        page = self._routes.get(path)
        if page is None:
            return NOT_FOUND
        if self.host.throttled:
            wait = self._throttle(now)
            if wait > 0:
                return Reply(429, "text/html; charset=utf-8", b"<html><body>Slow down</body>"
                             b"</html>\n", (("Retry-After", str(int(wait + 0.999))),))
        return self._page(page, if_none_match, if_modified_since, now)

    def _throttle(self, now: float) -> float:
        """Clock seconds still to wait before the next page request is welcome (0: now)."""
        with self._throttle_lock:
            wait = self._last_served + self._model.spec.throttle_retry_after - now
            if wait <= 0:
                self._last_served = now
            return max(0.0, wait)

    def _robots_reply(self, now: float) -> Reply:
        kind = self.host.robots
        if kind == "missing":
            return NOT_FOUND
        if kind == "error" and now < self._changes.t0 + self._model.spec.robots_error_seconds:
            return Reply(500, "text/plain", b"Internal Server Error\n")
        if self._robots is None:
            self._robots = self._renderer.robots(self.host)
        return Reply(200, "text/plain", self._robots)

    def _sitemap_body(self, now: float) -> bytes:
        """Honest hosts date each URL by its last change; the others by ``now`` (the
        sitemap's generation time), the lie a publication-trust check must catch."""
        if self.host.sitemap_honest:
            lastmod = {p: self._changes.state(p, now)[1] for p in self.host.pages}
        else:
            lastmod = dict.fromkeys(self.host.pages, now)
        return self._renderer.sitemap(self.host, lastmod)

    def _page(self, page: int, inm: str | None, ims: str | None, now: float) -> Reply:
        version, last = self._changes.state(page, now)
        cached = self._cache.get(page)
        if cached is None or cached[0] != version:
            body = self._renderer.body(page, version, last)
            tag = hashlib.blake2b(f"{self._model.spec.seed}:{page}:{version}".encode(),
                                  digest_size=8).hexdigest()
            cached = (version, body, f'"{tag}"', last)
            self._cache[page] = cached
        _, body, etag, last = cached
        reliable = self.host.reliable_last_modified
        headers = [("Last-Modified", http_date(last if reliable else now))]
        if self.host.etag:
            headers.append(("ETag", etag))
        if self._not_modified(etag, last, inm, ims):
            return Reply(304, None, b"", tuple(headers))
        kind = self._model.pages[page].kind
        return Reply(200, CONTENT_TYPES[kind], body, tuple(headers))

    def _not_modified(self, etag: str, last: float, inm: str | None, ims: str | None) -> bool:
        if inm is not None and self.host.etag:
            # RFC 9110 §13.1.2: If-None-Match wins over If-Modified-Since.
            tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
            return etag in tags or "*" in tags
        if ims is not None and self.host.reliable_last_modified:
            try:
                since = parsedate_to_datetime(ims).timestamp()
            except (TypeError, ValueError, IndexError, OverflowError):
                return False
            return int(last) <= since
        return False
