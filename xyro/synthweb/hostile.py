"""Hostile pages: what each one does and how a correct crawler is expected to end up.

Expected outcomes (``HostileCase.expected``) are crawler-neutral words the integration tests
map onto Xyro's ERROR reasons: ``too_large``, ``timeout``, ``redirects`` (more hops than
allowed, or a loop), ``trap`` (stopped by trap defences), ``dead`` (404, later 410),
``http_status`` (an error status that persists while the rule holds), ``connect`` (refused),
``robots`` (nothing fetched while robots.txt answers 5xx), ``ok`` (must be stored
normally despite the abuse; ``expected_type`` then says as what).
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from xyro.synthweb.reply import Reply
from xyro.synthweb.spec import WebSpec

CALENDAR_START = (2026, 11)


@dataclass(frozen=True)
class HostileCase:
    name: str
    entry: str | None        # path linked from a normal page; None: a host-level case
    prefix: str | None       # every path of the case starts with this
    expected: str
    expected_type: str | None
    note: str


_C = HostileCase
CASES: dict[str, HostileCase] = {c.name: c for c in [
    _C("gzip_bomb", "/h/bomb.html", "/h/bomb.html", "too_large", None,
       "Content-Encoding: gzip; about 1 MB on the wire, spec.bomb_bytes decompressed"),
    _C("big_body", "/h/big.html", "/h/big.html", "too_large", None,
       "text/html of spec.big_body_bytes with a true Content-Length, streamed"),
    _C("slow_drip", "/h/drip.html", "/h/drip.html", "timeout", None,
       "headers at once, then 1 body byte per spec.drip_interval real seconds"),
    _C("redirect_loop", "/h/loop-a", "/h/loop-", "redirects", None,
       "302 /h/loop-a -> /h/loop-b -> /h/loop-a (absolute Locations)"),
    _C("redirect_chain", "/h/chain/1", "/h/chain/", "redirects", None,
       "spec.redirect_chain_length hops of 301/302/307 before a 200 page"),
    _C("redirect_short", "/h/moved", "/h/moved", "ok", "html",
       "301 then 302 to the host's home page: two hops, must be followed"),
    _C("calendar_trap", "/calendar/2026/11", "/calendar/", "trap", None,
       "every /calendar/Y/M page links to the next and previous month, forever"),
    _C("malformed_html", "/h/malformed.html", "/h/malformed.html", "ok", "html",
       "unclosed tags, stray bytes, NUL; lxml recovers and finds the links"),
    _C("bad_utf8", "/h/bad-utf8.html", "/h/bad-utf8.html", "ok", "html",
       "declared utf-8 (header and meta) with invalid byte sequences"),
    _C("bogus_charset", "/h/bogus-charset.html", "/h/bogus-charset.html", "ok", "html",
       "charset=x-no-such-charset in the header and the meta tag"),
    _C("gone", "/h/gone.html", "/h/gone.html", "dead", None,
       "404 until t0 + spec.gone_after_seconds (clock), 410 after"),
    _C("busy_503", "/h/busy.html", "/h/busy.html", "http_status", "html",
       "503 + Retry-After for spec.busy_seconds (clock) from its first request, a normal "
       "page after"),
    _C("throttled_host", None, None, "http_status", None,
       "a whole host answering 429 + Retry-After to requests sooner than "
       "spec.throttle_retry_after clock seconds after its previous page request"),
    _C("xml_as_text", "/h/data.txt", "/h/data.txt", "ok", "xml",
       "a well-formed XML document served as text/plain"),
    _C("html_as_xml", "/h/page.xml", "/h/page.xml", "ok", "html",
       "an HTML page served as application/xml"),
    _C("silent_host", "/", None, "timeout", None,
       "its own address; accepts TCP connections and never sends a byte"),
    _C("refused_port", "/", None, "connect", None,
       "its own address; the port is bound but not listening: connection refused"),
    _C("robots_500", None, None, "robots", None,
       "robots.txt answers 500 until t0 + spec.robots_error_seconds (clock)"),
    _C("robots_malformed", None, None, "ok", None,
       "robots.txt with garbage, typos, HTML and invalid bytes; one readable group "
       "disallows /private/"),
]}
HOST_LEVEL = frozenset({"throttled_host", "robots_500", "robots_malformed"})

Url = Callable[[int, str], str]


def build_gzip_bomb(decompressed: int, chunk: int = 1 << 20) -> bytes:
    """A valid single-member gzip stream of ``decompressed`` zero bytes, built in ms.

    After a full flush deflate restarts its dictionary, so every further 1 MiB block of
    zeros compresses to the same bytes; we compress two, repeat the second, and write the
    true CRC-32 and size trailer (RFC 1952).
    """
    blocks, rest = divmod(decompressed, chunk)
    if blocks == 0:
        return zlib.compress(bytes(rest), 9, wbits=31)
    zeros = bytes(chunk)
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    repeat = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.compress(bytes(rest)) + comp.flush(zlib.Z_FINISH)
    final_block = tail[:-8]  # drop the trailer of the 2-block stream comp actually saw
    crc = 0
    for _ in range(blocks):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(bytes(rest), crc)
    trailer = struct.pack("<II", crc, decompressed & 0xFFFFFFFF)
    return b"".join([first, *([repeat] * (blocks - 1)), final_block, trailer])


def _html(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"</head><body><h1>{title}</h1>{body}</body></html>\n")


class HostileResponder:
    """Answers the requests of the page-level hostile cases of one web."""

    def __init__(self, spec: WebSpec, t0: float, url: Url) -> None:
        self._spec = spec
        self._t0 = t0
        self._url = url
        self._bomb: bytes | None = None
        self._lock = threading.Lock()
        self._filler = (b"<p>" + b"filler " * 9000 + b"</p>\n")[: 1 << 16]
        self._busy_since: dict[int, float] = {}  # host → clock time of its first busy request
        self._busy_lock = threading.Lock()  # not the bomb's: its build holds that one
        if "gzip_bomb" in spec.hostile:
            # Built ahead: built at its first request, it ate into the crawler's fetch
            # deadline on a loaded machine (a timeout, not the too_large the bomb is for).
            threading.Thread(target=self.bomb, name="synthweb-bomb", daemon=True).start()

    def bomb(self) -> bytes:
        with self._lock:
            if self._bomb is None:
                self._bomb = build_gzip_bomb(self._spec.bomb_bytes)
            return self._bomb

    def reply(self, name: str, host: int, path: str, now: float) -> Reply | None:
        """The reply for ``path`` of case ``name`` on ``host``; None if not one of its paths."""
        method = getattr(self, "_" + name)
        return method(host, path, now)

    def _gzip_bomb(self, host: int, path: str, now: float) -> Reply:
        return Reply(200, "text/html; charset=utf-8", self.bomb(),
                     (("Content-Encoding", "gzip"),))

    def _big_body(self, host: int, path: str, now: float) -> Reply:
        return Reply(200, "text/html; charset=utf-8", self._filler,
                     length=self._spec.big_body_bytes, mode="stream")

    def _slow_drip(self, host: int, path: str, now: float) -> Reply:
        body = (b"<html><body>" + b"." * self._spec.drip_bytes)[: self._spec.drip_bytes]
        return Reply(200, "text/html; charset=utf-8", body, mode="drip")

    def _redirect_loop(self, host: int, path: str, now: float) -> Reply | None:
        nxt = {"/h/loop-a": "/h/loop-b", "/h/loop-b": "/h/loop-a"}.get(path)
        return None if nxt is None else _redirect(302, self._url(host, nxt))

    def _redirect_chain(self, host: int, path: str, now: float) -> Reply | None:
        tail = path[len("/h/chain/"):]
        if not tail.isdigit() or not 1 <= int(tail) <= self._spec.redirect_chain_length + 1:
            return None
        k = int(tail)
        if k > self._spec.redirect_chain_length:
            return Reply(200, "text/html; charset=utf-8",
                         _html("End of the chain", "<p>You made it.</p>").encode())
        return _redirect((301, 302, 307)[k % 3], f"/h/chain/{k + 1}")

    def _redirect_short(self, host: int, path: str, now: float) -> Reply | None:
        if path == "/h/moved":
            return _redirect(301, "/h/moved-again")
        if path == "/h/moved-again":
            return _redirect(302, self._url(host, "/"))
        return None

    def _calendar_trap(self, host: int, path: str, now: float) -> Reply | None:
        parts = path[len("/calendar/"):].split("/")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            return None
        y, m = int(parts[0]), int(parts[1])
        if not (1 <= m <= 12 and 1900 <= y <= 999_999):
            return None
        ny, nm = (y + 1, 1) if m == 12 else (y, m + 1)
        py, pm = (y - 1, 12) if m == 1 else (y, m - 1)
        links = f'<a href="/calendar/{ny}/{nm}">next month</a> '
        if py >= 1900:
            links += f'<a href="/calendar/{py}/{pm}">previous month</a> '
        links += '<a href="/">home</a>'
        body = _html(f"Events {y}-{m:02d}", f"<p>No events.</p><p>{links}</p>")
        return Reply(200, "text/html; charset=utf-8", body.encode())

    def _malformed_html(self, host: int, path: str, now: float) -> Reply:
        body = (b"<html><head><title>broken</title><body><div><p>unclosed <b>bold <i>both"
                b"\x00\x01\xff\xfe\x80 stray bytes <table><tr><td>cell"
                b"<a href='/'>home</a><a href=/h/malformed.html?again=1>self</a>"
                b"<div <p>>< /div></span></html></html><a href=\"/p/none.html\">after")
        return Reply(200, "text/html", body)

    def _bad_utf8(self, host: int, path: str, now: float) -> Reply:
        body = (b'<!DOCTYPE html><html><head><meta charset="utf-8"><title>caf\xc3\xa9 '
                b"\xc3\x28 \xa0\xa1 \xe2\x82</title></head><body><p>invalid: \xff\xfe\xfd "
                b"\xed\xa0\x80 (a surrogate) \xf8\x88\x80\x80\x80</p>"
                b'<a href="/">home</a></body></html>\n')
        return Reply(200, "text/html; charset=utf-8", body)

    def _bogus_charset(self, host: int, path: str, now: float) -> Reply:
        body = ('<!DOCTYPE html><html><head><meta charset="x-no-such-charset">'
                "<title>bogus charset</title></head><body><p>plain ascii text and "
                'caf\u00e9</p><a href="/">home</a></body></html>\n').encode("latin-1")
        return Reply(200, "text/html; charset=x-no-such-charset", body)

    def _gone(self, host: int, path: str, now: float) -> Reply:
        gone = now >= self._t0 + self._spec.gone_after_seconds
        status = 410 if gone else 404
        text = "Gone" if gone else "Not Found"
        return Reply(status, "text/html; charset=utf-8", _html(text, "").encode())

    def _busy_503(self, host: int, path: str, now: float) -> Reply:
        # Busy from the first request, not from t0: a crawler that reaches the page late
        # (a loaded machine) must still meet the 503 and its Retry-After.
        with self._busy_lock:
            since = self._busy_since.setdefault(host, now)
        left = since + self._spec.busy_seconds - now
        if left > 0:
            return Reply(503, "text/html; charset=utf-8", _html("Busy", "").encode(),
                         (("Retry-After", str(max(1, int(left + 0.999)))),))
        return Reply(200, "text/html; charset=utf-8",
                     _html("Not busy any more", '<a href="/">home</a>').encode())

    def _xml_as_text(self, host: int, path: str, now: float) -> Reply:
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<catalog xmlns:xlink='
                '"http://www.w3.org/1999/xlink" id="as-text"><title>served as text</title>'
                '<status rev="0">static</status><item xlink:type="simple" xlink:href='
                f'"{self._url(host, "/")}">home</item></catalog>\n')
        return Reply(200, "text/plain; charset=utf-8", body.encode())

    def _html_as_xml(self, host: int, path: str, now: float) -> Reply:
        body = _html("HTML served as XML", '<p>not xml<br>at all</p><a href="/">home</a>')
        return Reply(200, "application/xml", body.encode())


def _redirect(status: int, location: str) -> Reply:
    body = _html("Moved", f'<a href="{location}">here</a>').encode()
    return Reply(status, "text/html; charset=utf-8", body, (("Location", location),))
