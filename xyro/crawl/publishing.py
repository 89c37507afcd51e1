"""Sitemaps and feeds as producers of the frontier: the push channel of paper 003 §3.

A site tells what it has and when each page last changed. DESIGN.md §2 makes sitemaps a
producer of the frontier like seeds; DESIGN.md §6 lets their dates become change dates only
while they prove reliable. This module is the wiring between the pure parsers
(:mod:`xyro.publication.sitemaps`, :mod:`xyro.publication.feeds`), the trust record (:class:`PublishedDates`) and the
frontier:

* sources — the ``sitemaps`` config key, every ``Sitemap:`` line of a stored robots.txt, the
  sitemaps a sitemap index lists — enter as :attr:`Source.PUBLICATION` at the seed level and
  are remembered here, so :meth:`PublicationChannel.reread` can queue them again on a schedule
  (the seen-set would skip them: a re-read enters as a refresh does);
* a fetched body is recognised as a sitemap or a feed in the fetch worker, by a sniff of its
  first element (:func:`sniff_publication`), and parsed there (:func:`read_publication`,
  pure and bounded); back on the dispatcher, :meth:`PublicationChannel.read` queues the listed
  pages (:attr:`Source.SITEMAP`, discovery level, one level deeper) and the listed sitemaps,
  and hands the dates to :class:`PublishedDates`, keyed by the listing's own URL (a host's
  honest sitemap must not lend its trust to a feed of the same host that dates every entry
  alike);
* :meth:`PublicationChannel.change_date` is the change date a fetch's observation records;
* what a parser noted (entries past the cap, entries skipped, dates ignored) is never dropped
  silently: :meth:`PublicationChannel.read` logs it (a WARNING when entries were cut at the
  cap, naming the listing, how many were kept and the limit), and :meth:`Publication.noted`
  puts it on the listing's page record as an errors row of kind :data:`NOTICE_KIND` (the
  page stays XML), which ``xyro status`` and the view ``v_recent_errors`` show.

A gzip-compressed sitemap (``sitemap.xml.gz``) arrives here decompressed: the fetcher undoes
a gzip media type under its decoded-bytes cap (:mod:`xyro.net.body`). Plain-text sitemaps
are not recognised (only XML ``urlset``/``sitemapindex``, RSS, RDF and Atom bodies are).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

from metadata import PageType
from xyro.content.page import PageOutcome
from xyro.crawl.admission import Source
from xyro.crawl.frontier import DISCOVERY, URGENT, Frontier, Submitted
from xyro.publication.feeds import FeedError, parse_feed
from xyro.publication.published import PublishedDates
from xyro.publication.sitemaps import SitemapError, parse_sitemap
from xyro.records import FetchResult

#: Frontier level of publication sources: the seeds' (a site's own list of its pages).
SOURCE_PRIORITY = URGENT
#: Frontier level of the pages a sitemap or feed lists (new pages chosen for discovery).
LISTED_PRIORITY = DISCOVERY
#: Seconds of slack under which a server's Last-Modified is just the time of the response
#: (a dynamic page stamped "now"), not a change date (DESIGN.md §6, as refresh.last_modified).
STAMP_TOLERANCE_S = 2.0
#: Kind of the errors row that carries what a sitemap or feed parser noted (the listing
#: itself was read and stays an XML page).
NOTICE_KIND = "publication"
#: Notes quoted in a log line; characters of notes kept in an errors row's detail.
LOGGED_NOTES = 3
MAX_NOTICE_CHARS = 2000

log = logging.getLogger("xyro.crawl.publishing")

Kind = Literal["sitemap", "feed"]

# The name of an element's start tag (prefix dropped), matched where the prolog ends.
_START_TAG = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)")
# What may come before the first element, and the bytes that close it.
_PROLOG_PARTS = ((b"<?", b"?>"), (b"<!--", b"-->"))
_KINDS: dict[bytes, Kind] = {b"urlset": "sitemap", b"sitemapindex": "sitemap",
                             b"rss": "feed", b"RDF": "feed", b"feed": "feed"}


def sniff_publication(body: bytes) -> Kind | None:
    """"sitemap" or "feed" when the first element of ``body`` is a sitemap's (``urlset``,
    ``sitemapindex``) or a feed's (``rss``, ``rdf:RDF``, ``feed``), else None. Cheap: one
    pass over the prolog, however long (a generator's banner comment, a DOCTYPE's internal
    subset: a sitemap whose root came after a fixed head was stored as a plain document,
    silently); the parsers check the namespaces."""
    name = first_element(body)
    return None if name is None else _KINDS.get(name)


def first_element(head: bytes) -> bytes | None:
    """The local name of the first element of ``head``, after an optional BOM, the XML
    declaration, comments, PIs and a DOCTYPE; None if ``head`` ends first. One pass, each
    byte looked at a bounded number of times (a regular expression with a repeated group
    backtracked exponentially on runs of blanks)."""
    at = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    while at < len(head):
        if head[at:at + 1].isspace():
            at += 1
            continue
        for opener, closer in _PROLOG_PARTS:
            if head.startswith(opener, at):
                end = head.find(closer, at + len(opener))
                if end < 0:
                    return None
                at = end + len(closer)
                break
        else:
            if head.startswith(b"<!DOCTYPE", at):
                at = _after_doctype(head, at)
                if at < 0:
                    return None
                continue
            match = _START_TAG.match(head, at)
            return match.group(1) if match else None
    return None


def _after_doctype(head: bytes, at: int) -> int:
    """Where the DOCTYPE starting at ``at`` ends (its internal subset ``[...]`` included),
    or -1 if ``head`` ends first."""
    close, bracket = head.find(b">", at), head.find(b"[", at)
    if 0 <= bracket < close:  # an internal subset: its end, then the closing '>'
        end = head.find(b"]", bracket)
        close = head.find(b">", end) if end >= 0 else -1
    return close + 1 if close >= 0 else -1


@dataclass(frozen=True, slots=True)
class Publication:
    """What one sitemap or feed listed: pages with their dates, and (index) sitemaps; the
    parser's notes, and ``capped_at``, its entry limit, when entries past it were ignored
    (the parser's note saying so is then the last of ``notes``)."""

    kind: Kind
    pages: tuple[tuple[str, float | None], ...] = ()
    sitemaps: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    capped_at: int | None = None

    @property
    def errors(self) -> int:
        """Notes the parser made (the last one counts those past its note cap)."""
        return len(self.notes)

    @property
    def kept(self) -> int:
        """Entries kept: pages listed, or sitemaps of an index."""
        return len(self.pages) + len(self.sitemaps)

    def cut(self) -> str | None:
        """What the entry cap cut, in words, or None when nothing was cut."""
        if self.capped_at is None:
            return None
        advice = (" (sitemaps.org: at most 50,000 URLs a sitemap; a bigger site lists "
                  "several sitemaps in a sitemap index)" if self.kind == "sitemap" else "")
        return (f"lists more than {self.capped_at} entries: {self.kept} kept from the first "
                f"{self.capped_at} read (the limit), the rest ignored{advice}")

    def notice(self) -> str | None:
        """Every note in one detail (cut first), at most :data:`MAX_NOTICE_CHARS`; None
        when the parser noted nothing."""
        if not self.notes:
            return None
        cut = self.cut()
        text = (f"{self.kind} {cut}; " if cut else "") + \
            f"{self.kind} parser notes ({len(self.notes)}): " + "; ".join(self.notes)
        return text if len(text) <= MAX_NOTICE_CHARS else text[:MAX_NOTICE_CHARS - 3] + "..."

    def noted(self, outcome: PageOutcome) -> PageOutcome:
        """``outcome`` of the listing's fetch, carrying :meth:`notice` as an errors row of
        kind :data:`NOTICE_KIND` (an outcome that already has an error keeps it)."""
        notice = self.notice()
        if notice is None or outcome.error_kind is not None:
            return outcome
        return replace(outcome, error_kind=NOTICE_KIND, error_detail=notice)


def publication_of(url: str, result: FetchResult, outcome: PageOutcome,
                   announced_by: Callable[[str], tuple[str, ...]] | None = None,
                   ) -> Publication | None:
    """The fetched XML body of ``url``, if it is a sitemap or a feed, parsed (worker side:
    the sniff reads its first bytes, the parse is bounded; paper 003 §3).
    ``announced_by(url)``: the origins whose robots.txt named a sitemap, whose URLs it may
    list (asked for sitemaps only)."""
    if outcome.page_type != PageType.XML or result.not_modified or not result.body:
        return None
    kind = sniff_publication(result.body)
    if kind is None:
        return None
    also = announced_by(url) if kind == "sitemap" and announced_by is not None else ()
    return read_publication(result.body, result.final_url or url, kind, also)


def read_publication(body: bytes, url: str, kind: Kind,
                     also_allowed: tuple[str, ...] = ()) -> Publication | None:
    """Parse ``body`` (fetched from ``url``, the final URL) as ``kind``; None when it is not
    one after all. Pure and bounded (the parsers cap entries and bytes); for fetch workers.

    Sitemaps may list any URL of their own host ("host" location rule): a site that keeps
    its sitemaps in a folder of their own usually lists its whole site, and the crawl scope
    still applies to every listed URL. ``also_allowed``: the origins whose robots.txt
    announced the sitemap (:meth:`PublicationChannel.announced_by`), whose URLs it may list.
    """
    try:
        if kind == "sitemap":
            parsed = parse_sitemap(body, url, location="host", also_allowed=also_allowed)
            entries = tuple((e.url, e.lastmod) for e in parsed.entries)
            if parsed.kind == "index":
                return Publication(kind, sitemaps=tuple(u for u, _ in entries),
                                   notes=parsed.errors, capped_at=parsed.capped_at)
            return Publication(kind, pages=entries, notes=parsed.errors,
                               capped_at=parsed.capped_at)
        feed = parse_feed(body, url)
    except (SitemapError, FeedError):
        return None
    return Publication(kind, tuple((e.url, e.updated) for e in feed.entries),
                       notes=feed.errors, capped_at=feed.capped_at)


class PublicationChannel:
    """The known publication sources of one crawl and their dates (module docstring).

    Thread-safe: the dispatcher reads publications and robots.txt files, the daemon's
    schedule re-reads the sources from its own thread.
    """

    def __init__(self, dates: PublishedDates | None = None, dead_after: int = 3) -> None:
        """``dead_after``: a source that answers 404 or 410 this many times in a row is
        forgotten (the store marks such a page dead; ``crawler.dead_after_404s``)."""
        self.dates = dates or PublishedDates()
        self.dead_after = dead_after
        self._sources: dict[str, int] = {}  # url → link depth
        self._gone: dict[str, int] = {}  # url → 404/410 answers in a row
        self._announced: dict[str, set[str]] = {}  # sitemap url → origins whose robots.txt
        self._reads = 0
        self._lock = threading.Lock()

    # -- sources ----------------------------------------------------------------------------

    def offer(self, frontier: Frontier, urls: Iterable[str], depth: int = 0) -> Submitted:
        """Queue publication sources (canonical URLs) at the seed level; already known ones
        are skipped by the seen-set and wait for :meth:`reread`. Admitted ones are
        remembered for the schedule."""
        urls = list(urls)
        submitted = frontier.submit(Source.PUBLICATION, urls, SOURCE_PRIORITY, depth=depth)
        refused = {offer.url for offer, _ in submitted.refused}
        with self._lock:
            for url in urls:
                if url not in refused:
                    self._sources.setdefault(url, depth)
        return submitted

    def offer_robots(self, frontier: Frontier, origin: str) -> Submitted:
        """The ``Sitemap:`` lines of ``origin``'s stored robots.txt (sitemaps.org: a site
        announces its sitemaps there, on any host: the sitemap may then list ``origin``'s
        URLs, :meth:`announced_by`)."""
        sitemaps = frontier.robots.sitemaps(origin)
        with self._lock:
            for url in sitemaps:
                self._announced.setdefault(url, set()).add(origin + "/")
        return self.offer(frontier, sitemaps)

    def announced_by(self, url: str) -> tuple[str, ...]:
        """The origins (``scheme://host[:port]/``) whose robots.txt named sitemap ``url``:
        prefixes its entries may have besides its own host (sitemaps.org, cross submits)."""
        with self._lock:
            return tuple(sorted(self._announced.get(url, ())))

    def reread(self, frontier: Frontier, now: float) -> Submitted:
        """Queue every known source again from ``now``: known to the seen-set, they enter as
        the refresh planner's pages do (:attr:`Source.REFRESH` is not skipped as seen)."""
        with self._lock:
            items = list(self._sources.items())
        return frontier.submit(Source.REFRESH, items, SOURCE_PRIORITY, not_before=now)

    def answered(self, url: str, status: int | None) -> None:
        """A known source was fetched with HTTP ``status``: after ``dead_after`` 404 or 410
        in a row it is forgotten, so :meth:`reread` stops queueing a dead sitemap (a
        robots.txt ``Sitemap:`` line naming no real file was fetched at every re-read)."""
        with self._lock:
            if url not in self._sources:
                return
            if status not in (404, 410):
                self._gone.pop(url, None)
                return
            self._gone[url] = self._gone.get(url, 0) + 1
            if self._gone[url] >= self.dead_after:
                del self._sources[url], self._gone[url]

    def __contains__(self, url: object) -> bool:
        with self._lock:
            return url in self._sources

    # -- what a source said -----------------------------------------------------------------

    def read(self, frontier: Frontier, source: str, depth: int, publication: Publication,
             read_at: float) -> tuple[Submitted, Submitted | None]:
        """The sitemap or feed at URL ``source``, at link ``depth``, was read at ``read_at``:
        its pages enter as :attr:`Source.SITEMAP` one level deeper, its sitemaps (an index)
        as sources, and the dates go to the trust record of ``source``."""
        with self._lock:
            self._reads += 1
        _log_notes(source, publication)
        pages = frontier.submit(Source.SITEMAP, [u for u, _ in publication.pages],
                                LISTED_PRIORITY, depth=depth + 1)
        self.dates.listed(source, publication.pages, read_at)
        sitemaps = (self.offer(frontier, publication.sitemaps, depth + 1)
                    if publication.sitemaps else None)
        return pages, sitemaps

    def change_date(self, url: str, previous_fetch: float | None, fetch: float,
                    changed: bool | None, http_last_modified: float | None) -> float | None:
        """The change date of this fetch's observation (DESIGN.md §6): the server's own
        Last-Modified, else the listed date while the listing host is trusted.

        A Last-Modified equal to the fetch time (within :data:`STAMP_TOLERANCE_S`) is the
        time of the response, not a change date: a trusted listed date replaces it; without
        one it is kept (the planner's reliability test judges it). A listed date is never
        recorded while its source is untrusted, not even on a page's first fetch, when no
        source has been judged yet: a feed that stamps every entry with one old date would
        make a page read once look unchanged for a year, and its next read (the only test of
        that date) would then never come. A stamped first date costs nothing: the planner
        judges a history from its second access when the first date is the response time
        (:func:`refresh.last_modified.dated_history`).
        """
        stamped = http_last_modified is not None and \
            http_last_modified >= fetch - STAMP_TOLERANCE_S
        date = self.dates.change_date(url, previous_fetch, fetch, changed,
                                      None if stamped else http_last_modified)
        return http_last_modified if date is None else date

    def snapshot(self) -> dict[str, int]:
        """Sources known, sources read, listed URLs, judged outcomes, trusted hosts."""
        with self._lock:
            sources, reads = len(self._sources), self._reads
        return {"sources": sources, "read": reads, **self.dates.counts(),
                "trusted_sources": self.dates.trusted_sources()}


def _log_notes(source: str, publication: Publication) -> None:
    """Say what the parser of ``source`` noted: a WARNING when the entry cap cut the listing
    (pages are lost), one INFO line quoting the first notes otherwise."""
    cut = publication.cut()
    if cut is not None:
        log.warning("%s %s %s", publication.kind, source, cut)
    others = publication.notes[:-1] if cut is not None else publication.notes
    if others:
        # The first notes, then the last: past the parser's note cap it counts the rest.
        quoted = list(others[:LOGGED_NOTES])
        if len(others) > LOGGED_NOTES:
            quoted += ["...", others[-1]]
        log.info("%s %s: parser notes: %s", publication.kind, source, "; ".join(quoted))
