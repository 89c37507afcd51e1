"""Published dates (sitemap ``lastmod``, feed ``updated``/``pubDate``): parsing them, and
whether a source's dates can currently be trusted as change dates (DESIGN.md §6).

Sitemaps and feeds are the paper's push channel (003 §3): a site tells when a page last
changed. Those dates feed the change-rate estimators only while they agree with what the
crawler itself observes (the MD5/canonical signature of successive fetches). The rule is
kept per *source* (one sitemap, one feed, or one host: the caller picks the key), because a
generator that lies lies for every URL it lists.

Judging one fetch interval. A page was fetched at t₀ < t₁ (its signature changed between
them or not); later the source, read at time s, gives the page the date d. The source
claims a change in (t₀, t₁] when t₀ < d ≤ t₁. Outcomes:

* d > s + tolerance                    → FUTURE (a date in the future: the source is broken)
* |d − s| ≤ tolerance                  → STAMPED (the generation time, not a change date)
* d > t₁                               → undecidable (the page changed again after t₁; d
                                          only shows the latest change) — not counted
* t₀ < d ≤ t₁, signature changed       → AGREE
* t₀ < d ≤ t₁, signature unchanged     → DISAGREE (date moved, content did not)
* d ≤ t₀, signature unchanged          → AGREE
* d ≤ t₀, signature changed            → MISSED (the content changed, the date did not) —
                                          undecidable instead when s < t₁, since the change
                                          may lie in (s, t₁], after the source was read.

A date at midnight UTC is read as a calendar day (a W3C ``YYYY-MM-DD``, the commonest
``lastmod``, or a day written with a zero time): it names the day in the site's own time
zone, unknown here, so the change lies somewhere in [d − 14 h, d + 36 h) (zones UTC−12 to
UTC+14). Such a span is judged as a whole: it claims a change in (t₀, t₁] only when it lies
inside, and only when it lies wholly before t₀ does it claim none; a span across t₀ or t₁ is
undecidable, a span is in the future only when its earliest instant is, and a day is never
STAMPED (today's date may be a change today). Read as an instant, a day disagrees with
every fetch interval that starts or ends within it: an honest source whose pages were
refetched every three days had 11 % of its judged intervals held against it, near the 20 %
that ends trust, and more at shorter intervals. Pages refetched more often than every two
days thus give a day-dated source no verdict; a true timestamp at 00:00:00Z is only judged
more cautiously.

Verdict over the last ``window`` judged outcomes: trusted only when there are at least
``min_observations``, no FUTURE among them, the share of DISAGREE + MISSED + STAMPED is at
most ``max_disagreement``, and, among the intervals where the content changed, the share of
MISSED is at most ``max_disagreement`` too. The last test catches dates that never move: a
frozen date agrees with every no-change interval, so on a slowly changing page the overall
share stays low while the dates say nothing. For the same reason a source is trusted only
once at least one content change in the window was dated inside its interval (AGREE on a
changed page): MISSED is rarely decidable when a fetch is judged, since the source was
read before it (:class:`xyro.publication.published.PublishedDates` judges such intervals
again at the next listing). Trust starts off (no evidence yet) and comes back by itself
once the bad outcomes have left the window.
"""

from __future__ import annotations

import calendar
import enum
import math
import re
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

# W3C Datetime (https://www.w3.org/TR/NOTE-datetime), the format of sitemap lastmod, and
# RFC 3339 (Atom), which is a profile of it. Lenient on purpose where the meaning is clear:
# a space for "T", a missing time zone (read as UTC), "+hhmm" without the colon.
_W3C = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"\s*([Zz]|[+-]\d{2}:?\d{2})?)?)?)?")
# A numeric zone written with a colon at the end of an RFC 822 date ("+02:00", from
# generators that mix RFC 822 and ISO 8601): the email module takes it for an unknown zone,
# which it reads as UTC, so it is rewritten "+0200" first.
_COLON_ZONE = re.compile(r"([+-]\d\d):(\d\d)$")


def parse_w3c_datetime(text: str | None) -> float | None:
    """POSIX seconds of a W3C Datetime / RFC 3339 string, or None when it is not one.

    Accepted: ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, and ``YYYY-MM-DDThh:mm[:ss[.s]]`` with
    ``Z``, ``±hh:mm``, ``±hhmm`` or no zone (UTC). Out-of-range fields (month 13, Feb 30,
    hour 24) give None.
    """
    if not isinstance(text, str):
        return None
    m = _W3C.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, zone = m.groups()
    try:
        moment = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0),
                          int(minute or 0), int(second or 0))
    except ValueError:
        return None
    offset = 0
    if zone and zone not in "Zz":
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            return None
        offset = (hours * 60 + minutes) * 60 * (1 if zone[0] == "+" else -1)
    seconds = calendar.timegm(moment.timetuple()) - offset
    return float(seconds) + (int(frac) / 10 ** len(frac) if frac else 0.0)


def parse_rfc822_datetime(text: str | None) -> float | None:
    """POSIX seconds of an RSS ``pubDate`` (RFC 822/2822 date), or None.

    Two-digit years and the usual zone names (GMT, UT, EST...) are read as the email module
    reads them; an unknown zone is read as UTC, a numeric one with a colon (``+02:00``) as
    its offset. Feeds that put a W3C/ISO date in ``pubDate`` are common, so that form is
    accepted too.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        moment = parsedate_to_datetime(_COLON_ZONE.sub(r"\1\2", text.strip()))
    except (TypeError, ValueError, IndexError, OverflowError):
        return parse_w3c_datetime(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        value = moment.timestamp()
    except (OverflowError, ValueError, OSError):
        return None
    return value if math.isfinite(value) else None


class Outcome(str, enum.Enum):
    """How one published date compared with one observed fetch interval (module doc)."""

    AGREE = "agree"
    DISAGREE = "disagree"
    MISSED = "missed"
    STAMPED = "stamped"
    FUTURE = "future"
    UNDECIDABLE = "undecidable"


DAY_S = 86400.0
DAY_SPAN_S = (14 * 3600.0, 36 * 3600.0)   # a UTC day's midnight to its span in any zone


def date_span(published: float) -> tuple[float, float]:
    """The instants a published date may stand for (module doc): a calendar day's span in
    any time zone for a date at midnight UTC, else the instant itself."""
    if published % DAY_S == 0:
        return published - DAY_SPAN_S[0], published + DAY_SPAN_S[1]
    return published, published


def judge(previous_fetch: float, fetch: float, changed: bool, published: float,
          read_at: float, tolerance_s: float = 2.0) -> Outcome:
    """Compare the date ``published`` (read from the source at ``read_at``) with the fetch
    interval (``previous_fetch``, ``fetch``] whose signature ``changed`` or not.

    All times POSIX seconds; ``tolerance_s`` absorbs clock skew. A date at midnight UTC
    stands for a calendar day (:func:`date_span`, module doc).
    """
    for name, value in (("previous_fetch", previous_fetch), ("fetch", fetch),
                        ("published", published), ("read_at", read_at)):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be finite POSIX seconds, got {value!r}")
    if fetch <= previous_fetch:
        raise ValueError(f"fetch {fetch!r} must come after previous_fetch {previous_fetch!r}")
    earliest, latest = date_span(published)
    if earliest > read_at + tolerance_s:
        return Outcome.FUTURE
    if earliest == latest and abs(published - read_at) <= tolerance_s:
        return Outcome.STAMPED   # a day equal to the reading's is today's: a change or not
    if earliest > fetch + tolerance_s:
        return Outcome.UNDECIDABLE
    if earliest > previous_fetch + tolerance_s:
        if latest > fetch + tolerance_s:   # a day across the fetch
            return Outcome.UNDECIDABLE
        return Outcome.AGREE if changed else Outcome.DISAGREE
    if latest > previous_fetch + tolerance_s:   # a day across the previous fetch
        return Outcome.UNDECIDABLE
    if not changed:
        return Outcome.AGREE
    return Outcome.UNDECIDABLE if read_at < fetch else Outcome.MISSED


@dataclass(frozen=True, slots=True)
class TrustVerdict:
    """Whether a source's dates are trusted now, why, and the counts behind it."""

    trusted: bool
    reason: str
    judged: int
    bad: int
    changes: int
    missed: int


_BAD = frozenset({Outcome.DISAGREE, Outcome.MISSED, Outcome.STAMPED, Outcome.FUTURE})


class PublishedDateTrust:
    """The trust rule for one source of published dates (module doc). Pure: no clock, no I/O.

    ``window``: judged outcomes remembered; ``min_observations``: judged outcomes needed
    before trusting; ``max_disagreement``: largest tolerated share of bad outcomes (overall,
    and of missed changes among content changes); ``tolerance_s``: seconds of slack when
    comparing dates.
    """

    def __init__(self, *, window: int = 50, min_observations: int = 5,
                 max_disagreement: float = 0.2, tolerance_s: float = 2.0) -> None:
        if not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        if not isinstance(min_observations, int) or not 1 <= min_observations <= window:
            raise ValueError(f"min_observations must be an int in 1..window ({window}), "
                             f"got {min_observations!r}")
        if not 0.0 <= max_disagreement < 1.0:
            raise ValueError(f"max_disagreement must lie in [0, 1), got {max_disagreement!r}")
        if not tolerance_s >= 0:
            raise ValueError(f"tolerance_s must be a non-negative number, got {tolerance_s!r}")
        self.min_observations = min_observations
        self.max_disagreement = max_disagreement
        self.tolerance_s = tolerance_s
        self._recent: deque[tuple[Outcome, bool]] = deque(maxlen=window)

    def observe(self, *, previous_fetch: float, fetch: float, changed: bool,
                published: float | None, read_at: float) -> Outcome:
        """Record one page's fetch interval against the date the source gave it.

        ``published`` None (the source listed the page without a date, or with an unreadable
        one) is undecidable for that interval and changes nothing. Returns the outcome.
        """
        if published is None:
            return Outcome.UNDECIDABLE
        outcome = judge(previous_fetch, fetch, changed, published, read_at, self.tolerance_s)
        if outcome is not Outcome.UNDECIDABLE:
            self._recent.append((outcome, bool(changed)))
        return outcome

    def observe_listing(self, published: float, read_at: float) -> Outcome | None:
        """Check a date as the source is read, before any page is refetched: a date in the
        future is recorded at once (FUTURE). Returns FUTURE or None (nothing recorded)."""
        if not isinstance(published, (int, float)) or not math.isfinite(published):
            raise ValueError(f"published must be finite POSIX seconds, got {published!r}")
        if date_span(published)[0] > read_at + self.tolerance_s:
            self._recent.append((Outcome.FUTURE, False))
            return Outcome.FUTURE
        return None

    @property
    def trusted(self) -> bool:
        return self.verdict().trusted

    def verdict(self) -> TrustVerdict:
        """The current verdict over the remembered outcomes (module doc)."""
        judged = len(self._recent)
        bad = sum(o in _BAD for o, _ in self._recent)
        changes = sum(c for o, c in self._recent if o is not Outcome.FUTURE)
        missed = sum(o is Outcome.MISSED for o, _ in self._recent)
        dated = sum(o is Outcome.AGREE and c for o, c in self._recent)
        future = sum(o is Outcome.FUTURE for o, _ in self._recent)

        def verdict(ok: bool, reason: str) -> TrustVerdict:
            return TrustVerdict(ok, reason, judged, bad, changes, missed)

        if future:
            return verdict(False, f"{future} date(s) in the future among the last {judged}")
        if judged < self.min_observations:
            return verdict(False, f"only {judged} judged interval(s), "
                                  f"{self.min_observations} needed")
        if bad > self.max_disagreement * judged:
            return verdict(False, f"{bad} of the last {judged} dates disagree with the "
                                  f"signatures")
        if changes and missed > self.max_disagreement * changes:
            return verdict(False, f"dates did not move for {missed} of the last {changes} "
                                  f"content changes")
        if not dated:
            return verdict(False, "no content change dated yet (a date that never moves "
                                  "agrees with every unchanged page)")
        return verdict(True, f"{judged - bad} of the last {judged} dates agree")


class PublishedDateTrusts:
    """One :class:`PublishedDateTrust` per source key (a host, a sitemap URL...), created on
    first use with the same settings. Owned by one component; not thread-safe."""

    def __init__(self, **settings: float) -> None:
        PublishedDateTrust(**settings)  # check the settings once, here
        self._settings = settings
        self._sources: dict[Hashable, PublishedDateTrust] = {}

    def source(self, key: Hashable) -> PublishedDateTrust:
        found = self._sources.get(key)
        if found is None:
            found = self._sources[key] = PublishedDateTrust(**self._settings)  # type: ignore[arg-type]
        return found

    def trusted(self, key: Hashable) -> bool:
        found = self._sources.get(key)
        return found is not None and found.trusted

    def __len__(self) -> int:
        return len(self._sources)


def change_date(http_last_modified: float | None, published: float | None,
                published_trusted: bool) -> float | None:
    """The date to record as the page's Last-Modified for the estimators (DESIGN.md §6).

    The server's own header wins (it is checked per page by ``refresh.last_modified``);
    without one, a published date is used only while its source is trusted.
    """
    if http_last_modified is not None:
        return http_last_modified
    return published if published_trusted else None


_FEED_ROOTS = frozenset({"rss", "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}RDF",
                         "{http://www.w3.org/2005/Atom}feed"})


def publication_kind(root_tag: str) -> str | None:
    """Which parser a loaded XML document's root (lxml's ``{namespace}local`` tag) calls
    for: "sitemap" (:func:`xyro.publication.sitemaps.parse_sitemap`: ``urlset`` or ``sitemapindex``,
    any namespace), "feed" (:func:`xyro.publication.feeds.parse_feed`), or None."""
    if not isinstance(root_tag, str):
        return None
    local = root_tag.rpartition("}")[2]
    if local in ("urlset", "sitemapindex"):
        return "sitemap"
    return "feed" if root_tag in _FEED_ROOTS else None
