"""Read-side queries the refresh planner needs (DESIGN.md §4, §6).

Each function takes a reader's own connection (``MetadataStore.read_connection()``). Times
are POSIX seconds; ``urls.rate`` is changes per second. Bulk columns come back as numpy
arrays in URL-id order so the planner can hand them to the pure ``refresh`` package.
The last two sections are the writer's side: re-filing a page as its fetch is applied,
and the back-off of a stored document whose re-fetch failed.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from itertools import chain

import numpy as np

from metadata.urlkeys import url_hash

_CHUNK = 500

#: Page types the refresh planner keeps fresh (fetched documents).
PLANNED_TYPES = ("html", "xml")
_PLANNED_SQL = f"type IN ({','.join(repr(t) for t in PLANNED_TYPES)})"

#: ``state`` key: the length in seconds of one folder (time unit), which gives ``due_unit``
#: its meaning. The planner writes it; the writer reads it to re-file fetched pages.
FOLDER_UNIT_KEY = "folders.unit_s"
#: (1 − ρ)·G, the refresh bandwidth the stored folders were filed for (the planner writes it).
BANDWIDTH_KEY = "refresh.bandwidth_planned"
#: t_max, the longest refresh interval in units (``refresh.max_interval_units``; the planner
#: writes it): it bounds a failing page's back-off and how long a page may go unread.
MAX_INTERVAL_KEY = "refresh.max_interval_units"
#: The first of the units in a row that began with nothing to discover (null: the last one
#: planned had unread pages): the planner gives ρG to refresh once enough such units passed.
UNREAD_EMPTY_SINCE_KEY = "refresh.unread_empty_since"


@dataclass(frozen=True, eq=False)
class PlannedPages:
    """Fetched HTML/XML pages with what the planner needs, ascending id.

    NaN stands for SQL NULL in the float columns; ``due_unit`` uses ``NO_UNIT`` for NULL.
    """

    ids: np.ndarray            # int64
    host_id: np.ndarray        # int64
    is_xml: np.ndarray         # bool
    importance: np.ndarray     # float64, direct rank (mean 1)
    interest: np.ndarray       # float64, inverse rank (mean 1)
    rate: np.ndarray           # float64, changes per second
    rate_source: list[str | None]
    last_access: np.ndarray    # float64, POSIX seconds
    due_unit: np.ndarray       # int64
    interval_units: np.ndarray  # float64
    weight: np.ndarray         # float64, the planner's weight key (schema v4)
    is_planned: np.ndarray     # bool: a fetched HTML/XML page


NO_UNIT = np.iinfo(np.int64).min


def _f(value: float | None) -> float:
    return np.nan if value is None else float(value)


_PAGE_COLS = ("id, host_id, type, importance, interest, rate, rate_source, last_access, "
              "due_unit, interval_units, weight")


def planned_pages(conn: sqlite3.Connection) -> PlannedPages:
    """Every fetched HTML/XML page (accesses > 0), one full scan of ``urls``, turned into
    columns a slice at a time (5M pages: the rows are never all held as Python tuples)."""
    cur = conn.execute(f"SELECT {_PAGE_COLS} FROM urls WHERE {_PLANNED_SQL} AND accesses > 0 "
                       "ORDER BY id")
    parts: list[PlannedPages] = []
    names: dict[str, str] = {}  # one str object per rate source, not one per page
    while rows := cur.fetchmany(65_536):
        part = _pages(rows)
        part.rate_source[:] = [names.setdefault(v, v) if v else v for v in part.rate_source]
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _pages([])
    return PlannedPages(**{
        f.name: (list(chain.from_iterable(p.rate_source for p in parts))
                 if f.name == "rate_source"
                 else np.concatenate([getattr(p, f.name) for p in parts]))
        for f in fields(PlannedPages)})


def page_rows(conn: sqlite3.Connection, url_ids: Iterable[int]) -> PlannedPages:
    """The same columns for the given pages whatever their type (``is_planned`` says which
    are fetched HTML/XML pages), ascending id, by primary key: O(pages asked)."""
    ids = sorted(set(int(i) for i in url_ids))
    rows: list[tuple] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        rows += conn.execute(f"SELECT {_PAGE_COLS}, {_PLANNED_SQL} AND accesses > 0 "
                             f"FROM urls WHERE id IN ({','.join('?' * len(chunk))})", chunk)
    rows.sort()
    planned = np.fromiter((bool(r[-1]) for r in rows), dtype=bool, count=len(rows))
    return _pages([r[:-1] for r in rows], planned)


def _pages(rows: list[tuple], planned: np.ndarray | None = None) -> PlannedPages:
    n = len(rows)
    cols = list(zip(*rows)) if rows else [()] * 11
    return PlannedPages(
        ids=np.fromiter(cols[0], dtype=np.int64, count=n),
        host_id=np.fromiter(cols[1], dtype=np.int64, count=n),
        is_xml=np.fromiter((t == "xml" for t in cols[2]), dtype=bool, count=n),
        importance=np.fromiter((_f(v) for v in cols[3]), dtype=np.float64, count=n),
        interest=np.fromiter((_f(v) for v in cols[4]), dtype=np.float64, count=n),
        rate=np.fromiter((_f(v) for v in cols[5]), dtype=np.float64, count=n),
        rate_source=list(cols[6]),
        last_access=np.fromiter((_f(v) for v in cols[7]), dtype=np.float64, count=n),
        due_unit=np.fromiter((NO_UNIT if v is None else int(v) for v in cols[8]),
                             dtype=np.int64, count=n),
        interval_units=np.fromiter((_f(v) for v in cols[9]), dtype=np.float64, count=n),
        weight=np.fromiter((_f(v) for v in cols[10]), dtype=np.float64, count=n),
        is_planned=np.ones(n, dtype=bool) if planned is None else planned)


def last_modified_verdicts(conn: sqlite3.Connection, host_ids: Iterable[int],
                           url_ids: Iterable[int]
                           ) -> tuple[dict[int, tuple[int, int]], dict[int, bool]]:
    """The stored Last-Modified verdicts (``urls.lm_reliable``): per host of ``host_ids``
    (pages checked, pages that failed), and per page of ``url_ids`` that has one."""
    hosts: dict[int, tuple[int, int]] = {}
    wanted = sorted(set(int(h) for h in host_ids))
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start:start + _CHUNK]
        for host, checked, bad in conn.execute(
                "SELECT host_id, count(*), sum(lm_reliable = 0) FROM urls WHERE lm_reliable "
                f"IS NOT NULL AND host_id IN ({','.join('?' * len(chunk))}) GROUP BY host_id",
                chunk):
            hosts[int(host)] = (int(checked), int(bad))
    pages: dict[int, bool] = {}
    ids = sorted(set(int(i) for i in url_ids))
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        pages.update((int(i), bool(r)) for i, r in conn.execute(
            f"SELECT id, lm_reliable FROM urls WHERE id IN ({','.join('?' * len(chunk))}) "
            "AND lm_reliable IS NOT NULL", chunk))
    return hosts, pages


def max_observation_id(conn: sqlite3.Connection) -> int:
    """The newest observation row id (0 when there is none)."""
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM observations").fetchone()[0])


def observed_since(conn: sqlite3.Connection, after_id: int, up_to_id: int) -> list[int]:
    """URL ids with an observation whose row id lies in (after_id, up_to_id]."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT url_id FROM observations WHERE id > ? AND id <= ?",
        (after_id, up_to_id))]


Row = tuple[float, int, float | None]  # (access, changed, last_modified) of one observation

#: Observations per page the refresh planner reads to re-estimate its rate (DESIGN.md §6):
#: its newest, whatever its history; the older ones it reads as a summary (:class:`OlderReads`).
#: Why 256, measured by tests/bench/history_window.py (pages read 1000 and 4000 times, λ from
#: 0.003 to 3 changes per read interval, by signatures and by Last-Modified): where the
#: newest reads hold few changes the older ones join them and the rates stay within 1.5 %
#: (p90) of the whole history's; faster pages go by their newest reads, 10–24 % (p90) off,
#: which costs their share of the plan's obsolescence at most 0.35 % over the whole
#: history's (128 reads: 0.76 %); the estimator and Last-Modified verdict never differ.
#: A rate 20 % off moves t_i = K/√(r·λ) by 10 %; each row read costs about 5 µs.
RECENT_OBSERVATIONS = 256


@dataclass(frozen=True, slots=True)
class OlderReads:
    """What the estimators need of a page's observations older than the ones read: its
    first two (its first access and Last-Modified date) and ``changes``, the changes seen
    up to the first read kept (included: its own change is in the interval before it)."""

    first: list[Row]
    changes: int


@dataclass(frozen=True, slots=True)
class RecentReads:
    """A page's newest observations, oldest first, as :func:`observations_of` gives them;
    ``older`` is None when they are its whole history."""

    rows: list[Row]
    older: OlderReads | None = None


def observations_of(conn: sqlite3.Connection, url_ids: Iterable[int], up_to_id: int
                    ) -> dict[int, list[Row]]:
    """Per URL id its observations (access, changed, last_modified), oldest first: the
    whole history (``xyro plan --explain``); the planner reads :func:`recent_observations`."""
    out: dict[int, list[Row]] = {}
    ids = list(url_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        sql = ("SELECT url_id, access, changed, last_modified FROM observations "
               f"WHERE url_id IN ({','.join('?' * len(chunk))}) AND id <= ? "
               "ORDER BY url_id, access, id")
        for url_id, access, changed, lm in conn.execute(sql, (*chunk, up_to_id)):
            out.setdefault(url_id, []).append((access, changed, lm))
    return out


def recent_observations(conn: sqlite3.Connection, url_ids: Iterable[int], up_to_id: int,
                        limit: int = RECENT_OBSERVATIONS) -> dict[int, RecentReads]:
    """Per URL id (with observations up to ``up_to_id``) its newest ``limit`` observations
    and, when it has more, a summary of the older ones.

    The newest by row id, the order the writer compares signatures in: each page's rows
    are the last entries of its range in the index ``observations_url`` (url_id, rowid), so
    a page costs O(limit) rows whatever its history (:func:`_cut` for a longer one). Call
    it in one read transaction with ``up_to_id`` (the summary reads ``urls``)."""
    out: dict[int, RecentReads] = {}
    ids = list(url_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        # A page has at most as many observations as accesses: only those read more often
        # than ``limit`` are looked at one by one.
        pages = {r[0]: r[1:] for r in conn.execute(
            "SELECT id, accesses, changes, last_modified FROM urls WHERE id IN "
            f"({','.join('?' * len(chunk))})", chunk)}
        cuts = {}
        for url_id in chunk:
            if url_id in pages and pages[url_id][0] > limit:
                cut = conn.execute("SELECT id FROM observations WHERE url_id = ? AND id <= ? "
                                   "ORDER BY id DESC LIMIT 1 OFFSET ?",
                                   (url_id, up_to_id, limit)).fetchone()
                if cut:
                    cuts[url_id] = cut[0]
        whole = [i for i in chunk if i not in cuts]
        out.update((i, RecentReads(rows)) for i, rows in observations_of(
            conn, whole, up_to_id).items())
        if cuts:
            out.update(_older_cut(conn, cuts, pages, up_to_id))
    return out


def _older_cut(conn: sqlite3.Connection, cuts: dict[int, int],
               pages: dict[int, tuple[int, int, float | None]], up_to_id: int
               ) -> dict[int, RecentReads]:
    """The pages with more observations than read: their rows after ``cuts`` (by the index
    ``observations_url``) and first two, and their ``pages`` (accesses, changes, stored
    date) less the changes after ``up_to_id``."""
    ids = list(cuts)
    after = dict(conn.execute(
        "SELECT url_id, count(*) FROM observations WHERE id > ? AND changed AND url_id IN "
        f"({','.join('?' * len(ids))}) GROUP BY url_id", (up_to_id, *ids)))
    out: dict[int, RecentReads] = {}
    for url_id, cut in cuts.items():
        rows = conn.execute("SELECT access, changed, last_modified FROM observations WHERE "
                            "url_id = ? AND id > ? AND id <= ? ORDER BY access, id",
                            (url_id, cut, up_to_id)).fetchall()
        first = conn.execute("SELECT access, changed, last_modified FROM observations "
                             "WHERE url_id = ? ORDER BY id LIMIT 2", (url_id,)).fetchall()
        _, changes, stored_lm = pages[url_id]
        out[url_id] = _cut(rows, changes - after.get(url_id, 0), stored_lm, first)
    return out


def _cut(rows: list[Row], changes: int, stored_lm: float | None, first: list[Row]
         ) -> RecentReads:
    """The newest ``rows`` of a longer history (by access time), as the estimator reads
    them from the first on (``PageEstimator.history``). Rows at its access time after it
    are dropped (their changes end the interval before it). Its date is its own: one it
    does not have (an unchanged read without one carries the date before) is unknown,
    None, the estimator's dates starting at the first read that has one; reads without a
    date nor a change all carried the page's stored one, which they get. ``changes``: the
    page's changes up to ``up_to_id``."""
    t0, _, date = rows[0]
    later = [r for r in rows[1:] if r[0] > t0]
    if date is None and not any(r[1] or r[2] is not None for r in rows):
        date = stored_lm
    older = OlderReads(first, max(0, changes - sum(r[1] for r in later)))
    return RecentReads([(t0, 0, date), *later], older)


def weights_between(conn: sqlite3.Connection, low: float, high: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) of the pages whose ``weight`` lies in [low, high] (either bound may be
    infinite), through the partial index ``urls_weight``: O(log N + pages returned)."""
    terms, args = ["weight IS NOT NULL"], []
    if math.isfinite(low):
        terms.append("weight >= ?")
        args.append(low)
    if math.isfinite(high):
        terms.append("weight <= ?")
        args.append(high)
    rows = conn.execute(f"SELECT id, weight FROM urls WHERE {' AND '.join(terms)}",
                        args).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return ids, np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))


def weights_top(conn: sqlite3.Connection, positive: bool, limit: int
                ) -> list[tuple[int, float]]:
    """(id, weight) of the ``limit`` largest positive weights, or of the ``limit`` most
    negative ones: the first entries of the index ``urls_weight``."""
    sql = ("SELECT id, weight FROM urls WHERE weight > 0 ORDER BY weight DESC LIMIT ?"
           if positive else
           "SELECT id, weight FROM urls WHERE weight < 0 ORDER BY weight LIMIT ?")
    return [(int(i), float(w)) for i, w in conn.execute(sql, (limit,))]


def unplanned_leftovers(conn: sqlite3.Connection) -> list[int]:
    """Pages that are not fetched HTML/XML documents (any more) but still hold refresh
    data (rate, weight or folder): one full scan, for the planner's rebuilds."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM urls WHERE (rate IS NOT NULL OR weight IS NOT NULL OR "
        f"due_unit IS NOT NULL) AND NOT ({_PLANNED_SQL} AND accesses > 0)")]


def rank_runs_after(conn: sqlite3.Connection, job_id: int) -> tuple[int, int]:
    """(newest ``job_runs`` id, ranking runs after ``job_id``): a rowid range, O(new runs)."""
    top = int(conn.execute("SELECT coalesce(max(id), 0) FROM job_runs").fetchone()[0])
    ranks = conn.execute("SELECT count(*) FROM job_runs WHERE id > ? AND name = 'rank'",
                         (job_id,)).fetchone()[0]
    return top, int(ranks)


def due_ids(conn: sqlite3.Connection, unit: int) -> list[int]:
    """Pages filed in a folder ≤ ``unit`` (uses the partial index ``urls_due``)."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM urls WHERE due_unit IS NOT NULL AND due_unit <= ?", (unit,))]


def next_folders(conn: sqlite3.Connection, unit: int, limit: int,
                 read_before: float = math.inf) -> list[tuple[int, int]]:
    """(id, folder) of up to ``limit`` pages filed after ``unit`` and last read before
    ``read_before``, the earliest folder first (then by id): the first entries of the
    partial index ``urls_due`` past the unit (those read since are skipped in the scan)."""
    if limit <= 0:
        return []
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT id, due_unit FROM urls WHERE due_unit IS NOT NULL AND due_unit > ? "
        "AND (last_access IS NULL OR last_access < ?) ORDER BY due_unit, id LIMIT ?",
        (unit, read_before, limit))]


def read_since(conn: sqlite3.Connection, url_ids: Iterable[int], since: float) -> list[int]:
    """The pages of ``url_ids`` last read at or after ``since``."""
    last = _by_id(conn, "SELECT id, last_access FROM urls WHERE id IN ({}) "
                        "AND last_access IS NOT NULL", list(url_ids))
    return [i for i, t in last.items() if t >= since]


def unread_ranked(conn: sqlite3.Connection, limit: int) -> list[int]:
    """Up to ``limit`` unread URL ids, highest OPIC cash first, then importance, then id
    (NULLs after every value: SQLite sorts NULL lowest, so last when descending).

    The first ``limit`` entries of the partial index ``urls_unread`` (schema v4): O(limit),
    whatever the number of unread or refused rows.
    """
    if limit <= 0:
        return []
    return [r[0] for r in conn.execute(
        "SELECT id FROM urls WHERE type = 'unread' ORDER BY opic_cash DESC, importance DESC, "
        "id LIMIT ?", (limit,))]


#: Fetches a never-loaded page gets before its failures are taken as final.
ERROR_TRIES = 4
#: Failures another fetch would not change: robots.txt, the scope and address policy, the
#: type or size refused, a trap, a redirect loop, a DTD or entity it may not fetch. The
#: others (timeouts, connections, DNS, HTTP statuses, bodies cut short or unparseable,
#: DTDs that failed) are retried.
LASTING_ERRORS = ("robots", "scope", "address", "content_type", "trap", "redirect",
                  "too_large", "refused", "entity_refused")


def retries_due(conn: sqlite3.Connection, now: float, unit_s: float, limit: int
                ) -> list[int]:
    """Up to ``limit`` never-loaded pages whose fetches all failed (type ``error``), fewer
    than :data:`ERROR_TRIES` times and never for a lasting reason (:data:`LASTING_ERRORS`,
    a refusal since included): the writer marks them (``urls.retry``, :func:`retries`).
    Each is due again unit_s·2^(a−1) after its last try (a its tries so far: one unit,
    then two, then four), the longest waiting first. A page read once is a planned
    document, whose failed re-reads back off in its folder instead
    (:func:`failed_refetches`).

    The partial index ``urls_retry`` (schema v10) holds the marked pages alone, by last
    try: the scan reads those tried at least a unit ago, O(marked pages) at worst."""
    if limit <= 0:
        return []
    return [r[0] for r in conn.execute(
        "SELECT id FROM urls WHERE retry IS NOT NULL AND last_access <= ? "
        "AND last_access + ? * (1 << max(accesses - 1, 0)) <= ? "
        "ORDER BY last_access LIMIT ?", (now - unit_s, unit_s, now, limit))]


def retries(page_type: str, accesses: int, error_kind: str | None) -> bool:
    """Whether a page after a fetch of outcome ``page_type`` (its ``accesses`` counted) is
    to be tried again: a never-loaded page that failed fewer than :data:`ERROR_TRIES`
    times, not for a lasting reason."""
    return (page_type == "error" and accesses < ERROR_TRIES
            and (error_kind or "") not in LASTING_ERRORS)


def urls_of(conn: sqlite3.Connection, url_ids: Iterable[int]) -> dict[int, str]:
    """URL text per id."""
    out: dict[int, str] = {}
    ids = list(url_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        out.update(conn.execute(
            f"SELECT id, url FROM urls WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def urls_and_depths(conn: sqlite3.Connection, url_ids: Iterable[int]
                    ) -> dict[int, tuple[str, int, float | None]]:
    """(URL text, link depth, last access or None) per id, by primary key."""
    out: dict[int, tuple[str, int, float | None]] = {}
    ids = list(url_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        out.update((i, (u, d, t)) for i, u, d, t in conn.execute(
            f"SELECT id, url, depth, last_access FROM urls "
            f"WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def url_row(conn: sqlite3.Connection, url: str) -> dict | None:
    """The ``urls`` row of ``url`` as a dict (with its host name), or None if unknown."""
    cur = conn.execute(
        "SELECT u.*, h.host AS host FROM urls u JOIN hosts h ON h.id = u.host_id "
        "WHERE u.hash = ?", (url_hash(url),))
    names = [d[0] for d in cur.description]
    for row in cur:
        record = dict(zip(names, row))
        if record["url"] == url:  # the hash is only a look-up key
            return record
    return None


def host_names(conn: sqlite3.Connection, host_ids: Iterable[int]) -> dict[int, str]:
    ids = list(host_ids)
    out: dict[int, str] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        out.update(conn.execute(
            f"SELECT id, host FROM hosts WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def state_value(conn: sqlite3.Connection, key: str, default: object = None) -> object:
    """A JSON value from the ``state`` table."""
    row = conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
    return default if row is None else json.loads(row[0])


# -- the writer side: re-filing a page as its fetch is applied (DESIGN.md §6) ---------------

def folder_after(last_access_s: float, interval_units: float, unit_s: float) -> int:
    """⌊(t_last + t_i·unit)/unit⌋: the folder formula of ``refresh.folders.folders_after``,
    the same arithmetic on one page (metadata may not import ``refresh``; a test checks
    that both give the same folder on random inputs)."""
    return math.floor((last_access_s + interval_units * unit_s) / unit_s)


def refiled_after_fetch(conn: sqlite3.Connection, pages: Sequence[tuple[int, str, float]]
                        ) -> list[tuple[int, int]]:
    """(due_unit, id) for re-fetched pages ``(id, new type, last access)`` the planner
    knows: an HTML/XML page goes to the folder its stored interval t_i gives from this
    access; a page that is no longer one (but still has refresh data) goes to its access's
    folder, so the planner's next unit finds it in the due folder and takes it out of the
    plan. Nothing before the planner's first run (no folder unit)."""
    if not pages:
        return []
    unit = state_value(conn, FOLDER_UNIT_KEY)
    if not isinstance(unit, (int, float)) or not unit > 0:
        return []
    filed: dict[int, float | None] = {}
    ids = [p[0] for p in pages]
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        for url_id, interval in conn.execute(
                f"SELECT id, interval_units FROM urls WHERE id IN "
                f"({','.join('?' * len(chunk))}) AND (interval_units IS NOT NULL OR "
                "due_unit IS NOT NULL OR rate IS NOT NULL)", chunk):
            filed[url_id] = interval
    out: list[tuple[int, int]] = []
    for url_id, page_type, last in pages:
        if url_id not in filed:
            continue
        interval = filed[url_id]
        if page_type not in PLANNED_TYPES:
            out.append((folder_after(last, 0.0, unit), url_id))
        elif interval is not None:
            out.append((folder_after(last, interval, unit), url_id))
    return out


# -- the writer side: a failed re-fetch of a stored document (DESIGN.md §6, §7) -------------

@dataclass(frozen=True, slots=True)
class FailedRefetch:
    """A re-fetch of a stored HTML/XML page that failed; the writer keeps the page's type.

    ``previous`` is the access before this one; ``good`` the page's last good read (content
    or 304) earlier in the same batch, not in ``observations`` yet; ``refused``: robots.txt
    forbade this fetch (no request, no access: its earlier refusals are errors rows only).
    """

    url_id: int
    at: float
    previous: float | None
    good: float | None
    refused: bool = False


def failed_refetches(conn: sqlite3.Connection, failures: Sequence[FailedRefetch]
                     ) -> tuple[set[int], dict[int, int]]:
    """(pages that leave the plan, back-off folder of each page that stays) for ``failures``.

    A transient failure must not evict a warehouse document, so a page stays planned and
    waits t_i + d units, d the units since its last good read: the wait doubles with each
    failure in a row (2·t_i, 4·t_i, ...), bounded by max(t_max, t_i). It leaves the plan
    when the fetch before this one failed too and it has gone unread for max(t_max, t_i)
    units: longer than any planned page waits. Gone answers (404/410) have their own rule
    (the writer's ``dead_after``). Without the planner's folder unit nothing is decided;
    without t_max the wait does not grow and no page leaves (a planner unit writes both).
    """
    unit = state_value(conn, FOLDER_UNIT_KEY)
    if not failures or not isinstance(unit, (int, float)) or not unit > 0:
        return set(), {}
    t_max = state_value(conn, MAX_INTERVAL_KEY)
    t_max = float(t_max) if isinstance(t_max, (int, float)) and t_max > 0 else None
    ids = sorted({f.url_id for f in failures})
    good, interval = _last_good_reads(conn, ids), _intervals(conn, ids)
    refusals = _refusal_times(conn, sorted({f.url_id for f in failures if f.refused}))
    leaving: set[int] = set()
    folders: dict[int, int] = {}
    for f in failures:
        last_good = max((t for t in (f.good, good.get(f.url_id)) if t is not None),
                        default=None)
        d = 0.0 if last_good is None else max(0.0, (f.at - last_good) / unit)
        t_i = interval.get(f.url_id)
        longest = None if t_max is None else max(t_max, t_i or 0.0)
        # The attempt before this one: an access, or a refusal of robots.txt (no access).
        previous = max((t for t in (f.previous, *refusals.get(f.url_id, ())) if t is not None
                        and t < f.at), default=None)
        failed_before = last_good is not None and previous is not None and previous > last_good
        if longest is not None and failed_before and d >= longest:
            leaving.add(f.url_id)
        elif t_i is not None:  # the planner knows the page: its back-off folder
            folders[f.url_id] = folder_after(f.at, min(t_i + d, longest or t_i), unit)
    return leaving, folders


def _refusal_times(conn: sqlite3.Connection, ids: list[int]) -> dict[int, list[float]]:
    """When robots.txt refused each of ``ids``: a read of the robots.txt refusals (index
    ``errors_kind_at``), made only for a batch with stored pages robots.txt now forbids."""
    times: dict[int, list[float]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        for url_id, at in conn.execute(
                f"SELECT url_id, at FROM errors WHERE kind = 'robots' AND url_id IN "
                f"({','.join('?' * len(chunk))})", chunk):
            times.setdefault(int(url_id), []).append(float(at))
    return times


def _last_good_reads(conn: sqlite3.Connection, ids: list[int]) -> dict[int, float]:
    """The newest observation (a read with content or a 304) of each page, by the index
    ``observations_url``."""
    return _by_id(conn, "SELECT url_id, max(access) FROM observations WHERE url_id IN ({}) "
                        "GROUP BY url_id", ids)


def _intervals(conn: sqlite3.Connection, ids: list[int]) -> dict[int, float]:
    """t_i (units) of the pages the planner has filed."""
    return _by_id(conn, "SELECT id, interval_units FROM urls WHERE id IN ({}) "
                        "AND interval_units IS NOT NULL", ids)


def _by_id(conn: sqlite3.Connection, sql: str, ids: list[int]) -> dict[int, float]:
    """``sql`` (two columns, ``{}`` for the id placeholders) run over ``ids`` in chunks."""
    out: dict[int, float] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        out.update(conn.execute(sql.format(",".join("?" * len(chunk))), chunk))
    return out
