"""Applying one batch of writer ops inside one transaction (the writer's inner loop).

Ops take effect in submission order. Per-URL state of fetched pages is read once per batch
and updated in memory, so a page fetched twice in a batch counts correctly; everything is
then written with ``executemany`` (one prepared statement per kind of row).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from itertools import chain, count
from operator import itemgetter

import numpy as np

from metadata.records import (
    MAX_CHILDREN, ClearPending, Dequeue, Enqueue, FetchRecord, FoundSeed, HostDelay, HostPause,
    JobRun, Op,
    PageType, Refuse, SaveOpic, SetLastModifiedVerdicts, SetPending, SetRanks, SetRefresh,
    SetState, SetWeights, UnitSpent, XmlVersion,
)
from metadata.checkpoint_ids import CheckpointIds
from metadata.refresh_queries import (PLANNED_TYPES, FailedRefetch, failed_refetches,
                                      refiled_after_fetch, retries)
from metadata.resolver import UrlResolver
from metadata.schema import pack_children
from metadata.seeds import FOUND_SEED_SQL

_DEAD_STATUSES = frozenset({404, 410})
# C0 and C1 control characters: an error detail quotes what servers sent (a Content-Type, a
# parser's message), and an operator reads it on a terminal (`xyro status`, sqlite3, csv).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(detail: str | None) -> str | None:
    """``detail`` with its control characters written as ``\\xNN``: a hostile server's
    escape sequence (``\\x1b[8m`` hides what follows) never reaches a terminal."""
    if detail is None or not _CONTROL.search(detail):
        return detail
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", detail)
_CHUNK = 500

# Columns of a fetched page's row, read once per batch and written back.
_STATE_COLS = ("type", "first_access", "last_access", "last_change", "last_modified", "etag",
               "signature", "http_status", "content_type", "size", "accesses", "changes",
               "unchanged", "baseline_at", "dead_count", "retry", "depth", "host_id")
(_TYPE, _FIRST_ACCESS, _LAST_ACCESS, _LAST_CHANGE, _LAST_MODIFIED, _ETAG, _SIGNATURE,
 _HTTP_STATUS, _CONTENT_TYPE, _SIZE, _ACCESSES, _CHANGES, _UNCHANGED, _BASELINE, _DEAD_COUNT,
 _RETRY, _DEPTH, _HOST_ID) = range(len(_STATE_COLS))
_STATE_SQL = ", ".join(_STATE_COLS)
# A page's first fetch sets first_access, which puts it into the partial hash index (schema
# v3); later fetches leave that column out of the SET list, so SQLite leaves the index alone.
_UPDATE_FIRST_SQL = ("UPDATE urls SET " + ", ".join(f"{c} = ?" for c in _STATE_COLS[:-2])
                     + " WHERE id = ?")
_UPDATE_SQL = ("UPDATE urls SET " + ", ".join(f"{c} = ?" for c in _STATE_COLS[:-2]
                                              if c != "first_access") + " WHERE id = ?")
_MARK_FETCHED_SQL = "UPDATE urls SET first_access = ? WHERE id = ? AND first_access IS NULL"

_FRONTIER_MERGE = (
    "INSERT INTO frontier (url_id, priority, enqueued_at, not_before) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (url_id) DO UPDATE SET priority = min(priority, excluded.priority), "
    "not_before = min(not_before, excluded.not_before)")
_FRONTIER_REPLACE = ("INSERT OR REPLACE INTO frontier (url_id, priority, enqueued_at, "
                     "not_before) VALUES (?, ?, ?, ?)")

_DELETE = object()  # frontier action: remove

# Refused URLs (FetchRecord.refused, Refuse): an unread row becomes 'refused', its reason an
# errors row (the row's own host); a fetched page keeps its type, and a failed one offered
# again (urls.retry) is not tried any more. An admitted one (enqueued) that was refused
# becomes unread again, at the smaller depth.
_REFUSED_ERROR = ("INSERT INTO errors (url_id, host_id, at, kind, detail) SELECT id, host_id, "
                  "?, 'refused', ? FROM urls WHERE id = ? AND (type = 'unread' "
                  "OR retry IS NOT NULL)")
_MARK_REFUSED = ("UPDATE urls SET type = iif(type = 'unread', 'refused', type), retry = NULL "
                 "WHERE id = ? AND (type = 'unread' OR retry IS NOT NULL)")
_UNREFUSE = ("UPDATE urls SET type = 'unread', depth = min(depth, ?) "
             "WHERE id = ? AND type = 'refused'")
_DEAD = PageType.DEAD.value
_ERROR = PageType.ERROR.value
_TYPE_VALUE = {t: t.value for t in PageType}
# A redirect is an answer, not a failure: the target URL holds the document from now on.
_MOVED = "redirect"


class BatchApplier:
    """Turns a list of ops into row writes on ``conn`` (the caller owns the transaction)."""

    def __init__(self, conn: sqlite3.Connection, resolver: UrlResolver, dead_after: int,
                 now: Callable[[], float] | None) -> None:
        self._conn = conn
        self._resolver = resolver
        self._dead_after = dead_after
        self._now = now
        self._state: dict[int, tuple] = {}
        self._checkpoint_ids = CheckpointIds(resolver)

    def forget(self) -> None:
        """Drop what may name rolled-back rows (after a failed transaction)."""
        self._resolver.forget()
        self._checkpoint_ids.forget()

    # -- resolution ------------------------------------------------------------------
    def _resolve(self, ops: Sequence[Op], wake: Callable[[], None]) -> dict[str, int]:
        """Ids for every URL the batch names; new children get parent depth + 1.

        Fetched pages are read with their state in the same hash look-up that finds their
        id; the rare fetched page not stored yet is created (depth 0) and read by id.
        """
        fetches = [op for op in ops if type(op) is FetchRecord]
        ids: dict[str, int] = {}
        state: dict[int, tuple] = {}
        for row in self._resolver.rows_by_url(dict.fromkeys(op.url for op in fetches),
                                              "id, " + _STATE_SQL):
            ids[row[0]] = row[1]
            state[row[1]] = row[2:]
        # Rows up to this id existed before the batch: only they can be refused already.
        self._old_max = self._conn.execute("SELECT coalesce(max(id), 0) FROM urls").fetchone()[0]
        heads: dict[str, int] = {}
        for op in ops:
            kind = type(op)
            if kind is FetchRecord:
                if op.url not in ids:  # its parent's record in this batch made it known
                    heads[op.url] = min(heads.get(op.url, op.depth), op.depth)
            elif kind is Enqueue or kind is Refuse:
                heads[op.url] = min(heads.get(op.url, op.depth), op.depth)
            elif kind is XmlVersion or kind is SetPending or kind is ClearPending:
                heads.setdefault(op.url, 0)
        if heads:
            ids.update(self._resolver.resolve(heads, heads))
            state.update(self._read_state([ids[op.url] for op in fetches
                                           if ids[op.url] not in state]))
        self._state = state
        self._children(ops, fetches, ids, state, wake)
        return ids

    def _children(self, ops: Sequence[Op], fetches: list[FetchRecord], ids: dict[str, int],
                  state: dict[int, tuple], wake: Callable[[], None]) -> None:
        """Ids of the batch's children, enqueued and awaited URLs, created where new with the
        smallest parent depth + 1 (awaited DTDs/entities: 0 unless also a child).

        Parents go by increasing depth and their URLs into one flat sequence; ``setdefault``
        with a running count gives each URL the position where it first occurs (the ids of
        new URLs follow that order, and its parent there has the smallest depth). Each
        fetch then finds its children's ids as a slice of one array: ``_kid_at`` maps the
        record to ``(offset, number of children, offset of its enqueued URLs)``; its refused
        URLs follow the enqueued ones.
        """
        parents = [(state[ids[op.url]][_DEPTH] + 1, op) for op in fetches
                   if op.children or op.enqueue or op.refused]
        parents.sort(key=itemgetter(0))
        parts: list[Sequence[str]] = []
        depths: list[int] = []
        sizes: list[int] = []
        kid_at: dict[int, tuple[int, int, int]] = {}
        offset = 0
        for d, op in parents:
            kids = op.children
            if len(kids) > MAX_CHILDREN:
                kids = kids[:MAX_CHILDREN]
            enqueued = [url for url, _ in op.enqueue]
            kid_at[id(op)] = (offset, len(kids), offset + len(kids))
            parts += (kids, enqueued)
            size = len(kids) + len(enqueued)
            if op.refused:  # usually links already, unless the list was truncated
                parts.append([url for url, _ in op.refused])
                size += len(op.refused)
            depths.append(d)
            sizes.append(size)
            offset += size
        for op in ops:
            if type(op) is SetPending and op.waiting_for:
                parts.append(op.waiting_for)
                depths.append(0)
                sizes.append(len(op.waiting_for))
        self._kid_at = kid_at
        if not parts:
            self._kid_ids, self._kid_blob = [], b""
            return
        first_seen: dict[str, int] = {}
        at = np.array(list(map(first_seen.setdefault, chain.from_iterable(parts), count())),
                      dtype=np.int64)
        firsts = np.fromiter(first_seen.values(), dtype=np.int64, count=len(first_seen))
        url_depth = np.repeat(np.array(depths, dtype=np.int64), sizes)[firsts]
        found = self._resolver.resolve_list(list(first_seen), url_depth.tolist(),
                                            before_bulk=wake)
        kid_ids = found[np.searchsorted(firsts, at)]
        self._kid_ids = kid_ids.tolist()
        self._kid_blob = pack_children(kid_ids)

    def _read_state(self, url_ids: list[int]) -> dict[int, tuple]:
        state: dict[int, tuple] = {}
        unique = list(dict.fromkeys(url_ids))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start:start + _CHUNK]
            sql = (f"SELECT id, {_STATE_SQL} FROM urls "
                   f"WHERE id IN ({','.join('?' * len(chunk))})")
            for row in self._conn.execute(sql, chunk):
                state[row[0]] = row[1:]
        return state

    # -- the batch ---------------------------------------------------------------------
    def apply(self, ops: Sequence[Op], wake: Callable[[], None] = lambda: None) -> None:
        """Write ``ops``; ``wake`` is called before the batch's first long SQLite call (the
        writer lets blocked producers run then, see :mod:`metadata.opqueue`)."""
        ids = self._resolve(ops, wake)
        self._frontier: dict[int, object] = {}
        self._links: dict[int, tuple[int, bytes]] = {}
        self._observations: list[tuple] = []
        self._errors: list[tuple] = []
        self._hosts: dict[int, tuple[int, int, float | None]] = {}
        self._dirty: set[int] = set()
        self._first: set[int] = set()  # fetched for the first time in this batch
        self._refused: dict[int, tuple[float, str]] = {}  # url id → (at, reason), first kept
        self._failing: dict[int, FailedRefetch] = {}  # stored pages whose last fetch failed
        self._good: dict[int, float] = {}  # url id → its last good read in this batch
        self._unrefuse: list[tuple[int, int]] = []  # (depth, url id) of admitted URLs
        rows: dict[type, list] = {SetRefresh: [], SetState: [], JobRun: [], XmlVersion: [],
                                  SetPending: [], ClearPending: [], UnitSpent: [],
                                  FoundSeed: [], HostDelay: [], HostPause: []}
        bulk: list[Op] = []
        for op in ops:
            kind = type(op)
            if kind is FetchRecord:
                self._fetch(op, ids)
            elif kind is Enqueue:
                at = op.enqueued_at
                if at is None:
                    at = self._now() if self._now is not None else op.not_before
                self._put(ids[op.url], op.priority, at, op.not_before)
                self._unrefuse.append((op.depth, ids[op.url]))
            elif kind is Refuse:
                url_id = ids[op.url]
                self._frontier[url_id] = _DELETE
                self._refused.setdefault(url_id, (self._now() if self._now else 0.0, op.reason))
            elif kind is Dequeue:
                self._frontier[op.url_id] = _DELETE
            elif kind is SetRefresh:
                rows[kind].append((op.rate, op.rate_source, op.due_unit, op.interval_units,
                                   op.url_id))
            elif kind is SetState:
                rows[kind].append((op.key, json.dumps(op.value)))
            elif kind is JobRun:
                rows[kind].append((op.name, op.started, op.finished, op.status, op.detail))
            elif kind is XmlVersion:
                rows[kind].append((ids[op.url], op.md5, op.c14n_signature, op.fetched_at,
                                   op.size, op.storage_key,
                                   None if op.valid is None else int(op.valid),
                                   op.validation_error, op.dtd_url, op.schema_url))
            elif kind is SetPending:
                rows[kind].append((ids[op.url], json.dumps(list(op.waiting_for)), op.since,
                                   op.reason))
            elif kind is ClearPending:
                rows[kind].append((ids[op.url],))
            elif kind is UnitSpent:
                rows[kind].append((op.unit, op.unit_s, op.bandwidth, op.fetched, op.refresh,
                                   op.discovery, op.urgent, op.carried_over, int(op.ended),
                                   op.updated_at))
            elif kind is FoundSeed:
                rows[kind].append((op.url, op.priority, op.added_at, op.redirected_from))
            elif kind is HostDelay:
                rows[kind].append((op.host, op.crawl_delay_s, op.started_at))
            elif kind is HostPause:
                rows[kind].append((op.host, op.until))
            else:  # SetRanks, SetWeights, SetLastModifiedVerdicts, SaveOpic: vectorised,
                # applied in order after the rows above
                bulk.append(op)
        self._write(rows, bulk)

    def _put(self, url_id: int, priority: int, at: float, not_before: float) -> None:
        # Entries are tuples, not lists: a batch holds one per enqueued URL, and tuples of
        # numbers leave the garbage collector's tracking, so they do not trigger full passes.
        prev = self._frontier.get(url_id)
        if prev is None:
            self._frontier[url_id] = (priority, at, not_before, False)
        elif prev is _DELETE:
            self._frontier[url_id] = (priority, at, not_before, True)
        else:
            self._frontier[url_id] = (min(prev[0], priority), min(prev[1], at),
                                      min(prev[2], not_before), prev[3])

    def _fetch(self, rec: FetchRecord, ids: dict[str, int]) -> None:
        url_id = ids[rec.url]
        s = list(self._state[url_id])  # kept as a tuple: untracked by the garbage collector
        t = rec.fetched_at
        prev_access = s[_LAST_ACCESS]
        # A stored document whose re-fetch failed stays what it is (DESIGN.md §6): a failed
        # fetch is no observation, and its body (a truncated or broken one) replaces
        # nothing stored: signature, links and validators stay those of the last good read.
        outcome = rec.page_type
        kept = ((outcome is PageType.ERROR or outcome is PageType.DEAD)
                and rec.error_kind != _MOVED and s[_TYPE] in PLANNED_TYPES)
        has_content = not kept and (rec.not_modified or rec.signature is not None)
        if has_content:
            self._content(s, rec, url_id, prev_access)
        if rec.requested:   # else no request was made: no access to count
            if s[_FIRST_ACCESS] is None:
                s[_FIRST_ACCESS] = t
                self._first.add(url_id)
            s[_LAST_ACCESS] = t
            s[_ACCESSES] += 1
            s[_HTTP_STATUS] = rec.http_status
            if rec.http_status in _DEAD_STATUSES:
                s[_DEAD_COUNT] += 1
            else:
                s[_DEAD_COUNT] = 0
        self._failing.pop(url_id, None)
        if s[_DEAD_COUNT] >= self._dead_after:
            s[_TYPE] = _DEAD
        elif kept:  # its back-off, or its leaving the plan, is settled with the batch
            self._failing[url_id] = FailedRefetch(url_id, t, prev_access,
                                                  self._good.get(url_id), not rec.requested)
        else:
            s[_TYPE] = _TYPE_VALUE[rec.page_type]
        # A record of no request (robots.txt refused the page, or a robots.txt found
        # unavailable) is nothing to try again.
        s[_RETRY] = 1 if rec.requested and retries(s[_TYPE], s[_ACCESSES],
                                                   rec.error_kind) else None
        self._state[url_id] = tuple(s)
        self._dirty.add(url_id)
        self._links_and_errors(rec, url_id, s, has_content)

    def _content(self, s: list, rec: FetchRecord, url_id: int,
                 prev_access: float | None) -> None:
        """A read with content or a 304: validators, signature, change counts, observation."""
        t = rec.fetched_at
        changed = False
        if rec.not_modified:  # a 304: an access without change; stored signature kept
            if rec.etag is not None:
                s[_ETAG] = rec.etag
            if rec.last_modified is not None:
                s[_LAST_MODIFIED] = rec.last_modified
        elif rec.signature is not None:
            changed = s[_SIGNATURE] is not None and s[_SIGNATURE] != rec.signature
            s[_SIGNATURE] = rec.signature
            s[_LAST_MODIFIED] = rec.last_modified
            s[_ETAG] = rec.etag
            s[_CONTENT_TYPE] = rec.content_type
            s[_SIZE] = rec.size
        if changed:
            s[_CHANGES] += 1
            s[_LAST_CHANGE] = t
            s[_UNCHANGED] = 0
            s[_BASELINE] = t
        elif s[_BASELINE] is None:
            s[_BASELINE] = t  # the first content seen is the baseline
        else:
            s[_UNCHANGED] += 1
        self._observations.append((url_id, prev_access, t, int(changed), rec.last_modified))
        self._good[url_id] = t

    def _links_and_errors(self, rec: FetchRecord, url_id: int, s: list,
                          has_content: bool) -> None:
        """The fetch's child list, errors row, host counts and frontier moves."""
        t = rec.fetched_at
        kid_at = self._kid_at.get(id(rec))
        if has_content and not rec.not_modified:
            if kid_at is None:
                self._links[url_id] = (0, b"")
            else:
                start, n, _ = kid_at
                self._links[url_id] = (n, self._kid_blob[4 * start:4 * (start + n)])
        host_id = s[_HOST_ID]
        fetches, errors, last = self._hosts.get(host_id, (0, 0, None))
        if rec.error_kind is not None:
            errors += 1
            self._errors.append((url_id, host_id, t, rec.error_kind, rec.http_status,
                                 printable(rec.error_detail)))
        if rec.requested:
            fetches, last = fetches + 1, t if last is None else max(last, t)
        self._hosts[host_id] = (fetches, errors, last)
        frontier = self._frontier
        frontier[url_id] = _DELETE
        if kid_at is None:
            return
        if rec.refused:
            self._refuse_children(rec, kid_at, t)
        if not rec.enqueue:
            return
        at = kid_at[2]
        old_max, depth = self._old_max, s[_DEPTH] + 1
        for child, (_, priority) in zip(self._kid_ids[at:at + len(rec.enqueue)], rec.enqueue):
            prev = frontier.get(child)
            if prev is None:  # the common case, inlined: a new entry
                frontier[child] = (priority, t, 0.0, False)
            else:
                self._put(child, priority, t, 0.0)
            if child <= old_max:  # known before: it may have been refused on a deeper path
                self._unrefuse.append((depth, child))

    def _refuse_children(self, rec: FetchRecord, kid_at: tuple[int, int, int], t: float) -> None:
        at = kid_at[2] + len(rec.enqueue)
        for child, (_, reason) in zip(self._kid_ids[at:at + len(rec.refused)], rec.refused):
            self._refused.setdefault(child, (t, reason))

    def _write(self, rows: dict[type, list], bulk: list[Op]) -> None:
        many = self._conn.executemany
        if self._dirty:
            self._backoff = self._settle_failures()
            state = self._state
            first = self._first
            many(_UPDATE_FIRST_SQL, [(*state[i][:_DEPTH], i) for i in first])
            many(_UPDATE_SQL, [(state[i][_TYPE], *state[i][_FIRST_ACCESS + 1:_DEPTH], i)
                               for i in self._dirty if i not in first])
            self._refile()
        if self._links:
            many("INSERT OR REPLACE INTO links (src, n, children) VALUES (?, ?, ?)",
                 [(src, n, blob) for src, (n, blob) in self._links.items()])
        if self._observations:
            many("INSERT INTO observations (url_id, prev_access, access, changed, "
                 "last_modified) VALUES (?, ?, ?, ?, ?)", self._observations)
        if self._errors:
            many("INSERT INTO errors (url_id, host_id, at, kind, http_status, detail) "
                 "VALUES (?, ?, ?, ?, ?, ?)", self._errors)
        if self._hosts:
            # A host with no request in the batch (its URLs refused by robots.txt) keeps its
            # last_fetch: max() with NULL is NULL, so coalesce() gives the old one back.
            many("UPDATE hosts SET fetches = fetches + ?, errors = errors + ?, "
                 "last_fetch = coalesce(max(coalesce(last_fetch, ?), ?), last_fetch) "
                 "WHERE id = ?",
                 [(f, e, t, t, h) for h, (f, e, t) in self._hosts.items()])
        self._write_frontier()
        if self._refused or self._unrefuse:
            self._write_refusals()
        if rows[SetRefresh]:
            many("UPDATE urls SET rate = ?, rate_source = ?, due_unit = ?, interval_units = ? "
                 "WHERE id = ?", rows[SetRefresh])
        if rows[HostDelay]:
            # One row per host: every dispatched request sends one (xyro.crawl.frontier).
            latest: dict[str, tuple[str, float, float | None]] = {}
            for host, delay, started in rows[HostDelay]:
                seen = latest.get(host)
                if seen is not None and seen[2] is not None and (started is None
                                                                 or started < seen[2]):
                    started = seen[2]
                latest[host] = (host, delay, started)
            many("INSERT INTO hosts (host, crawl_delay, last_fetch) VALUES (?, ?, ?) "
                 "ON CONFLICT (host) DO UPDATE SET crawl_delay = excluded.crawl_delay, "
                 "last_fetch = coalesce(max(coalesce(last_fetch, excluded.last_fetch), "
                 "excluded.last_fetch), last_fetch)", list(latest.values()))
        if rows[HostPause]:
            many("INSERT INTO hosts (host, paused_until) VALUES (?, ?) ON CONFLICT (host) "
                 "DO UPDATE SET paused_until = excluded.paused_until", rows[HostPause])
        if rows[SetState]:
            many("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", rows[SetState])
        if rows[UnitSpent]:
            # The crawl submits a unit's running row with nearly every page: the last one
            # of each unit in the batch stands for all (one upsert per unit and batch).
            many("INSERT OR REPLACE INTO fetch_units (unit, unit_s, bandwidth, fetched, "
                 "refresh, discovery, urgent, carried_over, ended, updated_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 list({row[0]: row for row in rows[UnitSpent]}.values()))
        if rows[FoundSeed]:
            many(FOUND_SEED_SQL, rows[FoundSeed])
        if rows[JobRun]:
            many("INSERT INTO job_runs (name, started, finished, status, detail) "
                 "VALUES (?, ?, ?, ?, ?)", rows[JobRun])
        if rows[XmlVersion]:
            many("INSERT INTO xml_versions (url_id, md5, c14n_signature, fetched_at, size, "
                 "storage_key, valid, validation_error, dtd_url, schema_url) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows[XmlVersion])
            # A URL with versions was fetched: into the hash index (schema v3) if not yet.
            many(_MARK_FETCHED_SQL, [(row[3], row[0]) for row in rows[XmlVersion]])
        if rows[SetPending]:
            many("INSERT OR REPLACE INTO pending (url_id, waiting_for, since, reason) "
                 "VALUES (?, ?, ?, ?)", rows[SetPending])
        if rows[ClearPending]:
            many("DELETE FROM pending WHERE url_id = ?", rows[ClearPending])
        for op in bulk:
            if isinstance(op, SaveOpic):
                self._save_opic(op, many)
                continue
            ids = op.ids.tolist()
            if isinstance(op, SetRanks):
                if op.importance is not None:
                    many("UPDATE urls SET importance = ? WHERE id = ?",
                         zip(op.importance.tolist(), ids))
                if op.interest is not None:
                    many("UPDATE urls SET interest = ? WHERE id = ?",
                         zip(op.interest.tolist(), ids))
            elif isinstance(op, SetWeights):
                many("UPDATE urls SET weight = ? WHERE id = ?",
                     zip([None if w != w else w for w in op.weights.tolist()], ids))
            elif isinstance(op, SetLastModifiedVerdicts):
                many("UPDATE urls SET lm_reliable = ? WHERE id = ?",
                     zip([int(bool(r)) for r in op.reliable.tolist()], ids))

    def _save_opic(self, op: SaveOpic, many: Callable[..., object]) -> None:
        """The checkpoint row, then the OPIC columns of the URLs already stored."""
        self._conn.execute("INSERT OR REPLACE INTO opic_checkpoint (id, written_at, pages, "
                           "clock, data) VALUES (1, ?, ?, ?, ?)",
                           (op.written_at, len(op.urls), op.clock, op.data))
        all_ids = self._checkpoint_ids.ids(op.urls)
        pos = np.flatnonzero(all_ids >= 0)
        ids = all_ids[pos].tolist()
        many("UPDATE urls SET opic_cash = ?, opic_history = ?, opic_estimate = ? WHERE id = ?",
             zip(op.cash[pos].tolist(), op.history[pos].tolist(), op.estimate[pos].tolist(),
                 ids))
        if op.importance is not None:
            many("UPDATE urls SET importance = ? WHERE id = ?",
                 zip(op.importance[pos].tolist(), ids))

    def _settle_failures(self) -> dict[int, int]:
        """Stored documents whose last fetch in the batch failed: those failing for good
        become ERROR (they leave the plan); the others' back-off folders, by id
        (``refresh_queries.failed_refetches``)."""
        if not self._failing:
            return {}
        leaving, folders = failed_refetches(self._conn, list(self._failing.values()))
        state = self._state
        for url_id in leaving:
            s = list(state[url_id])
            s[_TYPE] = _ERROR
            state[url_id] = tuple(s)
        return folders

    def _refile(self) -> None:
        """Re-file the batch's re-fetched pages into their next refresh folder as the fetch
        is applied (DESIGN.md §6): from this access and the stored t_i, so the folder is
        right before the planner's next unit (``refresh_queries.refiled_after_fetch``); a
        stored document whose re-fetch failed goes to its back-off folder."""
        state, first, backoff = self._state, self._first, self._backoff
        again = [(i, state[i][_TYPE], state[i][_LAST_ACCESS]) for i in self._dirty
                 if i not in first and i not in backoff]
        rows = refiled_after_fetch(self._conn, again) if again else []
        rows += [(folder, i) for i, folder in backoff.items() if i not in first]
        if rows:
            self._conn.executemany("UPDATE urls SET due_unit = ? WHERE id = ?", rows)

    def _write_refusals(self) -> None:
        """Mark refused URLs (not one enqueued in this batch: admitted on another path),
        then turn admitted ones that were refused back into unread."""
        frontier = self._frontier
        refused = [(at, reason, url_id) for url_id, (at, reason) in self._refused.items()
                   if type(frontier.get(url_id)) is not tuple]
        many = self._conn.executemany
        if refused:
            many(_REFUSED_ERROR, refused)
            many(_MARK_REFUSED, [(row[2],) for row in refused])
        if self._unrefuse:
            many(_UNREFUSE, self._unrefuse)

    def _write_frontier(self) -> None:
        deletes, merges, replaces = [], [], []
        for url_id, action in self._frontier.items():
            if action is _DELETE:
                deletes.append((url_id,))
            else:
                (replaces if action[3] else merges).append((url_id, *action[:3]))
        many = self._conn.executemany
        if deletes:
            many("DELETE FROM frontier WHERE url_id = ?", deletes)
        if merges:
            many(_FRONTIER_MERGE, merges)
        if replaces:
            many(_FRONTIER_REPLACE, replaces)
