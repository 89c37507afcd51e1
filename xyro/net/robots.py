"""robots.txt cache per RFC 9309, parsed with protego (DESIGN.md §7).

Keyed by origin "scheme://host[:port]" (:func:`xyro.net.urls.robots_origin`): RFC 9309 §2.3 says
a robots.txt governs only its own scheme, host and port. The engine fetches
``robots_url(origin)`` with the fetcher and hands the outcome to :meth:`RobotsCache.store`:

- 2xx: the body (first 500 KiB, RFC 9309 §2.5) is parsed with protego; a body that protego
  cannot parse counts as empty (allow all) — protego is lenient and ignores bad lines. The
  fetch keeps :data:`ROBOTS_FETCH_BYTES` of a longer body, so a 12 MB robots.txt is its
  first 500 KiB, not a failed fetch. Of the Allow/Disallow lines each user agent gets, the
  first :data:`MAX_ROBOTS_RULES` are kept and the rest ignored, with a WARNING (as the size
  cap, §2.5, lets a crawler ignore what lies past it): protego tries a URL against every
  wildcard rule in turn, under this cache's one lock, so 13,000 rules made one verdict take
  two seconds for every worker and the dispatcher; with the cap one takes milliseconds.
  Groups naming only other crawlers never apply to us, and their rules are dropped.
- 4xx other than 429 ("unavailable"), and a 3xx left after the fetcher's 5 redirects (to
  any host: :mod:`xyro.net.fetcher`) or a redirect loop; §2.3.1.2 lets us call such a
  robots.txt unavailable: allow all (§2.3.1.3). A robots.txt reached through redirects,
  on another host too, governs the origin it was asked for. :meth:`RobotsCache.unavailable`
  records the same for a fetch that ended otherwise without an answer to read
  (:mod:`xyro.crawl.robots_answers`).
- 5xx, 429, any other status, or unreachable (status None: DNS, connect, timeout; §2.3.1.4):
  disallow all until ``fetched_at + unreachable_retry_s``,
  then the robots.txt is fetched again. (429 is treated like 5xx, as Google does: the server
  asks us to back off.)

Entries expire ``ttl_s`` (≤ 24 h, §2.4) after the fetch. The product token is matched case
insensitively and as a whole (§2.2.1; :func:`_own_groups`). Crawl-delay (or Request-rate, as
seconds per request) is capped at ``max_crawl_delay_s`` so a hostile robots.txt cannot park
a host for days. /robots.txt itself is always allowed. A URL with a query must be allowed
with each of its parameters first (:func:`query_orders`): canonical URLs have their
parameters sorted, and a rule like ``Disallow: /?s=`` was written for the order the site's
links use.
Thread-safe (one lock): fetch workers may check redirect hops with :meth:`verdict`.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from protego import Protego

from xyro.clock import Clock
from xyro.net.urls import canonicalize, robots_origin, robots_url

log = logging.getLogger(__name__)

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309 §2.5: parse at least 500 KiB; we parse at most that
#: What the robots.txt fetch keeps of a body: one byte past MAX_ROBOTS_BYTES tells
#: ``_parse`` that the body goes on, so it cuts at the last full line.
ROBOTS_FETCH_BYTES = MAX_ROBOTS_BYTES + 1
MAX_TTL_S = 86_400.0
MAX_QUERY_ORDERS = 8  # query parameters tried first in a robots.txt match (query_orders)
#: Allow/Disallow lines kept per user agent of a robots.txt (module docstring). A verdict
#: costs up to MAX_QUERY_ORDERS matches against each of them (two for a rule ending in
#: "$"): about 50 ms at worst with this many 11-wildcard rules and a 1,800-character URL
#: of 8 parameters, 2.5 ms for a short one (1 to 2 s with the 12,700 a 500 KiB file holds).
#: Sites rarely write more than a few hundred.
MAX_ROBOTS_RULES = 1000

StateKind = Literal["needs_fetch", "allowed", "disallow_all"]


@dataclass(frozen=True, slots=True)
class RobotsState:
    """What the cache knows of an origin: fetch robots.txt, obey ``rules``, or wait ``until``.

    ``rules`` is None for "allow all" (4xx); ``until`` is the POSIX time a disallow-all ends.
    """

    kind: StateKind
    rules: Protego | None = None
    until: float = 0.0
    query_rules: bool = False  # rules may tell query orders apart (:func:`query_orders`)


NEEDS_FETCH = RobotsState("needs_fetch")


@dataclass(slots=True)
class _Entry:
    state: RobotsState
    expires: float
    crawl_delay: float
    sitemaps: list[str]


def query_orders(url: str, limit: int = MAX_QUERY_ORDERS) -> list[str]:
    """``url``, and ``url`` with each of its first ``limit`` query parameters moved first.

    Canonical URLs have their query parameters sorted (w3lib), but a site writes its rules
    for the links it makes: ``Disallow: /?s=`` is meant for ``/?s=shoes&post_type=x``, which
    the crawl holds as ``/?post_type=x&s=shoes``. A URL is fetched only if every order is
    allowed, so a rule on any one parameter holds whatever order the page wrote.
    """
    head, sep, query = url.partition("?")
    if not sep:
        return [url]
    query, hash_, fragment = query.partition("#")
    params = query.split("&")
    orders = [url]
    for i in range(1, min(len(params), limit)):
        moved = [params[i], *params[:i], *params[i + 1:]]
        orders.append(f"{head}?{'&'.join(moved)}{hash_}{fragment}")
    return orders


_USER_AGENT_LINE = re.compile(r"^([ \t]*user-agent[ \t]*:[ \t]*)([^#\r\n]*)", re.I | re.M)
_PRODUCT_TOKEN = re.compile(r"[^\s/]+")  # the name, up to any "/version"
_ANOTHER_CRAWLER = "~another~"  # a User-agent no product token can contain


# How protego reads a line (after "#" comments are cut): a User-agent line (three spellings,
# then ":" or a space), an Allow/Disallow line (its misspellings of Disallow too), a line
# that applies to the whole site and does not end a group (Sitemap, Host), or another
# directive: any line with a ":", or one that starts with a directive's name.
_UA_LINE = re.compile(r"\s*user(?:-|\s*)agent(?:\s*:|\s+)(.*)", re.I | re.S)
_RULE_LINE = re.compile(
    r"\s*(?:allow|disallow|dissallow|dissalow|disalow|diasllow|disallaw)(?:\s*:|\s+)\s*\S", re.I)
_SITE_WIDE_LINE = re.compile(r"\s*(?:sitemaps?|site-map|host)(?:\s*:|\s+)", re.I)
_OTHER_DIRECTIVE = re.compile(r"\s*(?:crawl[-\s]delay|request[-\s]rate|visit[-\s]time)\s", re.I)
#: What a rule line past the cap becomes: an empty Disallow, no rule, but a directive still
#: (a User-agent line after it starts a new group, as after the line it replaces).
_NO_RULE = "Disallow:"


def _cap_rules(text: str, limit: int) -> tuple[str, int]:
    """``text`` (after :func:`_own_groups`) with the first ``limit`` Allow/Disallow lines of
    each user agent kept, and how many lines of groups that may be this crawler's were
    dropped beyond them. The rules of groups naming only other crawlers are dropped too,
    uncounted: they never apply. Lines and groups are read as protego reads them (lines
    split by ``str.splitlines``; consecutive User-agent lines share the rules after them)."""
    counts: dict[str, int] = {}
    agents: list[str] = []
    in_agents = False
    dropped = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        bare = line.partition("#")[0]
        agent = _UA_LINE.match(bare)
        if agent is not None:
            if not in_agents:
                agents, in_agents = [], True
            agents.append(agent.group(1).strip().lower())
            continue
        if not bare.strip() or _SITE_WIDE_LINE.match(bare):
            continue
        rule = _RULE_LINE.match(bare) is not None
        if rule or ":" in bare or _OTHER_DIRECTIVE.match(bare):
            in_agents = False   # a directive: the next User-agent line starts a new group
        if not rule:
            continue
        ours = [a for a in agents if a != _ANOTHER_CRAWLER]
        if ours and any(counts.get(a, 0) < limit for a in ours):
            for a in ours:
                counts[a] = counts.get(a, 0) + 1
            continue
        lines[i] = _NO_RULE
        dropped += bool(ours)
    return "\n".join(lines), dropped


def _own_groups(text: str, token: str) -> str:
    """``text`` with each User-agent line that names this crawler naming it by ``token``
    alone, and each that names another made one no token matches. RFC 9309 §2.2.1 matches
    the product token case-insensitively and as a whole, read as Google's parser reads it
    (the name before any "/version"); protego alone lets ``Xy`` name ``XyroBot`` and misses
    ``XyroBot/2.1``."""
    own = token.lower()

    def rewrite(line: re.Match[str]) -> str:
        value = line.group(2).strip()
        if value == "*":
            return line.group(0)
        name = _PRODUCT_TOKEN.match(value)
        named = name is not None and name.group(0).lower() == own
        return line.group(1) + (token if named else _ANOTHER_CRAWLER)
    return _USER_AGENT_LINE.sub(rewrite, text)


class RobotsCache:
    """robots.txt rules per origin, with TTL, capped Crawl-delay and Sitemap lines."""

    def __init__(
        self,
        user_agent_token: str,
        clock: Clock,
        ttl_s: float = MAX_TTL_S,
        unreachable_retry_s: float = 3600.0,
        max_crawl_delay_s: float = 60.0,
        max_entries: int = 100_000,
        max_body_bytes: int = MAX_ROBOTS_BYTES,
        max_rules: int = MAX_ROBOTS_RULES,
    ) -> None:
        token = user_agent_token.strip()
        if not token or any(c.isspace() or c == "/" for c in token):
            raise ValueError(
                f"robots user-agent token {user_agent_token!r} must be one product token "
                "like 'XyroBot' (no spaces, no version)")
        if not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError(f"robots ttl_s must be in (0, {MAX_TTL_S:.0f}] seconds (RFC 9309), got {ttl_s}")
        if unreachable_retry_s <= 0 or max_crawl_delay_s < 0 or max_entries < 1 \
                or max_body_bytes < 1 or max_rules < 1:
            raise ValueError("robots unreachable_retry_s, max_entries, max_body_bytes and "
                             "max_rules must be > 0 and max_crawl_delay_s >= 0")
        self.token = token
        self._clock = clock
        self.ttl_s = float(ttl_s)
        self.unreachable_retry_s = float(unreachable_retry_s)
        self.max_crawl_delay_s = float(max_crawl_delay_s)
        self.max_entries = max_entries
        self.max_body_bytes = max_body_bytes
        self.max_rules = max_rules
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # LRU: oldest first
        self._lock = threading.Lock()
        self.parse_failures = 0

    # -- what the frontier asks ------------------------------------------------------

    def state(self, origin: str, now: float | None = None) -> RobotsState:
        """``needs_fetch``, ``allowed`` (with rules, None = all) or ``disallow_all`` (until)."""
        now = self._clock.now() if now is None else now
        with self._lock:
            entry = self._live(origin, now)
            return NEEDS_FETCH if entry is None else entry.state

    def verdict(self, url: str, now: float | None = None, origin: str | None = None,
                ) -> Literal["allowed", "disallowed", "unknown"]:
        """For one URL: allowed, disallowed (by rules or disallow-all), or unknown (fetch first).

        ``origin``: the URL's :func:`robots_origin` if the caller has it already.
        """
        if origin is None:
            try:
                origin = robots_origin(url)
            except ValueError:
                return "disallowed"
        if url == robots_url(origin):
            return "allowed"
        st = self.state(origin, now)
        if st.kind == "needs_fetch":
            return "unknown"
        if st.kind == "disallow_all":
            return "disallowed"
        if st.rules is None:
            return "allowed"
        with self._lock:  # protego caches matches in dicts: keep it single-threaded
            urls = query_orders(url) if st.query_rules else (url,)
            ok = all(st.rules.can_fetch(u, self.token) for u in urls)
        return "allowed" if ok else "disallowed"

    def allowed(self, url: str, now: float | None = None, origin: str | None = None) -> bool:
        """True only if robots.txt is known and lets us fetch ``url`` (unknown → False)."""
        return self.verdict(url, now, origin) == "allowed"

    def crawl_delay(self, origin: str) -> float:
        """Crawl-delay in seconds for our token (0 if none or unknown), capped."""
        with self._lock:
            entry = self._entries.get(origin)
            return entry.crawl_delay if entry else 0.0

    def sitemaps(self, origin: str) -> list[str]:
        """Canonical http(s) Sitemap URLs listed in the origin's robots.txt."""
        with self._lock:
            entry = self._entries.get(origin)
            return list(entry.sitemaps) if entry else []

    def __len__(self) -> int:
        return len(self._entries)

    # -- what the engine reports -----------------------------------------------------

    def store(self, origin: str, status: int | None, body: bytes | None, fetched_at: float) -> RobotsState:
        """Record the outcome of fetching ``robots_url(origin)``; returns the new state.

        ``status`` is the final HTTP status after redirects, or None when the server was
        unreachable; ``body`` the (capped) bytes of a 2xx response.
        """
        if status is not None and 200 <= status < 300:
            rules, delay, sitemaps = self._parse(origin, body or b"")
            # a rule with none of ? & = $ matches the same whatever the order of a query
            query = any(mark in (body or b"") for mark in (b"?", b"&", b"=", b"$"))
            entry = _Entry(RobotsState("allowed", rules, query_rules=query),
                           fetched_at + self.ttl_s, delay, sitemaps)
        elif status is not None and 300 <= status < 500 and status != 429:
            entry = _Entry(RobotsState("allowed", None), fetched_at + self.ttl_s, 0.0, [])
        else:
            until = fetched_at + self.unreachable_retry_s
            entry = _Entry(RobotsState("disallow_all", until=until), until, 0.0, [])
        return self._put(origin, entry)

    def unavailable(self, origin: str, fetched_at: float) -> RobotsState:
        """The fetch of ``robots_url(origin)`` ended with no answer to read but the host was
        reached (a redirect that could not be followed, a URL the HTTP library refuses):
        the robots.txt is unavailable, allow all (RFC 9309 §2.3.1.2, §2.3.1.3), until it is
        fetched again ``ttl_s`` later, as for a 4xx."""
        return self._put(origin, _Entry(RobotsState("allowed", None),
                                        fetched_at + self.ttl_s, 0.0, []))

    def _put(self, origin: str, entry: _Entry) -> RobotsState:
        with self._lock:
            self._entries[origin] = entry
            self._entries.move_to_end(origin)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return entry.state

    def adopt(self, origin: str, source: str, now: float) -> RobotsState | None:
        """``origin``'s robots.txt redirects to ``source``'s own, which this cache holds
        fresh: the same answer, until the same expiry (RFC 9309 §2.3.1.2: the file reached
        governs the first host). None when ``source`` has no live entry."""
        with self._lock:
            entry = self._live(source, now)
            if entry is None:
                return None
            self._entries[origin] = entry
            self._entries.move_to_end(origin)
        return entry.state

    def defer(self, origin: str, until: float) -> RobotsState:
        """No robots.txt for ``origin`` yet: its redirect reached a host that was busy
        (:mod:`xyro.crawl.robots_hops`). Disallow all until ``until``, then ask again."""
        entry = _Entry(RobotsState("disallow_all", until=until), until, 0.0, [])
        with self._lock:
            self._entries[origin] = entry
            self._entries.move_to_end(origin)
        return entry.state

    def _live(self, origin: str, now: float) -> _Entry | None:
        entry = self._entries.get(origin)
        if entry is None:
            return None
        if now >= entry.expires:
            del self._entries[origin]
            return None
        self._entries.move_to_end(origin)
        return entry

    def _parse(self, origin: str, body: bytes) -> tuple[Protego | None, float, list[str]]:
        if len(body) > self.max_body_bytes:
            # Cut at the last full line inside the cap so no rule is half-read.
            cut = body.rfind(b"\n", 0, self.max_body_bytes)
            body = body[: cut + 1 if cut >= 0 else self.max_body_bytes]
        text = body.decode("utf-8", errors="replace").lstrip("\ufeff")
        try:
            text, dropped = _cap_rules(_own_groups(text, self.token), self.max_rules)
            if dropped:
                log.warning("robots.txt of %s: %d Allow/Disallow lines past the first %d of a "
                            "user agent are ignored (every URL is matched against each rule, "
                            "and one verdict must stay cheap)", origin, dropped, self.max_rules)
            rules = Protego.parse(text)
            delay = self._delay(rules)
            sitemaps = [u for s in rules.sitemaps if (u := canonicalize(s, base=robots_url(origin)))]
        except Exception as exc:  # noqa: BLE001 — a hostile robots.txt must never crash the crawl
            self.parse_failures += 1
            log.warning("robots.txt of %s could not be parsed (%s: %s); treating it as empty",
                        origin, type(exc).__name__, exc)
            return None, 0.0, []
        return rules, delay, sitemaps

    def _delay(self, rules: Protego) -> float:
        delay = rules.crawl_delay(self.token)
        rate = rules.request_rate(self.token)
        if rate is not None and rate.requests > 0:
            delay = max(delay or 0.0, rate.seconds / rate.requests)
        if delay is None or not math.isfinite(delay) or delay < 0:
            return 0.0
        return min(float(delay), self.max_crawl_delay_s)
