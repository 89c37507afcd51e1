"""The fetcher: one URL in, one FetchResult out, whatever the server does (DESIGN.md §7, §8).

How it stays safe against hostile servers, and why:

* Redirects are followed here, one hop at a time, each hop checked again (scheme, suffix,
  address, the engine's robots/scope check). We call the adapter directly, not
  ``Session.send``: even with ``allow_redirects=False`` requests reads the whole body of a
  3xx to build ``Response.next``. A 3xx body is never read beyond a tiny announced length.
* Bodies are streamed raw and decoded by :mod:`xyro.net.body` with caps on wire and decoded
  bytes; never ``.content``/``.text``.
* The total deadline (a slow drip defeats the per-read timeout) and the connection to
  exactly the checked addresses (DNS rebinding) are :mod:`xyro.net.connections`; the names are
  resolved and checked by :mod:`xyro.net.dns`. Connecting and decoding are bounded by the
  deadline and the stop event too: both look at them between steps (addresses, slices).
* Threads: requests are prepared as bare ``PreparedRequest`` objects (no Session: nothing
  from the environment, no proxies, netrc or cookie jar, and a third of the CPU of
  ``Session.prepare_request``); all workers share one adapter whose urllib3
  ``PoolManager`` is thread-safe, so a kept-alive connection to a host is reused by
  whichever worker fetches that host next and idle sockets stay bounded by
  ``max_host_pools × max_per_host``. No urllib3 Retry: retries belong to the per-host
  scheduler.
* robots.txt (:meth:`FetchLimits.for_robots`) follows up to five redirect hops, to other
  hosts too: RFC 9309 §2.3.1.2 asks a crawler to follow them "even across authorities" and
  to obey a robots.txt so reached for the first host (a site may serve it from a CDN or its
  ``www.`` name while its pages stay on the bare host). Each hop passes the same scheme and
  address checks as any request, and a hop to another host the engine's ``hop_gate``
  (:mod:`xyro.crawl.robots_hops`: that host's politeness and the denied domains). Only its first 500 KiB are read (RFC 9309
  §2.5): a longer body is cut, not an error.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timezone
from email.utils import formatdate, parsedate_to_datetime
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import requests
import urllib3
from urllib3.exceptions import ReadTimeoutError
from urllib3.util import parse_url
from urllib3.util.retry import Retry

from xyro.net.body import BodyEncodingError, BodyTooLarge, Decoder, parse_content_encoding, read_capped
from xyro.net.filters import (
    DEFAULT_ACCEPT_CONTENT_TYPES, DEFAULT_SKIP_SUFFIXES, accepted_for, gzip_file, mime_type,
    suffix_skipped,
)
from xyro.clock import Clock
from xyro.net.connections import (
    FetchContext, FetchInterrupted, PinnedAdapter, UnpinnedConnection, Watchdog, norm_host,
)
from xyro.net.dns import DnsError, Resolver, address_refusal
from xyro.net.robots import ROBOTS_FETCH_BYTES
from xyro.records import ErrorKind, FetchResult

RedirectCheck = Callable[[str], ErrorKind | None]
#: (the fetch's first URL, a hop's target) -> None to follow the hop, else why not.
HopGate = Callable[[str, str], str | None]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DRAIN_BYTES = 8192          # a 3xx/4xx body announced this small is read to keep the socket
_CHARSET = re.compile(r";\s*charset\s*=\s*[\"']?([^\"';\s]+)", re.I)
_IO_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """Per-fetch limits; seconds are real time, sizes are bytes."""

    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    deadline_s: float = 60.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_decoded_bytes: int = 32 * 1024 * 1024
    max_redirects: int = 5
    allow_private_addresses: bool = False
    skip_suffixes: frozenset[str] = DEFAULT_SKIP_SUFFIXES
    accept_content_types: tuple[str, ...] = DEFAULT_ACCEPT_CONTENT_TYPES
    keep_prefix: bool = False          # a body past a cap is cut there, not TOO_LARGE

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "read_timeout_s", "deadline_s",
                     "max_body_bytes", "max_decoded_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"FetchLimits.{name} must be > 0, got {getattr(self, name)}")
        if self.max_redirects < 0:
            raise ValueError(f"FetchLimits.max_redirects must be >= 0, got {self.max_redirects}")

    def for_robots(self, max_redirects: int) -> FetchLimits:
        """These limits for robots.txt (module docstring; DESIGN.md §7): up to
        ``max_redirects`` hops (RFC 9309 §2.3.1.2 asks for five), any Content-Type, and the
        first :data:`ROBOTS_FETCH_BYTES` decoded bytes kept whatever the body's length
        (§2.5), never fewer because the page cap on the wire is smaller."""
        return replace(self, max_redirects=max_redirects,
                       accept_content_types=("text/plain", "text/html", "*/*"),
                       keep_prefix=True, max_decoded_bytes=ROBOTS_FETCH_BYTES,
                       max_body_bytes=max(self.max_body_bytes, ROBOTS_FETCH_BYTES))


def user_agent(product: str, contact_url: str) -> str:
    """``"<product> (+<contact URL>)"``, refusing characters that would break the header."""
    value = f"{product} (+{contact_url})"
    if any(ch in value for ch in "\r\n\0") or not product.strip():
        raise ValueError(f"user agent {value!r}: product must be non-empty, no CR/LF/NUL")
    return value


def parse_http_date(value: str | None) -> float | None:
    """An HTTP date (RFC 9110 §5.6.7, all three legacy forms) as POSIX seconds, or None."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:   # the obsolete forms carry no zone: they are GMT
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Retry-After as seconds from ``now`` (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    text = value.strip()
    if _is_decimal(text):
        return float(text)
    when = parse_http_date(text)
    return None if when is None else max(0.0, when - now)


class _Failure(Exception):
    def __init__(self, kind: ErrorKind, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass
class _Draft:
    url: str
    final_url: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_type: str | None = None
    charset: str | None = None
    not_modified: bool = False
    redirects: list[str] = field(default_factory=list)
    retry_after_s: float | None = None
    bytes_on_wire: int = 0
    last_modified: float | None = None
    etag: str | None = None
    conditional: bool = False  # validators were sent: only then is a 304 an answer


class Fetcher:
    """Thread-safe fetcher; one instance serves all worker threads."""

    def __init__(self, limits: FetchLimits, user_agent: str, resolver: Resolver, clock: Clock,
                 redirect_check: RedirectCheck | None = None, *,
                 hop_gate: HopGate | None = None,
                 max_host_pools: int = 1024, max_per_host: int = 4,
                 ca_bundle: str | None = None) -> None:
        """``redirect_check(target)`` may refuse a redirect hop (the fetch then ends as the
        kind it returns); ``hop_gate(first URL, target)`` too (as ``REDIRECT``, with the
        reason it returns), asked last, when every other check passed (the robots.txt
        fetcher's: :mod:`xyro.crawl.robots_hops`)."""
        if any(ch in user_agent for ch in "\r\n\0"):
            raise ValueError(f"user agent {user_agent!r} contains CR/LF/NUL")
        self._limits = limits
        self._resolver = resolver
        self._clock = clock
        self._redirect_check = redirect_check
        self._hop_gate = hop_gate
        self._verify: bool | str = ca_bundle or True   # a CA file for private PKIs and tests
        self._headers = {
            "User-Agent": user_agent,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,text/xml;q=0.9,"
                      "*/*;q=0.5",
            "Accept-Encoding": "gzip, deflate, br",   # exactly what xyro.net.body decodes
            "Connection": "keep-alive",
        }
        self._watchdog = Watchdog()
        self._adapter = PinnedAdapter(
            self._watchdog, pool_connections=max_host_pools,
            pool_maxsize=max_per_host, max_retries=Retry(0, read=False, redirect=False))

    @property
    def limits(self) -> FetchLimits:
        return self._limits

    def close(self) -> None:
        """Close pooled connections and stop the watchdog thread."""
        self._adapter.close()
        self._watchdog.close()

    def fetch(self, url: str, *, etag: str | None = None, last_modified: float | None = None,
              stop: threading.Event | None = None) -> FetchResult:
        """GET ``url`` (conditionally if validators are given); never raises for bad input."""
        started_at = self._clock.now()
        t0 = time.monotonic()
        draft = _Draft(url=url, final_url=url,
                       conditional=bool(etag) or last_modified is not None)
        ctx = FetchContext(deadline=t0 + self._limits.deadline_s, stop=stop, now=self._clock.now)
        kind: ErrorKind | None = None
        detail: str | None = None
        if stop is not None and stop.is_set():
            kind, detail = ErrorKind.TIMEOUT, f"stop requested before fetching {url}"
        else:
            self._watchdog.arm(ctx)
            self._adapter.bind(ctx)
            try:
                self._follow(draft, ctx, self._conditional_headers(etag, last_modified))
            except _Failure as failure:
                kind, detail = failure.kind, failure.detail
            finally:
                self._adapter.unbind()
                self._watchdog.finish(ctx)
        return FetchResult(
            url=draft.url, final_url=draft.final_url, status=draft.status,
            headers=draft.headers, body=draft.body if kind is None else b"",
            content_type=draft.content_type, charset=draft.charset,
            not_modified=draft.not_modified and kind is None,
            redirects=tuple(draft.redirects), error_kind=kind, error_detail=detail,
            started_at=ctx.sent_at if ctx.sent_at is not None else started_at,
            finished_at=self._clock.now(),
            elapsed_s=time.monotonic() - t0, retry_after_s=draft.retry_after_s,
            bytes_on_wire=draft.bytes_on_wire, last_modified=draft.last_modified,
            etag=draft.etag)

    # -- the hop loop ---------------------------------------------------------------------

    def _follow(self, draft: _Draft, ctx: FetchContext, extra: dict[str, str]) -> None:
        current = draft.url
        self._check_first(current)
        seen = {urldefrag(current)[0]}
        for hop in range(self._limits.max_redirects + 1):
            prepared = self._prepare(current, extra)
            draft.final_url = prepared.url or current
            ctx.host = norm_host(parse_url(prepared.url).host or "")
            ctx.addresses = self._addresses(ctx.host, prepared.url or current)
            response = self._send(prepared, ctx)
            if response.status_code not in REDIRECT_STATUSES:
                self._consume(draft, response, ctx)
                return
            location = _location(response.headers.get("location"))
            draft.status = response.status_code
            self._discard(response, draft)
            if not location:
                raise _Failure(ErrorKind.REDIRECT,
                               f"HTTP {response.status_code} from {current} has no Location")
            try:
                target = urldefrag(urljoin(draft.final_url, location.strip()))[0]
            except ValueError as exc:
                raise _Failure(ErrorKind.REDIRECT, f"HTTP {response.status_code} from "
                                                   f"{current}: bad Location {location!r}: "
                                                   f"{exc}") from None
            draft.redirects.append(target)
            if target in seen:
                raise _Failure(ErrorKind.REDIRECT, f"redirect loop: {current} -> {target}, "
                                                   f"seen before in this fetch")
            if hop == self._limits.max_redirects:
                raise _Failure(ErrorKind.REDIRECT,
                               f"more than {self._limits.max_redirects} redirects from "
                               f"{draft.url} (last to {target})")
            self._check_hop(draft.url, current, target)
            seen.add(target)
            current = target

    def _check_first(self, url: str) -> None:
        scheme = _scheme(url, ErrorKind.PARSE)
        if scheme not in ("http", "https"):
            raise _Failure(ErrorKind.SCOPE, f"{url}: only http and https URLs are fetched")
        if suffix_skipped(url, self._limits.skip_suffixes):
            raise _Failure(ErrorKind.CONTENT_TYPE, f"{url}: suffix is in the skip list")

    def _check_hop(self, first: str, source: str, target: str) -> None:
        scheme = _scheme(target, ErrorKind.REDIRECT)
        if scheme not in ("http", "https"):
            raise _Failure(ErrorKind.REDIRECT, f"redirect from {source} to {target} refused: "
                                               f"scheme {scheme!r} is not http/https")
        if suffix_skipped(target, self._limits.skip_suffixes):
            raise _Failure(ErrorKind.CONTENT_TYPE, f"redirect from {source} to {target} "
                                                   f"refused: suffix is in the skip list")
        if self._redirect_check is not None:
            refused = self._redirect_check(target)
            if refused is not None:
                raise _Failure(refused, f"redirect from {source} to {target} refused: {refused}")
        if self._hop_gate is not None:
            reason = self._hop_gate(first, target)
            if reason is not None:
                raise _Failure(ErrorKind.REDIRECT, f"redirect from {source} to {target} not "
                                                   f"followed: {reason}")

    def _addresses(self, host: str, url: str) -> tuple[str, ...]:
        try:
            addresses = self._resolver.resolve(host)
        except DnsError as exc:
            raise _Failure(ErrorKind.DNS, f"{url}: {exc}") from None
        if self._limits.allow_private_addresses:
            return addresses
        allowed = tuple(a for a in addresses if address_refusal(a) is None)
        if not allowed:
            reasons = ", ".join(f"{a} ({address_refusal(a)})" for a in addresses)
            raise _Failure(ErrorKind.ADDRESS,
                           f"{url}: {host} has only refused addresses: {reasons}; set "
                           f"allow_private_addresses to crawl such hosts")
        return allowed

    # -- one request ----------------------------------------------------------------------

    def _prepare(self, url: str, extra: dict[str, str]) -> requests.PreparedRequest:
        prepared = requests.PreparedRequest()
        try:
            prepared.prepare(method="GET", url=url,
                             headers={**self._headers, **extra} if extra else self._headers)
            return prepared
        except (requests.exceptions.RequestException, ValueError, UnicodeError) as exc:
            raise _Failure(ErrorKind.PARSE, f"{url}: not a fetchable URL: {exc}") from None

    def _send(self, prepared: requests.PreparedRequest, ctx: FetchContext) -> requests.Response:
        limits = self._limits
        try:
            # Not Session.send: it would read a 3xx body (see the module docstring).
            return self._adapter.send(prepared, stream=True, verify=self._verify, proxies={},
                                      timeout=(limits.connect_timeout_s, limits.read_timeout_s))
        except UnpinnedConnection as exc:
            raise _Failure(ErrorKind.ADDRESS, f"{prepared.url}: {exc}") from None
        except FetchInterrupted as exc:
            raise self._interrupted(exc.reason, f"{prepared.url}: no connection yet") from None
        except requests.exceptions.ConnectTimeout:
            raise self._io_failure(ctx, ErrorKind.TIMEOUT, f"{prepared.url}: connect timed out "
                                   f"after {limits.connect_timeout_s:g} s") from None
        except requests.exceptions.ReadTimeout:
            raise self._io_failure(ctx, ErrorKind.TIMEOUT, f"{prepared.url}: no response "
                                   f"within {limits.read_timeout_s:g} s") from None
        except requests.exceptions.ConnectionError as exc:
            raise self._io_failure(ctx, ErrorKind.CONNECT,
                                   f"{prepared.url}: {_reason(exc)}") from None
        except (requests.exceptions.RequestException, ValueError, UnicodeError) as exc:
            raise _Failure(ErrorKind.PARSE, f"{prepared.url}: {exc}") from None

    def _io_failure(self, ctx: FetchContext, kind: ErrorKind, detail: str) -> _Failure:
        """The deadline or the stop event explains any I/O error that follows them."""
        if ctx.expired is not None:
            return self._interrupted(ctx.expired, detail)
        return _Failure(kind, detail)

    def _interrupted(self, reason: str, detail: str) -> _Failure:
        """The fetch ended by its total deadline (``reason`` "deadline") or its stop event."""
        if reason == "deadline":
            return _Failure(ErrorKind.TIMEOUT, f"total deadline of {self._limits.deadline_s:g} "
                                               f"s passed ({detail})")
        return _Failure(ErrorKind.TIMEOUT, f"stop requested during the fetch ({detail})")

    def _consume(self, draft: _Draft, response: requests.Response, ctx: FetchContext) -> None:
        """Record a final (non-redirect) response and read its body under the caps."""
        limits = self._limits
        status = response.status_code
        headers = {k.lower(): v for k, v in response.headers.items()}
        draft.status, draft.headers = status, headers
        draft.content_type = mime_type(headers.get("content-type"))
        charset = _CHARSET.search(headers.get("content-type", ""))
        draft.charset = charset.group(1).lower() if charset else None
        draft.etag = headers.get("etag")
        draft.last_modified = parse_http_date(headers.get("last-modified"))
        if status in (429, 503):
            draft.retry_after_s = parse_retry_after(headers.get("retry-after"), self._clock.now())
        if status == 304:
            self._discard(response, draft)
            if not draft.conditional:  # nothing to be "not modified" against: no body
                raise _Failure(ErrorKind.HTTP_STATUS, f"HTTP 304 for {draft.final_url} to a "
                                                      "request without validators")
            draft.not_modified = True
            return
        if not 200 <= status < 300:
            self._discard(response, draft)
            raise _Failure(ErrorKind.HTTP_STATUS, f"HTTP {status} for {draft.final_url}")
        if not accepted_for(draft.final_url, draft.content_type, limits.accept_content_types,
                            limits.skip_suffixes):
            response.close()
            raise _Failure(ErrorKind.CONTENT_TYPE,
                           f"{draft.final_url}: Content-Type {draft.content_type} not accepted")
        length = _content_length(headers)
        if length is not None and length > limits.max_body_bytes and not limits.keep_prefix:
            response.close()
            raise _Failure(ErrorKind.TOO_LARGE, f"{draft.final_url}: Content-Length {length} "
                                                f"exceeds the cap {limits.max_body_bytes}")
        before = draft.bytes_on_wire
        try:
            # A gzip file (sitemap.xml.gz) is decompressed here, under the same caps.
            decoder = Decoder(parse_content_encoding(headers.get("content-encoding")),
                              limits.max_decoded_bytes,
                              gzip_file(draft.final_url, draft.content_type, limits.skip_suffixes),
                              keep_prefix=limits.keep_prefix, check=ctx.check)
            try:
                draft.body = read_capped(lambda n: response.raw.read(n, decode_content=False),
                                         decoder, limits.max_body_bytes)
            finally:
                draft.bytes_on_wire += decoder.wire_bytes
        except BodyTooLarge as exc:
            raise _Failure(ErrorKind.TOO_LARGE, f"{draft.final_url}: {exc}") from None
        except FetchInterrupted as exc:
            raise self._interrupted(exc.reason, f"{draft.final_url}: decoding of the body "
                                    f"abandoned") from None
        except BodyEncodingError as exc:
            raise self._io_failure(ctx, ErrorKind.ENCODING, f"{draft.final_url}: {exc}") from None
        except ReadTimeoutError:
            raise self._io_failure(ctx, ErrorKind.TIMEOUT, f"{draft.final_url}: body stalled "
                                   f"for {limits.read_timeout_s:g} s") from None
        except _IO_ERRORS as exc:
            if _incomplete(exc):
                raise self._io_failure(ctx, ErrorKind.TRUNCATED, _truncated(
                    draft.final_url, draft.bytes_on_wire - before, length)) from None
            raise self._io_failure(ctx, ErrorKind.CONNECT, f"{draft.final_url}: connection "
                                   f"broken while reading the body: {exc}") from None
        finally:
            response.close()
        if ctx.expired:   # a shut-down socket may look like a clean end of body
            raise self._io_failure(ctx, ErrorKind.TIMEOUT, f"{draft.final_url}: body cut")

    def _discard(self, response: requests.Response, draft: _Draft) -> None:
        """Close without reading; only a tiny announced body is drained to keep the socket."""
        length = _content_length({"content-length": response.headers.get("content-length", "")})
        if length is not None and length <= _DRAIN_BYTES:
            try:
                draft.bytes_on_wire += len(response.raw.read(_DRAIN_BYTES + 1,
                                                             decode_content=False))
            except _IO_ERRORS:
                pass   # the socket is closed below; nothing of this body is needed
        response.close()

    @staticmethod
    def _conditional_headers(etag: str | None, last_modified: float | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if etag and not any(ch in etag for ch in "\r\n\0"):
            headers["If-None-Match"] = etag
        if last_modified is not None:
            headers["If-Modified-Since"] = formatdate(last_modified, usegmt=True)
        return headers


def _scheme(url: str, kind: ErrorKind) -> str:
    try:
        return urlsplit(url).scheme.lower()
    except ValueError as exc:
        raise _Failure(kind, f"{url!r} is not a URL: {exc}") from None


def _location(value: str | None) -> str | None:
    """The Location header as the server meant it: http.client decodes header bytes as
    Latin-1, and servers send raw UTF-8 paths (``/café``), so re-decode them as UTF-8 where
    they are valid UTF-8 (as requests' own redirect code does)."""
    if not value:
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def _is_decimal(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes '²' or '٣', which int() refuses (a header
    is decoded as Latin-1, so any byte 0xB2 passes isdigit)."""
    return text.isascii() and text.isdigit()


def _content_length(headers: dict[str, str]) -> int | None:
    value = headers.get("content-length", "").strip()
    return int(value) if _is_decimal(value) else None


def _incomplete(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps: urllib3 puts http.client's error in its args)
    says the body ended before its announced end: Content-Length or the last chunk."""
    todo: list[BaseException] = [exc]
    for _ in range(8):   # a few levels of wrapping; never a walk around a cycle
        if not todo:
            return False
        error = todo.pop()
        if isinstance(error, http.client.IncompleteRead):
            return True
        todo += [a for a in error.args if isinstance(a, BaseException)]
        if error.__cause__ is not None:
            todo.append(error.__cause__)
    return False


def _truncated(url: str, received: int, length: int | None) -> str:
    """The detail of a body cut short: how much of it came, of how much announced."""
    told = (f"after {received} of {length} bytes (its Content-Length)" if length is not None
            else f"after {received} bytes of a chunked body, before its last chunk")
    return (f"{url}: the server closed the connection {told}; the incomplete body was not "
            f"kept (if this repeats, the server or a proxy in front of it cuts responses)")


def _reason(exc: BaseException) -> str:
    """The innermost readable cause of a requests/urllib3 error."""
    reason: Any = exc.args[0] if exc.args else exc
    reason = getattr(reason, "reason", reason)
    return str(reason)
