"""Typed records crossing the metadata boundary: page types, writer ops, export shapes.

Ops are frozen dataclasses submitted to :class:`metadata.writer.Writer`; the writer applies
them in submission order, many per transaction. Times are float POSIX seconds on the
clock's time line (DESIGN.md §3).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import NamedTuple, Union

import numpy as np

#: Most children stored per page (DESIGN.md §4): longer lists are truncated, order kept.
MAX_CHILDREN = 65534

#: Frontier priorities: 0 is the most urgent (loader DTD/entity requests), 4 the least.
PRIORITIES = range(0, 5)
_STR = frozenset({str})  # the type every URL of a record has


def _check_url(url: object, what: str) -> None:
    if not isinstance(url, str) or not url:
        raise ValueError(f"{what} must be a non-empty URL string, got {url!r}")


def _check_time(t: object, what: str) -> None:
    if not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValueError(f"{what} must be finite POSIX seconds, got {t!r}")


def _check_priority(p: object, what: str) -> None:
    if not isinstance(p, int) or p not in PRIORITIES:
        raise ValueError(f"{what} priority must be an int in 0..4 (0 most urgent), got {p!r}")


class PageType(str, enum.Enum):
    """What a URL turned out to be; stored as these lowercase strings in ``urls.type``."""

    UNREAD = "unread"
    HTML = "html"
    XML = "xml"
    DTD = "dtd"
    ERROR = "error"
    DEAD = "dead"
    #: Known as a link target only: the frontier's admission refused it (out of scope, too
    #: deep, a trap...), so no path fetches it; the reason is an ``errors`` row of kind
    #: ``refused``. Admitted later (found at a smaller depth, seeded), it becomes unread.
    REFUSED = "refused"
    #: Out of scope, fetched for its links alone by the global PageRank estimate (DESIGN.md
    #: §5): its links are stored, its children never queued; no document, no refresh.
    OUTSIDE = "outside"


#: Integer code of each type in :attr:`Graph.types` (index into this tuple).
TYPE_CODES: tuple[str, ...] = tuple(t.value for t in PageType)


@dataclass(frozen=True, slots=True)
class FetchRecord:
    """One fetch of ``url`` (already canonical) and everything learnt from it.

    ``signature`` is the MD5 of the body (None when no body was read); ``not_modified`` marks
    a 304, which counts as an access without change. ``children`` is the ordered link list
    (stored truncated to :data:`MAX_CHILDREN`). The record is also the page's move in the
    persisted frontier, filled in by the frontier alone (DESIGN.md §2): its application
    takes ``url`` out of the frontier table, then puts in the (url, priority) pairs of
    ``enqueue`` (the page itself among them if it was asked for again meanwhile), and marks
    the (url, reason) pairs of ``refused`` as :attr:`PageType.REFUSED` — all in the page's
    transaction. ``error_kind`` (e.g. ``"timeout"``, ``"http"``, ``"parse"``) records an
    error of that kind with ``error_detail``. A failed fetch (``page_type`` ERROR, not a
    redirect) of a page stored as HTML/XML leaves that page's type and stored content as
    they were: it stays in the refresh plan with a back-off
    (:func:`metadata.refresh_queries.failed_refetches`). ``depth`` is the page's link depth
    (the frontier's item), the depth of its row when the same batch creates it (its parent's
    record, fetched in that batch too, made it known). ``requested`` False: the URL was never
    asked of its server (robots.txt forbids it): the record is its outcome and error alone,
    not an access (its access counts and times, and its host's fetch count and last fetch,
    stay as they were).
    """

    url: str
    fetched_at: float
    page_type: PageType
    http_status: int | None = None
    signature: bytes | None = None
    not_modified: bool = False
    last_modified: float | None = None
    etag: str | None = None
    children: tuple[str, ...] = ()
    enqueue: tuple[tuple[str, int], ...] = ()
    error_kind: str | None = None
    error_detail: str | None = None
    content_type: str | None = None
    size: int | None = None
    refused: tuple[tuple[str, str], ...] = ()
    depth: int = 0
    requested: bool = True

    def __post_init__(self) -> None:
        # Every check has a fast path that formats nothing when it passes: this runs on the
        # crawler's threads for every page, and they share the GIL with the writer.
        url = self.url
        if type(url) is not str or not url:
            _check_url(url, "FetchRecord.url")
        t = self.fetched_at
        if type(t) is not float or t - t != 0.0:  # t - t is NaN for an infinite t
            _check_time(t, f"FetchRecord.fetched_at of {url}")
        if type(self.page_type) is not PageType:
            object.__setattr__(self, "page_type", PageType(self.page_type))
        if self.signature is not None and not isinstance(self.signature, bytes):
            raise ValueError(f"FetchRecord.signature of {url} must be bytes or None")
        children = self.children
        if type(children) is not tuple:
            children = tuple(children)
            object.__setattr__(self, "children", children)
        if type(self.enqueue) is not tuple:
            object.__setattr__(self, "enqueue", tuple(tuple(e) for e in self.enqueue))
        if children and (not _STR.issuperset(map(type, children)) or "" in children):
            for child in children:
                _check_url(child, f"child of {url}")
        if not all(type(u) is str and u and type(p) is int and 0 <= p <= 4
                   for u, p in self.enqueue):
            for child, priority in self.enqueue:
                _check_url(child, f"enqueued child of {url}")
                _check_priority(priority, f"enqueued child {child}")
        if self.refused:
            if type(self.refused) is not tuple:
                object.__setattr__(self, "refused", tuple(tuple(r) for r in self.refused))
            for child, reason in self.refused:
                _check_url(child, f"refused child of {url}")
                if not isinstance(reason, str):
                    raise ValueError(f"refused child {child} of {url}: reason must be text")


@dataclass(frozen=True, slots=True)
class Enqueue:
    """Put ``url`` in the persisted frontier (seeds, refresh planner, loader requests).

    A URL already queued keeps the more urgent priority and the earlier ``not_before``.
    ``enqueued_at`` defaults to the writer's clock (or ``not_before`` without one); ``depth``
    is the depth of a new URL, and lowers the depth of a refused one, which becomes unread
    (it was admitted this time). Only the frontier builds it (DESIGN.md §2).
    """

    url: str
    priority: int
    not_before: float = 0.0
    enqueued_at: float | None = None
    depth: int = 0

    def __post_init__(self) -> None:
        _check_url(self.url, "Enqueue.url")
        _check_priority(self.priority, f"Enqueue of {self.url}")
        _check_time(self.not_before, f"Enqueue.not_before of {self.url}")
        if self.enqueued_at is not None:
            _check_time(self.enqueued_at, f"Enqueue.enqueued_at of {self.url}")


@dataclass(frozen=True, slots=True)
class Refuse:
    """The frontier's admission refused ``url`` (DESIGN.md §2): never fetch it.

    Applied: the URL (created at ``depth`` if new) leaves the persisted frontier; if it is
    unread it becomes :attr:`PageType.REFUSED` with ``reason`` in an ``errors`` row of kind
    ``refused`` (a fetched page keeps its type and history). Only the frontier builds it.
    """

    url: str
    reason: str
    depth: int = 0

    def __post_init__(self) -> None:
        _check_url(self.url, "Refuse.url")


@dataclass(frozen=True, slots=True)
class Dequeue:
    """Remove ``url_id`` from the persisted frontier (e.g. dropped by robots.txt or scope)."""

    url_id: int


@dataclass(frozen=True, slots=True)
class SetRefresh:
    """Refresh data of one page: change rate λ (changes per second) and its folder.

    ``rate_source`` names the estimator (e.g. ``"mle"``, ``"last_modified"``, ``"prior"``);
    ``due_unit`` is the folder (time-unit index) the page waits in, ``interval_units`` t_i.
    """

    url_id: int
    rate: float | None
    rate_source: str | None
    due_unit: int | None
    interval_units: float | None


@dataclass(frozen=True, slots=True, eq=False)
class SetRanks:
    """Bulk importance (direct rank) and/or interest (inverse rank) for ``ids``."""

    ids: np.ndarray
    importance: np.ndarray | None = None
    interest: np.ndarray | None = None

    def __post_init__(self) -> None:
        _check_bulk("SetRanks", self.ids, importance=self.importance, interest=self.interest)


@dataclass(frozen=True, slots=True, eq=False)
class SaveOpic:
    """The crawl's OPIC checkpoint (schema version 5): ``data``, the whole state as the
    crawl encodes it (pages, G and their URLs), replaces the stored one; ``urls.opic_cash``,
    ``opic_history`` and ``opic_estimate`` of the stored ``urls`` get ``cash``, ``history``
    and ``estimate``, and ``urls.importance`` gets ``importance`` when OPIC is the planner's
    importance source (N·estimate, mean 1). URLs not stored yet are skipped (the next
    checkpoint has them)."""

    written_at: float
    clock: float
    data: bytes
    urls: tuple[str, ...]
    cash: np.ndarray
    history: np.ndarray
    estimate: np.ndarray
    importance: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes) or not self.data:
            raise ValueError("SaveOpic.data must be the non-empty bytes of a checkpoint")
        positions = np.arange(len(self.urls), dtype=np.int64)
        _check_bulk("SaveOpic", positions, cash=self.cash, history=self.history,
                    estimate=self.estimate, importance=self.importance)


@dataclass(frozen=True, slots=True, eq=False)
class SetWeights:
    """Bulk refresh weight keys ``urls.weight`` for ``ids`` (NaN: NULL, not refreshed).

    Written by the refresh planner only, which keeps the sums of these keys in the
    ``state`` table (schema version 4 says what the key is).
    """

    ids: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        _check_bulk("SetWeights", self.ids, weights=self.weights)


@dataclass(frozen=True, slots=True, eq=False)
class SetLastModifiedVerdicts:
    """Bulk ``urls.lm_reliable``: whether each page's Last-Modified dates passed the
    reliability test (003 §6.1.2), which its host's verdict counts (schema version 7).
    Written by the refresh planner only."""

    ids: np.ndarray
    reliable: np.ndarray

    def __post_init__(self) -> None:
        _check_bulk("SetLastModifiedVerdicts", self.ids, reliable=self.reliable)


@dataclass(frozen=True, slots=True)
class SetState:
    """Key/value state (S, OPIC clock G, ...); ``value`` is stored as given (JSON-able)."""

    key: str
    value: float | int | str | None

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"SetState.key must be a non-empty string, got {self.key!r}")
        if self.value is not None and not isinstance(self.value, (int, float, str)):
            raise ValueError(f"SetState {self.key!r}: value must be a number, a string or "
                             f"None, got {type(self.value).__name__}")


@dataclass(frozen=True, slots=True)
class FoundSeed:
    """A seed the crawl found itself (table ``seeds``, schema version 9): ``url``, where the
    seed ``redirected_from`` sent it, outside a scope derived from the seeds. Stored so the
    scope holds its host at the next start too; a seed already stored is left as it is."""

    url: str
    priority: int
    added_at: float
    redirected_from: str


@dataclass(frozen=True, slots=True)
class HostDelay:
    """A host's robots.txt Crawl-delay as last read (``hosts.crawl_delay``, schema 10): a
    restart spaces the host's first request by it, before its robots.txt is read again.
    ``started_at``: when that robots.txt request started, a request like any other: the
    host's ``last_fetch`` when later than the one stored (a restart waits from it)."""

    host: str
    crawl_delay_s: float
    started_at: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"HostDelay.host must be a non-empty string, got {self.host!r}")
        if not self.crawl_delay_s >= 0:
            raise ValueError(f"HostDelay {self.host}: crawl delay must be >= 0, "
                             f"got {self.crawl_delay_s!r}")


@dataclass(frozen=True, slots=True)
class HostPause:
    """A host asked to be left alone until ``until`` (Retry-After of a 429/503, or the
    back-off after failures; ``hosts.paused_until``, schema 11): a restart keeps the pause
    instead of asking again at once."""

    host: str
    until: float

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"HostPause.host must be a non-empty string, got {self.host!r}")
        if not math.isfinite(self.until):
            raise ValueError(f"HostPause {self.host}: until must be finite, got {self.until!r}")


@dataclass(frozen=True, slots=True)
class JobRun:
    """One run of a periodic job (ranking, planner...), for ``xyro status``."""

    name: str
    started: float
    finished: float | None
    status: str
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class UnitSpent:
    """The crawl bandwidth of one refresh time unit, as spent (schema version 6; DESIGN.md
    §6: G page fetches per unit). Written when the unit ends, when the crawl stops in it and
    while it runs (``ended`` False), each write replacing the unit's row: by the crawl after
    each round of dispatches, ahead of those fetches' records in the writer's queue, so a
    crash never keeps page records the stored count misses (one row per unit and batch is
    written, the last submitted).

    ``fetched`` counts page fetches dispatched against the budget ``bandwidth`` (G), split by
    frontier level: ``refresh`` (due pages), ``discovery`` (unread pages), ``urgent`` (seeds,
    operator requests). ``carried_over``: refresh-level pages still queued when the unit
    ended, fetched first in the next one (None while the unit runs)."""

    unit: int
    unit_s: float
    bandwidth: int
    fetched: int
    refresh: int
    discovery: int
    urgent: int
    carried_over: int | None
    ended: bool
    updated_at: float

    def __post_init__(self) -> None:
        if self.fetched != self.refresh + self.discovery + self.urgent:
            raise ValueError(f"UnitSpent of unit {self.unit}: fetched {self.fetched} is not "
                             "refresh + discovery + urgent")


@dataclass(frozen=True, slots=True)
class XmlVersion:
    """One stored version of an XML document (Xyleme's version data).

    ``storage_key`` says where the bytes are (the loader's store); ``signature`` is the
    signature of the canonical (C14N) form, ``md5`` the one of the raw bytes.
    """

    url: str
    md5: bytes
    c14n_signature: bytes | None
    fetched_at: float
    size: int
    storage_key: str
    valid: bool | None
    validation_error: str | None = None
    dtd_url: str | None = None
    schema_url: str | None = None


@dataclass(frozen=True, slots=True)
class SetPending:
    """Status data: ``url`` waits for the documents in ``waiting_for`` (DTDs, entities)."""

    url: str
    waiting_for: tuple[str, ...]
    since: float
    reason: str


@dataclass(frozen=True, slots=True)
class ClearPending:
    """``url`` no longer waits (loaded, or given up)."""

    url: str


Op = Union[FetchRecord, Enqueue, Refuse, Dequeue, SetRefresh, SetRanks, SaveOpic, SetState,
           JobRun, XmlVersion, SetPending, ClearPending, SetWeights, SetLastModifiedVerdicts,
           UnitSpent, FoundSeed, HostDelay, HostPause]


def _check_bulk(what: str, ids: np.ndarray, **columns: np.ndarray | None) -> None:
    if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError(f"{what}.ids must be a 1-D integer numpy array")
    for name, col in columns.items():
        if col is None:
            continue
        if not isinstance(col, np.ndarray) or col.shape != ids.shape:
            raise ValueError(f"{what}.{name} must be a numpy array shaped like ids "
                             f"{ids.shape}, got {getattr(col, 'shape', type(col).__name__)}")


class FrontierRow(NamedTuple):
    """One persisted frontier entry, as a restarted crawler reloads it."""

    url_id: int
    url: str
    priority: int
    depth: int
    not_before: float


@dataclass(frozen=True, eq=False)
class Graph:
    """Out-link graph as CSR in URL-id order.

    URL ids are dense 1..n, so row ``k`` is URL id ``k + 1`` (``ids[k] == k + 1``) and
    ``indices`` hold 0-based rows. Row k's children are ``indices[indptr[k]:indptr[k+1]]`` in
    page order, duplicates and self-links kept as the page had them. Unfetched pages have
    no row entries. ``xml_mask[k]`` is True for XML documents; ``types[k]`` indexes
    :data:`TYPE_CODES`.
    """

    indptr: np.ndarray  # int64[n + 1]
    indices: np.ndarray  # int32[m]
    n: int
    ids: np.ndarray  # int64[n]
    xml_mask: np.ndarray  # bool[n]
    types: np.ndarray  # int8[n]

    @property
    def m(self) -> int:
        return int(self.indices.shape[0])
