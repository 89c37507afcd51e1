"""Start URLs from the operator: ``xyro seed`` (DESIGN.md §2).

``xyro seed`` stores its URLs in the ``seeds`` table (:mod:`metadata.seeds`), which is what
makes a scope derived from the seeds (empty ``scope.allowed_domains``) include their hosts at
every start. With no crawler holding the database it also queues them in the persisted
frontier, as before. With one running it writes the ``seeds`` row alone, never the ``urls``
or ``frontier`` tables the crawler's writer owns (its URL ids would not know rows another
process created), and the crawler takes them in (``crawl_run.queue_stored_seeds``):
``xyro run`` within ``crawl_run.SEED_POLL_S`` seconds, ``xyro crawl`` at its next start
(both queue at start the stored seeds they do not know yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metadata import MetadataStore, Writer
from xyro.app import App, build_admission, scope_seeds
from xyro.crawl.admission import Source
from xyro.crawl.frontier import Submitted, admit_offline, records
from xyro.errors import UsageError
from xyro.service.crawl_lock import CrawlerRunning, CrawlLock

#: How long ``xyro seed`` waits for the crawl lock (a ``xyro status`` probe holds it for
#: microseconds) before it takes the lock's holder for a running crawler.
LOCK_WAIT_S = 0.5


@dataclass(frozen=True, slots=True)
class Seeded:
    """What ``xyro seed`` did: ``stored`` new rows of ``seeds``; ``queued`` URLs written to
    the persisted frontier (0 when a crawler runs: it queues them itself); ``crawler_pid``:
    the running crawler that will, if any (``running``)."""

    stored: int
    queued: int
    running: bool
    crawler_pid: int | None = None


def seed_urls(app: App, urls: Sequence[str], priority: int) -> Seeded:
    """Store canonical ``urls`` as seeds at frontier ``priority`` and queue them now when no
    crawler runs (module doc). Refused by the crawl's admission: nothing is written."""
    with app.open_store() as store:
        # The writer first: a user who cannot write the store hears so, not about the lock.
        writer = store.writer(now=app.clock.now)  # stamps enqueued_at
        try:
            return _seed(app, store, writer, urls, priority)
        finally:
            writer.close()


def _seed(app: App, store: MetadataStore, writer: Writer, urls: Sequence[str],
          priority: int) -> Seeded:
    lock = CrawlLock(app.database_path, wait_s=LOCK_WAIT_S)
    try:
        lock.acquire()
    except CrawlerRunning as running:
        _admitted(app, store, urls, priority)
        return Seeded(store.add_seeds(urls, priority, app.clock.now()), 0, True, running.pid)
    try:
        submitted = _admitted(app, store, urls, priority)
        stored = store.add_seeds(urls, priority, app.clock.now())
        writer.submit_many(records(submitted.queued))
        writer.flush()
    finally:
        lock.release()
    return Seeded(stored, len(submitted.queued), False)


def _admitted(app: App, store: MetadataStore, urls: Sequence[str], priority: int
              ) -> Submitted:
    submitted = admit_offline(build_admission(app, scope_seeds(app, store)), Source.SEED,
                              urls, priority)
    if submitted.refused:
        refused = "; ".join(f"{o.url} ({r})" for o, r in submitted.refused)
        raise UsageError(f"seed refused by the crawl's admission: {refused}; nothing was "
                         "queued (see the scope and crawler.skip_suffixes keys)")
    return submitted
