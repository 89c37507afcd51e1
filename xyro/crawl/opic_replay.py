"""Bring the crawl's OPIC state up to the store at start (000 §2–3, DESIGN.md §5 "OPIC").

The state a crawl restores is its last checkpoint, or an empty state when there is none. The
store may hold fetches that state never saw: pages fetched after the checkpoint (a SIGKILL
loses up to ``ranking.opic.checkpoint_interval_s`` of visits), or every page of a database
crawled with OPIC off. Left so, those pages keep the cash the checkpoint gave them and their
children never get it, so the frontier's Greedy order and the estimates are wrong.

:func:`replay_fetches` replays the missing visits through :meth:`OnlineOpic.replay` (OPIC's
own visit path), in fetch order (``urls.last_access``, the start of a page's last fetch;
ties by id), each with the child list the store holds. A page is replayed when

- the restored state never visited it (first visits: exact whatever the timing, since the
  state's own visit counts say so; a fetch in flight at the checkpoint is not missed), or
- its last fetch started after the checkpoint was written and was not a 304 (a 304 is no
  visit, and hides whether a read came before it).

A record that was no fetch is no visit and is never replayed: a URL robots.txt forbids, or
one drained unfetched when its origin's robots.txt could not be fetched (the crawler's
``_unfetched``: an errors row of kind ``robots``, or with the detail
:data:`xyro.crawl.robots_answers.ORIGIN_UNREACHABLE`, at the page's ``last_access``).

What is exact: a page read once since the checkpoint, or fetched once and failed (no
children, all its cash to V), replays to the visit the crawl made, to rounding, when the
crawl visited pages in the order their fetches started (one worker, or fetches finishing in
the order they started). New URLs then get the ids an uninterrupted run gave them.

What is approximate:

- a page read k > 1 times since the checkpoint is replayed once, at its last fetch, with its
  last child list: it hands out at once the cash the crawl handed out k times;
- with several workers the crawl visited pages as their fetches ended, not as they started;
- a page whose last fetch failed or redirected after a read the checkpoint counted is
  replayed with no children (the crawl's visit), but a redirect's target is not stored: its
  share goes to V instead; a page the state never visited uses its stored links, from its
  last good read;
- focus grants (000 §3) use :func:`likely_xml` on the child URL alone: the link's media type
  and kind that flagged it in the crawl are not stored;
- child lists are stored cut at :data:`metadata.MAX_CHILDREN` links;
- a re-read whose fetch started before the checkpoint but was recorded after it (in flight,
  or a document that waited for its DTD) is not replayed.

Cost: after a clean stop (no fetch started after the checkpoint, and as many pages visited
as fetched) two counting scans in SQLite and nothing else, about 0.15 s per 500,000 pages;
else one scan of the fetched pages (``urls`` rows with ``first_access``), a sort of those
replayed, and per chunk of them one read of their links and one of their children's URLs:
linear in the pages and links replayed apart from the scan and the sort.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from metadata.crawl_queries import (FetchedPage, child_lists, fetch_summary, fetched_pages,
                                    unfetched_records, urls_by_id)
from xyro.content.html_links import likely_xml
from xyro.crawl.robots_answers import ORIGIN_UNREACHABLE
from xyro.crawl.opic_online import OnlineOpic
from xyro.records import ErrorKind

log = logging.getLogger(__name__)

_CHUNK = 2000  # pages replayed per read of their links
_NOT_MODIFIED = 304


def replay_fetches(opic: OnlineOpic, conn: sqlite3.Connection,
                   checkpoint_at: float | None) -> int:
    """Replay into ``opic`` the visits the store holds and it lacks (module doc);
    ``checkpoint_at``: when the restored checkpoint was written, None when there was none.
    Returns how many visits were replayed and logs it (one INFO line when any)."""
    # Records that were no fetch (robots.txt forbade the page, or its origin's could not be
    # fetched) were no visit either: the crawl left the page's cash where it was.
    no_fetch = (ErrorKind.ROBOTS.value, ORIGIN_UNREACHABLE.replace("{}", "%") + "%")
    if checkpoint_at is not None and _up_to_date(opic, conn, checkpoint_at, no_fetch):
        log.debug("OPIC: the checkpoint covers every fetch the store holds")
        return 0
    visited = opic.was_visited()
    unfetched = unfetched_records(conn, *no_fetch)
    fetches = (p for p in fetched_pages(conn) if unfetched.get(p.url_id) != p.last_access)
    missed = sorted(_missed(fetches, visited, checkpoint_at),
                    key=lambda p: (p.last_access, p.url_id))
    for start in range(0, len(missed), _CHUNK):
        _replay_chunk(opic, conn, missed[start:start + _CHUNK], visited)
    since = ("with no checkpoint" if checkpoint_at is None
             else f"after its checkpoint written at {checkpoint_at:.3f}")
    # Nothing to replay (a clean stop, a new database) is the common case: no line then.
    log.log(logging.INFO if missed else logging.DEBUG,
            "OPIC: replayed %d visits of pages the store shows fetched %s (%d pages known)",
            len(missed), since, len(opic))
    return len(missed)


def _up_to_date(opic: OnlineOpic, conn: sqlite3.Connection, checkpoint_at: float,
                no_fetch: tuple[str, str]) -> bool:
    """True when the checkpoint saw every fetch (a clean stop): none started after it, and
    the state visited as many pages as the store fetched, so none was in flight at it."""
    pages, latest = fetch_summary(conn, *no_fetch)
    return latest is None or (latest <= checkpoint_at and pages == opic.visited_pages())


def _missed(pages: Iterable[FetchedPage], visited: Callable[[str], bool],
            checkpoint_at: float | None) -> Iterator[FetchedPage]:
    """The fetched pages whose last visit the restored state lacks (module doc)."""
    for page in pages:
        if not visited(page.url):
            yield page
        elif (checkpoint_at is not None and page.last_access > checkpoint_at
              and page.http_status != _NOT_MODIFIED):
            yield page


def _replay_chunk(opic: OnlineOpic, conn: sqlite3.Connection, chunk: Sequence[FetchedPage],
                  visited: Callable[[str], bool]) -> None:
    """Replay ``chunk`` in order, each page with its stored children (module doc)."""
    lists = child_lists(conn, [p.url_id for p in chunk])
    kids = [lists.get(p.url_id, (np.empty(0, np.int32), False)) for p in chunk]
    names = urls_by_id(conn, np.concatenate([k for k, _ in kids]).tolist() if kids else [])
    for page, (ids, read) in zip(chunk, kids):
        # A failure after a counted read: the crawl visited it with the failure's no links.
        children = [names[i] for i in ids.tolist()] if read or not visited(page.url) else []
        opic.replay(page.url, children, [likely_xml(c, None) for c in children])
