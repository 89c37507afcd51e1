"""Records shared across the crawler: what one fetch produced, and why it failed.

`ErrorKind` values are stored in the metadata database as lowercase strings; never rename
one without a migration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ErrorKind(StrEnum):
    """Why a URL ended as an ERROR (DESIGN.md §7)."""

    TIMEOUT = "timeout"            # connect/read timeout, total deadline, or stop requested
    TOO_LARGE = "too_large"        # wire cap or decoded cap exceeded
    HTTP_STATUS = "http_status"    # 4xx/5xx (the status is in FetchResult.status)
    ROBOTS = "robots"              # refused by robots.txt (initial URL or a redirect hop)
    PARSE = "parse"                # unparseable URL or document
    DNS = "dns"                    # resolution failed or took too long
    CONNECT = "connect"            # refused, reset, TLS failure, broken connection
    REDIRECT = "redirect"          # too many hops, loop, bad scheme, no Location
    ADDRESS = "address"            # private/loopback/link-local/... address refused
    CONTENT_TYPE = "content_type"  # Content-Type not accepted
    SCOPE = "scope"                # outside the configured crawl scope
    ENCODING = "encoding"          # unsupported or corrupt Content-Encoding / charset
    TRAP = "trap"                  # crawler-trap defence
    TRUNCATED = "truncated"        # the body ended before its Content-Length or last chunk


@dataclass(frozen=True, slots=True)
class FetchResult:
    """Everything one fetch (with its redirect hops) produced.

    ``body`` is the decoded content (Content-Encoding removed), at most
    ``FetchLimits.max_decoded_bytes`` long; it is empty for errors, 304 and 3xx.
    ``started_at``/``finished_at`` are on the injected clock; ``elapsed_s`` is real time.
    """

    url: str
    final_url: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_type: str | None = None
    charset: str | None = None
    not_modified: bool = False
    redirects: tuple[str, ...] = ()
    error_kind: ErrorKind | None = None
    error_detail: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    elapsed_s: float = 0.0
    retry_after_s: float | None = None
    bytes_on_wire: int = 0
    last_modified: float | None = None
    etag: str | None = None

    @property
    def ok(self) -> bool:
        """True for a usable answer: a 2xx body or a 304 (no change)."""
        return self.error_kind is None
