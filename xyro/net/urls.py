"""Canonical URLs, the politeness unit, crawl scope and trap defences (DESIGN.md §2, §7).

Every URL that reaches the frontier went through :func:`canonicalize`, so one resource has
one spelling (the seen-set and the metadata store key on it). :class:`Scope` decides what
the crawl wants; :class:`TrapGuard` refuses URL shapes that generate endless pages (repeated
path segments, query explosion, calendars) and caps pages per host per time unit.

Both are used through :class:`xyro.crawl.admission.Admission`, the one admission every producer
of the frontier passes (DESIGN.md §2).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin

from w3lib.url import canonicalize_url

from xyro.clock import Clock, unit_index
from xyro.net.hostnames import idna_host, ipv4_host

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 2048
_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"^(?:{_LABEL}\.)*{_LABEL}$")
# A '%' that starts no escape is a literal '%' (what a lenient server decodes it to). Escaped
# first, or w3lib decodes "%%41" to "%A" + the next character: a new escape, another resource.
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)$", re.S)


def _valid_hostname(host: str) -> bool:
    if not host or len(host) > 253:
        return False
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1].split("%")[0])
        except ValueError:
            return False
        return host.endswith("]")
    return _HOSTNAME.match(host) is not None


def _netloc(host: str, port: int | None, scheme: str) -> str:
    if port is None or port == DEFAULT_PORTS.get(scheme):
        return host
    return f"{host}:{port}"


def _split_netloc(netloc: str) -> tuple[str, int | None]:
    """(lowercased host without userinfo or trailing dot, port or None) of a URL authority.

    IPv6 hosts keep their brackets. Raises ValueError for a bad port.
    """
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]")
        host, rest = hostport[: end + 1], hostport[end + 1:]
        if end < 0 or (rest and not rest.startswith(":")):
            raise ValueError(f"bad IPv6 authority {netloc!r}")
        port_text = rest[1:]
    else:
        host, _, port_text = hostport.partition(":")
    port = None
    if port_text:
        if not port_text.isdigit() or int(port_text) > 65535:
            raise ValueError(f"bad port in {netloc!r}")
        port = int(port_text)
    return host.lower().rstrip("."), port


def canonicalize(url: str, base: str | None = None, max_length: int = MAX_URL_LENGTH) -> str | None:
    """The canonical form of ``url`` (resolved against ``base``), or None if not crawlable.

    The canonical form is also the URL fetched. w3lib's ``canonicalize_url`` sorts the
    query (two links naming the same parameters in another order, as faceted navigation
    writes them, are one URL and one fetch), normalizes percent-encoding (UTF-8), resolves
    dot segments and drops the fragment; a query parameter written without "=" keeps that
    spelling (``?wsdl``, not w3lib's ``?wsdl=``); the host is IDNA-encoded as browsers do
    (:func:`idna_host`) and an IPv4 address in any spelling becomes its dotted quad
    (:func:`ipv4_host`); the scheme and host are lowercased, a trailing dot on the host and
    the default port are dropped, and user:password@ is removed (a crawler does not replay
    credentials found in links). None for anything that is not http(s), has no valid host
    (one ``idna`` refuses, a number that is no IPv4 address), does not parse, or is longer
    than ``max_length`` characters after canonicalization.
    """
    if not isinstance(url, str):
        return None
    url = url.strip()
    # Refuse absurd inputs before spending parser time on them.
    if not url or len(url) > 4 * max_length:
        return None
    if base:
        try:
            url = urljoin(base, url)
        except ValueError:
            return None
    plain = _already_canonical(url)
    if plain is not None:
        return plain if len(plain) <= max_length else None
    return _canonicalize_w3lib(url, max_length)


# An absolute URL that canonicalization leaves as it is: lowercase http(s) scheme and
# host (plain ASCII labels), no userinfo, a non-default port without leading zeros, a path
# of unreserved characters only (nothing to percent-encode or decode), no dot segment, no
# query, no fragment, and a host that is no other spelling of an IPv4 address. Most links a
# crawler meets look like this; skipping w3lib for them halves the loader's time on
# link-heavy XML. tests/politeness/test_politeness_urls.py checks the two paths agree on
# generated URLs.
_PLAIN = re.compile(
    r"(https?)://((?:(?!-)[a-z0-9-]{1,63}(?<!-)\.)*(?!-)[a-z0-9-]{1,63}(?<!-))"
    r"(?::([1-9][0-9]{0,4}))?(/[A-Za-z0-9._~/-]*)?")


def _already_canonical(url: str) -> str | None:
    """``url`` (with "/" for an empty path) if it is already canonical, else None."""
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path = match.groups()
    if len(host) > 253 or (path and "/." in path):
        return None
    if port is not None and (int(port) > 65535 or int(port) == DEFAULT_PORTS[scheme]):
        return None
    last = host[host.rfind(".") + 1:]
    if "0" <= last[0] <= "9" and _numeric_host_differs(host):
        return None   # 127.1, 0x7f.0.0.1, 999.1.1.1: the general path spells or refuses it
    return url if path else url + "/"


def _numeric_host_differs(host: str) -> bool:
    """``host`` is an IPv4 address spelled otherwise than as its dotted quad, or a number
    that is no address."""
    try:
        return ipv4_host(host) != host
    except ValueError:
        return True


# A relative reference made of path characters only (no scheme, query, fragment, leading
# "/" or dot segment): against a canonical base it resolves by concatenation to a URL that
# is canonical already. XML documents carry hundreds of such hrefs.
_PLAIN_RELATIVE = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~/-]*")


def plain_directory(base: str) -> str | None:
    """The directory of ``base`` ("http://h/a/b.xml" → "http://h/a/") when ``base`` is
    already canonical (see :func:`join_plain`), else None."""
    if _already_canonical(base) != base:
        return None
    return base[:base.rfind("/") + 1]


def join_plain(directory: str, href: str, max_length: int = MAX_URL_LENGTH) -> str | None:
    """``canonicalize(href, base)`` for a base in ``directory`` (from :func:`plain_directory`)
    when ``href`` is a plain relative path, by concatenation; None means: take the general
    path (tests check both agree)."""
    if _PLAIN_RELATIVE.fullmatch(href) is None or "/." in href:
        return None
    url = directory + href
    return url if len(url) <= max_length else None


def _canonicalize_w3lib(url: str, max_length: int) -> str | None:
    """The general path of :func:`canonicalize` (``url`` is absolute)."""
    try:
        scheme = url.partition(":")[0].lower()
        if scheme not in DEFAULT_PORTS:
            return None
        url = _STRAY_PERCENT.sub("%25", _ascii_host(url))
        match = _AUTHORITY.match(canonicalize_url(url))
        if match is None:
            return None
        host, port = _split_netloc(match.group(2))
        host = ipv4_host(host)
        rest = _bare_parameters(url, match.group(3))
    except (ValueError, UnicodeError):
        return None
    if not _valid_hostname(host) or port == 0:
        return None
    if not rest.startswith("/"):
        rest = "/" + rest
    out = f"{scheme}://{_netloc(host, port, scheme)}{rest}"
    return out if len(out) <= max_length else None


def _ascii_host(url: str) -> str:
    """``url`` with its host encoded by :func:`idna_host`, before w3lib would encode it with
    the IDNA2003 codec. Raises ValueError for a host that cannot be encoded."""
    match = _AUTHORITY.match(url)
    if match is None:
        return url
    scheme, netloc, rest = match.groups()
    userinfo, at, hostport = netloc.rpartition("@")
    if hostport.isascii() or hostport.startswith("["):
        return url
    host, colon, port = hostport.partition(":")
    return f"{scheme}://{userinfo}{at}{idna_host(host)}{colon}{port}{rest}"


def _bare_parameters(url: str, rest: str) -> str:
    """``rest`` (w3lib's canonical path and query of ``url``) with the query parameters
    that ``url`` wrote without "=" written so again: w3lib turns ``?wsdl`` into ``?wsdl=``,
    which a JAX-WS endpoint does not answer with its WSDL."""
    query = url.partition("#")[0].partition("?")[2]
    bare = [piece for piece in query.split("&") if piece and "=" not in piece]
    if not bare:
        return rest
    # Each name as w3lib writes it in the canonical query (percent-encoding normalized).
    names = {canonicalize_url("http://h/?" + piece).partition("?")[2] for piece in bare}
    path, _, canonical = rest.partition("?")
    pieces = [piece[:-1] if piece in names else piece for piece in canonical.split("&")]
    return f"{path}?{'&'.join(pieces)}"


def _split_authority(url: str) -> tuple[str, str, int | None]:
    match = _AUTHORITY.match(url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in DEFAULT_PORTS or not match.group(2):
        raise ValueError(f"URL {url!r} is not an http(s) URL with a host; canonicalize it first")
    try:
        host, port = _split_netloc(match.group(2))
    except ValueError as exc:
        raise ValueError(f"cannot find the host of URL {url!r}: {exc}") from exc
    if not host:
        raise ValueError(f"URL {url!r} is not an http(s) URL with a host; canonicalize it first")
    return scheme, host, port


def host_key(url: str) -> str:
    """The politeness unit of ``url``: "host:port" lowercased, port omitted when default.

    http://h and https://h share one key (one server, one politeness budget). Raises
    ValueError for a URL without an http(s) scheme and host.
    """
    scheme, host, port = _split_authority(url)
    return _netloc(host, port, scheme)


def robots_origin(url: str) -> str:
    """The authority a robots.txt governs (RFC 9309 §2.3): "scheme://host[:port]"."""
    scheme, host, port = _split_authority(url)
    return f"{scheme}://{_netloc(host, port, scheme)}"


def url_keys(url: str) -> tuple[str, str]:
    """(:func:`host_key`, :func:`robots_origin`) of ``url`` from one parse."""
    scheme, host, port = _split_authority(url)
    netloc = _netloc(host, port, scheme)
    return netloc, f"{scheme}://{netloc}"


def robots_url(origin: str) -> str:
    """The robots.txt URL of an origin from :func:`robots_origin`."""
    return origin.rstrip("/") + "/robots.txt"


def _normalize_domain(domain: str) -> str:
    """A configured domain spelled as canonical URLs spell their hosts (:func:`idna_host`,
    :func:`ipv4_host`), so that it matches them."""
    d = domain.strip().lower().strip(".")
    if not d:
        raise ValueError(f"empty domain {domain!r} in the scope configuration")
    if ":" in d:   # an IPv6 address (a host without its brackets)
        return d
    try:
        return ipv4_host(idna_host(d).lower().strip("."))
    except ValueError as exc:
        raise ValueError(f"domain {domain!r} in the scope configuration is not a valid host "
                         f"name ({exc}); write it as links name it, e.g. 'bücher.de', "
                         "'xn--bcher-kva.de' or '192.0.2.1'") from exc


def _compile(patterns: Iterable[str], kind: str) -> list[re.Pattern[str]]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise ValueError(f"scope {kind} pattern {p!r} is not a valid regular expression: {exc}") from exc
    return out


def _seed_hosts(seeds: Iterable[str]) -> list[str]:
    hosts = []
    for seed in seeds:
        canon = canonicalize(seed)
        if canon is None:
            raise ValueError(f"seed {seed!r} is not a crawlable http(s) URL")
        hosts.append(_bare_host(_split_authority(canon)[1]))
    return hosts


def _bare_host(host: str) -> str:
    """``host`` as the scope matches it: an IPv6 literal without its brackets."""
    return host.strip("[]") if host.startswith("[") else host


@dataclass(frozen=True)
class ScopeSeeds:
    """What a scope derived from the seeds is built from: ``urls`` (the seeds: their hosts
    and subdomains) and ``found`` (where a seed redirected: those hosts exactly)."""

    urls: tuple[str, ...] = ()
    found: tuple[str, ...] = ()


#: Hosts whose verdict a domain set remembers (then it starts over).
_MEMO_HOSTS = 100_000


class _DomainSet:
    """Domains matching themselves and their subdomains; lookup walks the host's suffixes."""

    def __init__(self, domains: Iterable[str]) -> None:
        self._domains = {_normalize_domain(d) for d in domains}
        # Verdicts by host: a crawl asks about the same hosts over and over.
        self._memo: dict[str, bool] = {}

    def union(self, domains: Iterable[str]) -> _DomainSet:
        return _DomainSet([*self._domains, *domains])

    def __bool__(self) -> bool:
        return bool(self._domains)

    def matches(self, host: str) -> bool:
        if not self._domains:
            return False
        verdict = self._memo.get(host)
        if verdict is None:
            verdict = self._match(host)
            if len(self._memo) >= _MEMO_HOSTS:
                self._memo.clear()
            self._memo[host] = verdict
        return verdict

    def _match(self, host: str) -> bool:
        if host in self._domains:
            return True
        if host.startswith("["):
            return False
        labels = host.split(".")
        return any(".".join(labels[i:]) in self._domains for i in range(1, len(labels)))


class Scope:
    """What the crawl wants: domains, URL patterns and link depth (DESIGN.md §2, §7).

    Empty ``allowed_domains`` means the seeds' hosts (``seeds``: the configured seeds and
    sitemaps and those added with ``xyro seed``; none at all: every host, see
    :attr:`unbounded`), and the hosts where a seed redirected (``found``), exactly. A domain
    also allows its subdomains.
    Denied domains win over allowed ones; ``deny_patterns`` (regex search on the canonical
    URL) win over ``allow_patterns``; with ``allow_patterns`` given, one must match.
    ``max_depth`` None means unlimited; seeds have depth 0.
    """

    def __init__(
        self,
        seeds: Iterable[str] = (),
        allowed_domains: Iterable[str] = (),
        denied_domains: Iterable[str] = (),
        allow_patterns: Iterable[str] = (),
        deny_patterns: Iterable[str] = (),
        max_depth: int | None = None,
        found: Iterable[str] = (),
    ) -> None:
        allowed = list(allowed_domains)
        # Empty allowed_domains: the seeds' hosts. Such a scope grows with the seeds and
        # never refuses a seed itself (see :meth:`check`).
        self.derived = not allowed
        seeds = list(seeds)
        # The seeds themselves: where one redirects, a derived scope follows.
        self._seeds = frozenset(filter(None, map(canonicalize, seeds)))
        if self.derived:
            allowed = _seed_hosts(seeds)
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"scope max_depth must be >= 0, got {max_depth}")
        self._allowed = _DomainSet(allowed)
        # Hosts of the seeds found where a seed redirected: that host exactly, never its
        # subdomains (a redirect to a bare suffix, "com", must not open every .com host).
        self._found_hosts: frozenset[str] = frozenset()
        self._lock = threading.Lock()  # the dispatcher and the daemon's jobs add seeds
        if self.derived:
            self.add_found(found)
        self._denied = _DomainSet(denied_domains)
        self._allow = _compile(allow_patterns, "allow")
        self._deny = _compile(deny_patterns, "deny")
        self.max_depth = max_depth

    @property
    def unbounded(self) -> bool:
        """Derived from no seed at all: every host is in scope (the crawl warns at start)."""
        return self.derived and not self._allowed and not self._found_hosts

    def add_seeds(self, seeds: Iterable[str]) -> None:
        """Seeds added while running: their hosts join a scope derived from the seeds."""
        seeds = list(seeds)
        with self._lock:  # new sets replace the old: readers see one or the other
            self._seeds = self._seeds.union(filter(None, map(canonicalize, seeds)))
            if self.derived:
                self._allowed = self._allowed.union(_seed_hosts(seeds))

    def add_found(self, seeds: Iterable[str]) -> None:
        """Seeds found where a seed redirected: their hosts exactly (not their subdomains)
        join a scope derived from the seeds."""
        hosts = _seed_hosts(seeds)
        with self._lock:
            self._seeds = self._seeds.union(filter(None, map(canonicalize, seeds)))
            if self.derived:
                self._found_hosts = self._found_hosts.union(hosts)

    def fingerprint(self) -> str:
        """A digest of what decides whether a URL is in scope, depth aside: the domains, the
        patterns and, for a scope derived from the seeds, the seeds' hosts. Equal digests,
        equal verdicts; a stored one tells a later run that the scope changed."""
        with self._lock:
            parts = [self.derived, sorted(self._allowed._domains), sorted(self._found_hosts),
                     sorted(self._denied._domains), [p.pattern for p in self._allow],
                     [p.pattern for p in self._deny]]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]

    def is_seed(self, url: str) -> bool:
        """``url`` (canonical) is one of the seeds."""
        return url in self._seeds

    def host_denied(self, url: str) -> bool:
        """``url``'s host is in a denied domain (or ``url`` has no http(s) host)."""
        try:
            host = _split_authority(url)[1]
        except ValueError:
            return True
        return self._denied.matches(_bare_host(host))

    def denied(self, url: str) -> str | None:
        """Why ``url`` (canonical) may never be fetched, whoever asks for it (a denied domain,
        a deny pattern, no http(s) host), or None: what binds the producers that may leave
        the scope (a DTD's host, the global estimate's pages), as it binds every other."""
        try:
            host = _bare_host(_split_authority(url)[1])
        except ValueError:
            return "not an http(s) URL with a host"
        if self._denied.matches(host):
            return f"host {host} is in a denied domain"
        for pat in self._deny:
            if pat.search(url):
                return f"matches deny pattern {pat.pattern!r}"
        return None

    def check(self, url: str, depth: int, seed: bool = False) -> str | None:
        """None if ``url`` (canonical) at link ``depth`` is in scope, else the reason why not.

        ``seed``: the URL is a seed; the domains derived from the seeds do not refuse it
        (configured ``allowed_domains``, denied domains and patterns still do).
        """
        if self.max_depth is not None and depth > self.max_depth:
            return f"depth {depth} exceeds max_depth {self.max_depth}"
        reason = self.denied(url)
        if reason is not None:
            return reason
        host = _bare_host(_split_authority(url)[1])
        if self._allowed and not (seed and self.derived) and not self._allowed.matches(host) \
                and host not in self._found_hosts:
            return f"host {host} is outside the allowed domains"
        if self._allow and not any(p.search(url) for p in self._allow):
            return "matches no allow pattern"
        return None


# A year followed by a month (2024/05, 2024-5, 2024_05) or a year= query parameter.
_DATE_PATH = re.compile(r"(?:^|[/=&?])([12]\d{3})[-/_.](0?[1-9]|1[0-2])(?!\d)")
_YEAR_PARAM = re.compile(r"(?:^|[?&;])(?:year|yr|y|date|month|day)=([12]\d{3})(?!\d)", re.I)


class TrapGuard:
    """Defences against crawler traps (DESIGN.md §2, §7).

    Pure URL checks: length; a block of 1..``max_block`` path segments repeated
    consecutively more than ``max_repeated_segments`` times (/a/b/a/b/a/b/...); more than
    ``max_path_segments`` segments; more than ``max_query_params`` query parameters; a
    calendar date (a year 1000–2999 then a month, as in /2031/05 or ?month=2031-05, or a
    year= parameter) more than ``calendar_future_years`` ahead of the clock's year or before
    ``calendar_min_year`` (endless next-month links). The date check is a heuristic (an id
    like /1234-5 looks like a date); the per-host budget is the backstop for any trap. A per-host budget then admits at most
    ``max_pages_per_host_per_unit`` URLs per host per time unit of ``unit_s`` seconds (the
    counter resets when the unit changes): whatever shape a trap takes, it costs a bounded
    number of fetches per unit.

    Not thread-safe: call from the engine's dispatcher thread.
    """

    def __init__(
        self,
        clock: Clock,
        max_url_length: int = MAX_URL_LENGTH,
        max_repeated_segments: int = 2,
        max_query_params: int = 16,
        max_pages_per_host_per_unit: int = 10_000,
        unit_s: float = 86_400.0,
        max_path_segments: int = 32,
        max_block: int = 8,
        calendar_future_years: int = 2,
        calendar_min_year: int = 1990,
    ) -> None:
        for name, value in [("max_url_length", max_url_length),
                            ("max_repeated_segments", max_repeated_segments),
                            ("max_query_params", max_query_params),
                            ("max_pages_per_host_per_unit", max_pages_per_host_per_unit),
                            ("max_path_segments", max_path_segments), ("max_block", max_block)]:
            if value < 1:
                raise ValueError(f"trap guard {name} must be >= 1, got {value}")
        if unit_s <= 0:
            raise ValueError(f"trap guard unit_s must be > 0 seconds, got {unit_s}")
        self._clock = clock
        self.max_url_length = max_url_length
        self.max_repeated_segments = max_repeated_segments
        self.max_query_params = max_query_params
        self.max_pages = max_pages_per_host_per_unit
        self.unit_s = unit_s
        self.max_path_segments = max_path_segments
        self.max_block = max_block
        self.calendar_future_years = calendar_future_years
        self.calendar_min_year = calendar_min_year
        self._unit = -1
        self._pages: dict[str, int] = {}

    def check(self, url: str, count: bool = True) -> str | None:
        """None if ``url`` (canonical) may be crawled, else the reason; counts it if admitted.

        ``count=False`` checks without spending the host's budget (for URLs already known).
        """
        reason = self.check_shape(url)
        if reason is not None:
            return reason
        return self.check_budget(url, count)

    def check_budget(self, url: str, count: bool = True) -> str | None:
        """The per-host budget of :meth:`check` alone; counts ``url`` if admitted."""
        try:
            host = host_key(url)
        except ValueError:
            return "not an http(s) URL with a host"
        unit = unit_index(self._clock.now(), self.unit_s)
        if unit != self._unit:
            self._unit, self._pages = unit, {}
        used = self._pages.get(host, 0)
        if used >= self.max_pages:
            return f"host {host} reached {self.max_pages} pages in this time unit"
        if count:
            self._pages[host] = used + 1
        return None

    def check_shape(self, url: str) -> str | None:
        """The pure URL-shape checks of :meth:`check` (no budget)."""
        if len(url) > self.max_url_length:
            return f"URL longer than {self.max_url_length} characters"
        match = _AUTHORITY.match(url)
        if match is None:
            return "not an http(s) URL with a host"
        path, _, query = match.group(3).partition("#")[0].partition("?")
        segments = [s for s in path.split("/") if s]
        if len(segments) > self.max_path_segments:
            return f"path has more than {self.max_path_segments} segments"
        block = self._repeated_block(segments)
        if block:
            return f"path segment block {block!r} repeats more than {self.max_repeated_segments} times"
        if query:
            n_params = sum(1 for p in query.split("&") if p)
            if n_params > self.max_query_params:
                return f"query has {n_params} parameters (more than {self.max_query_params})"
        return self._calendar(path + "?" + query)

    def _repeated_block(self, segments: list[str]) -> str | None:
        """A block of L segments repeated consecutively more than R times, found in O(n·L)."""
        n, r = len(segments), self.max_repeated_segments
        for length in range(1, min(self.max_block, n // (r + 1)) + 1):
            run = 0  # consecutive positions i with segments[i] == segments[i + length]
            for i in range(n - length):
                run = run + 1 if segments[i] == segments[i + length] else 0
                if run >= length * r:
                    start = i - length * r + 1
                    return "/".join(segments[start:start + length])
        return None

    def _calendar(self, path_and_query: str) -> str | None:
        year_now = int(1970 + self._clock.now() // 31_556_952)  # mean Gregorian year
        years = [int(m.group(1)) for m in _DATE_PATH.finditer(path_and_query)]
        years += [int(m.group(1)) for m in _YEAR_PARAM.finditer(path_and_query)]
        for year in years:
            if year > year_now + self.calendar_future_years or year < self.calendar_min_year:
                return f"calendar-like date with year {year} out of range"
        return None
