"""Sitemaps and feeds as producers of the frontier: the push channel of paper 003 §3.

A site tells what it has and when each page last changed. DESIGN.md §2 makes sitemaps a
producer of the frontier like seeds; DESIGN.md §6 lets their dates become change dates only
while they prove reliable. This module is the wiring between the pure parsers
(:mod:`xyro.publication.sitemaps`, :mod:`xyro.publication.feeds`), the trust record (:class:`PublishedDates`) and the
frontier:

* sources — the ``sitemaps`` config key, every ``Sitemap:`` line of a stored robots.txt, the
  sitemaps a sitemap index lists (not read as indexes in turn), where a source redirects —
  enter as :attr:`Source.PUBLICATION` at the seed level and are remembered here, at most
  :data:`MAX_SOURCES_PER_HOST` a host, so :meth:`PublicationChannel.reread` can queue them
  again on a schedule (the seen-set would skip them: a re-read enters as a refresh does);
* a fetched body is recognised as a sitemap or a feed in the fetch worker, by a sniff of its
  first element (:func:`sniff_publication`), and parsed there (:func:`read_publication`,
  pure and bounded); back on the dispatcher, :meth:`PublicationChannel.read` queues the listed
  pages (:attr:`Source.SITEMAP`, discovery level, one level deeper) and the listed sitemaps,
  and hands the dates of its own site's pages to :class:`PublishedDates`, keyed by the
  listing's own URL (a host's honest sitemap must not lend its trust to a feed of the same
  host that dates every entry alike);
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
from xyro.net.urls import host_key
from xyro.publication.published import PublishedDates, origin_prefix
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
#: Publication sources remembered per host (politeness unit). Each is re-read at the seeds'
#: level every ``publication.refresh_s``, counted against G (DESIGN.md §6), and a sitemap
#: index may list 50,000 sitemaps of 50,000 URLs each: 1,000 sitemaps are more pages than a
#: host gets in years of time units, and a host that generates indexes without end must not
#: fill the memory and the budget. Offers past it are neither queued nor remembered (one
#: WARNING per host).
MAX_SOURCES_PER_HOST = 1_000
#: Notes quoted in a log line; characters of notes kept in an errors row's detail.
LOGGED_NOTES = 3
MAX_NOTICE_CHARS = 2000

log = logging.getLogger("xyro.crawl.publishing")

Kind = Literal["sitemap", "feed"]

# The name of an element's start tag (prefix dropped), matched where the prolog ends; the
# name must end inside the bytes looked at (a tag cut by the prolog cap names nothing).
_START_TAG = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)(?=[\s/>])")
# What may come before the first element, each part closed. Possessive quantifiers: no part
# is ever tried again, so one match reads the prolog in linear time (a repeated group with
# a greedy one inside backtracked exponentially on runs of blanks) and in C (a Python loop
# over the blanks cost 7 s of CPU for 50 MB of them). An unclosed part ends the match
# where it starts, and no start tag is found there.
_PROLOG = re.compile(rb"""(?:
      \s++                                        # blanks
    | <\?.*?\?>                                   # a PI (the XML declaration is one)
    | <!--.*?-->                                  # a comment
    | <!DOCTYPE[^>\[]*+(?:\[[^\]]*+\][^>]*+)?>    # a DOCTYPE, its internal subset included
    )*+""", re.S | re.X)
#: Bytes of a body within which its first element must start for it to be read as a sitemap
#: or a feed: a real one's prolog is a few lines, and the sniff of a hostile one stays cheap
#: (50 MB of blanks before <urlset>, 49 KB of gzip, took seconds of a fetch worker's CPU
#: under the GIL). The parsers' own size caps are far larger.
MAX_PROLOG_BYTES = 1 << 20
# Byte order marks and their codecs, UTF-32LE's before UTF-16LE's (it begins with it).
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\xfe\xff", "utf-16-be"),
         (b"\xff\xfe", "utf-16-le"))
_KINDS: dict[bytes, Kind] = {b"urlset": "sitemap", b"sitemapindex": "sitemap",
                             b"rss": "feed", b"RDF": "feed", b"feed": "feed"}


def sniff_publication(body: bytes) -> Kind | None:
    """"sitemap" or "feed" when the first element of ``body`` is a sitemap's (``urlset``,
    ``sitemapindex``) or a feed's (``rss``, ``rdf:RDF``, ``feed``), else None. Cheap: one
    pass over the prolog, a long one too (a generator's banner comment, a DOCTYPE's internal
    subset: a sitemap whose root came after a fixed head was stored as a plain document,
    silently), within its first :data:`MAX_PROLOG_BYTES`; the parsers check the namespaces."""
    name = first_element(body)
    return None if name is None else _KINDS.get(name)


def first_element(head: bytes) -> bytes | None:
    """The local name of the first element of ``head``, after an optional BOM, the XML
    declaration, comments, PIs and a DOCTYPE; None if ``head`` ends first, a part of its
    prolog is never closed, or the element does not start within its first
    :data:`MAX_PROLOG_BYTES`. A head in UTF-16 or UTF-32 (by its BOM, as libxml2 reads it)
    is read as the text it encodes."""
    text = _prolog_window(head)
    match = _START_TAG.match(text, _PROLOG.match(text).end())
    return match.group(1) if match else None


def _prolog_window(head: bytes) -> bytes:
    """The first :data:`MAX_PROLOG_BYTES` of ``head`` after its BOM, as UTF-8 when the BOM
    is UTF-16's or UTF-32's (a character cut at the end is dropped)."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            window = head[len(bom):MAX_PROLOG_BYTES]
            return window if codec == "utf-8" else \
                window.decode(codec, "ignore").encode("utf-8")
    return head[:MAX_PROLOG_BYTES]


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

    def __init__(self, dates: PublishedDates | None = None, dead_after: int = 3,
                 max_per_host: int = MAX_SOURCES_PER_HOST) -> None:
        """``dead_after``: a source that answers 404 or 410 this many times in a row is
        forgotten (the store marks such a page dead; ``crawler.dead_after_404s``).
        ``max_per_host``: sources remembered per host (:data:`MAX_SOURCES_PER_HOST`)."""
        self.dates = dates or PublishedDates()
        self.dead_after = dead_after
        self.max_per_host = max_per_host
        self._sources: dict[str, int] = {}  # url → link depth
        self._gone: dict[str, int] = {}  # url → 404/410 answers in a row
        self._announced: dict[str, set[str]] = {}  # sitemap url → origins whose robots.txt
        self._listed: set[str] = set()  # sources found through a sitemap index
        self._on_trial: set[str] = set()  # known URLs an index lists, not yet read as one
        self._per_host: dict[str, int] = {}  # host → sources remembered
        self._full_hosts: set[str] = set()  # hosts warned about (MAX_SOURCES_PER_HOST)
        self._reads = 0
        self._lock = threading.Lock()

    # -- sources ----------------------------------------------------------------------------

    def offer(self, frontier: Frontier, urls: Iterable[str], depth: int = 0,
              from_index: bool = False) -> Submitted:
        """Queue publication sources (canonical URLs) at the seed level; already known ones
        are skipped by the seen-set and wait for :meth:`reread`. Admitted ones are
        remembered for the schedule, at most ``max_per_host`` a host.

        ``from_index``: a sitemap index lists ``urls``. Those are read as sitemaps, never as
        indexes again (:meth:`read`), and only the ones the frontier queued are sources
        at once: a URL it already knew may be a plain page, and is a source on trial, until
        its next fetch shows whether it is a sitemap or a feed (:meth:`answered`; after a
        restart, every sitemap the index lists is such a known URL)."""
        urls = self._room_for(list(urls))
        submitted = frontier.submit(Source.PUBLICATION, urls, SOURCE_PRIORITY, depth=depth)
        refused = {offer.url for offer, _ in submitted.refused}
        queued = {offer.url for offer in submitted.queued}
        with self._lock:
            for url in urls:
                if url not in refused:
                    self._remember(url, depth, from_index,
                                   trial=from_index and url not in queued)
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

    def moved(self, frontier: Frontier, url: str, target: str, depth: int) -> bool:
        """Source ``url`` (at link ``depth``) answered a redirect to ``target`` (a CMS's
        ``/sitemap.xml`` to ``/sitemap_index.xml``, http to https): ``target`` is a source
        too, announced by the same origins, and queued at the seed level even if known
        (:attr:`Source.REFRESH`: the redirect's own offer skips a seen URL, so a target read
        once was never read again). True when this queued ``target``; False when ``url``
        is no source, ``target`` is one already (a re-read queues it) or is refused."""
        with self._lock:
            if url not in self._sources:
                return False
            origins = self._announced.get(url, set())
            if origins:
                self._announced.setdefault(target, set()).update(origins)
            listed, trial = url in self._listed, url in self._on_trial
            if target in self._sources:
                self._remember(target, depth, listed, trial)  # a root's target is a root
                return False
            if not self._room_for_locked([target]):
                return False
        submitted = frontier.submit(Source.REFRESH, [(target, depth)], SOURCE_PRIORITY)
        if submitted.refused:
            return False
        with self._lock:
            self._remember(target, depth, listed, trial)
        return True

    def reread(self, frontier: Frontier, now: float) -> Submitted:
        """Queue every known source again from ``now``: known to the seen-set, they enter as
        the refresh planner's pages do (:attr:`Source.REFRESH` is not skipped as seen)."""
        with self._lock:
            items = list(self._sources.items())
        return frontier.submit(Source.REFRESH, items, SOURCE_PRIORITY, not_before=now)

    def answered(self, url: str, status: int | None) -> None:
        """A known source was fetched with HTTP ``status``: after ``dead_after`` 404 or 410
        in a row it is forgotten, so :meth:`reread` stops queueing a dead sitemap (a
        robots.txt ``Sitemap:`` line naming no real file was fetched at every re-read). A
        source on trial (:meth:`offer`) that answered 2xx and was not read as a sitemap or
        feed (:meth:`read` comes first) is a plain page: forgotten too."""
        with self._lock:
            if url not in self._sources:
                return
            if url in self._on_trial and status is not None and 200 <= status < 300:
                self._forget(url)
                return
            if status not in (404, 410):
                self._gone.pop(url, None)
                return
            self._gone[url] = self._gone.get(url, 0) + 1
            if self._gone[url] >= self.dead_after:
                self._forget(url)

    def __contains__(self, url: object) -> bool:
        with self._lock:
            return url in self._sources

    def _room_for(self, urls: list[str]) -> list[str]:
        """``urls`` that are sources already or fit under ``max_per_host``."""
        with self._lock:
            return self._room_for_locked(urls)

    def _room_for_locked(self, urls: list[str]) -> list[str]:
        """:meth:`_room_for`, lock held; warns once per host that has no room left."""
        room: list[str] = []
        taken: dict[str, int] = {}
        for url in urls:
            if url in self._sources:
                room.append(url)
                continue
            host = _host(url)
            count = self._per_host.get(host, 0) + taken.get(host, 0)
            if count < self.max_per_host:
                taken[host] = taken.get(host, 0) + 1
                room.append(url)
            elif host not in self._full_hosts:
                self._full_hosts.add(host)
                log.warning("host %s already has %d sitemap and feed sources, the most "
                            "Xyro keeps a host: %s and any more its sitemaps or robots.txt "
                            "name are neither fetched nor re-read (a sitemap index that "
                            "generates sitemaps without end?)", host, self.max_per_host, url)
        return room

    def _remember(self, url: str, depth: int, listed: bool, trial: bool) -> None:
        """Keep ``url`` as a source (lock held): ``listed`` through an index, on ``trial``.
        A source announced directly (robots.txt, config) is neither."""
        if url in self._sources:
            if not listed:
                self._listed.discard(url)
                self._on_trial.discard(url)
            return
        host = _host(url)
        if self._per_host.get(host, 0) >= self.max_per_host:
            return
        self._per_host[host] = self._per_host.get(host, 0) + 1
        self._sources[url] = depth
        if listed:
            self._listed.add(url)
        if trial:
            self._on_trial.add(url)

    def _forget(self, url: str) -> None:
        """``url`` is no source any more (lock held)."""
        del self._sources[url]
        self._gone.pop(url, None)
        self._listed.discard(url)
        self._on_trial.discard(url)
        host = _host(url)
        self._per_host[host] -= 1
        if not self._per_host[host]:
            del self._per_host[host]

    # -- what a source said -----------------------------------------------------------------

    def read(self, frontier: Frontier, source: str, depth: int, publication: Publication,
             read_at: float) -> tuple[Submitted, Submitted | None]:
        """The sitemap or feed at URL ``source``, at link ``depth``, was read at ``read_at``:
        its pages enter as :attr:`Source.SITEMAP` one level deeper, its sitemaps (an index)
        as sources, and the dates of its own pages go to the trust record of ``source``
        (:meth:`datable`).

        An index found through an index is not followed: sitemaps.org and Google let an
        index list sitemaps, not indexes, and a host answering every sitemap with an index
        of more would grow the sources level after level (said in an INFO line)."""
        with self._lock:
            self._reads += 1
            self._on_trial.discard(source)   # a sitemap or feed indeed (:meth:`answered`)
            nested = source in self._listed
        _log_notes(source, publication)
        pages = frontier.submit(Source.SITEMAP, [u for u, _ in publication.pages],
                                LISTED_PRIORITY, depth=depth + 1)
        self.dates.listed(source, self.datable(source, publication), read_at)
        sitemaps = None
        if publication.sitemaps and nested:
            log.info("sitemap %s is an index listed by a sitemap index: its %d sitemap(s) "
                     "are not read (an index lists sitemaps, not indexes: sitemaps.org)",
                     source, len(publication.sitemaps))
        elif publication.sitemaps:
            sitemaps = self.offer(frontier, publication.sitemaps, depth + 1, from_index=True)
        return pages, sitemaps

    def datable(self, source: str, publication: Publication) -> list[tuple[str, float | None]]:
        """The entries of ``publication`` whose dates ``source`` may give: those of its own
        origin and, for a sitemap, of the origins whose robots.txt announced it. A feed on
        another site lists a page with the date it aggregated it: the page is still queued
        (discovery), its date is not taken (:mod:`xyro.publication.published`)."""
        own = origin_prefix(source)
        if own is None:
            return []
        prefixes = (own, *(self.announced_by(source) if publication.kind == "sitemap" else ()))
        return [(url, date) for url, date in publication.pages if url.startswith(prefixes)]

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


def _host(url: str) -> str:
    """The politeness unit of ``url`` ("" when it has none: the frontier refuses it)."""
    try:
        return host_key(url)
    except ValueError:
        return ""


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
