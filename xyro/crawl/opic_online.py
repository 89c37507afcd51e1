"""OPIC inside the crawl: every fetched page is a visit (000 §2–3, 004; DESIGN.md §5).

The numeric state is :class:`ranking.opic.OpicState` (cash, history, the clock G, the
virtual page V); this module gives it the crawl's vocabulary:

- pages are URLs, numbered in the order the crawl meets them (a dict URL → page id);
- :meth:`OnlineOpic.visit` is called for every page the crawl fetched and parsed, with the
  links it found (HTML and XML links alike): the page hands its cash to its children and V.
  A 304 carries no links and is not a visit (its cash waits for the next full read);
- :attr:`OnlineOpic.cash` gives a URL's cash, and its ``key`` the frontier's Greedy key for
  unread pages: the cash less the running total of V's per-page handouts since this object
  was made. V's handouts raise every page's cash alike, so that key orders pages exactly as
  their current cash does and stays put for a page that gains nothing of its own, as a
  queue filed long ago needs (:mod:`xyro.crawl.cash_queue`);
- focus (000 §3 "Focused crawling"): a newly found link that looks like an XML document,
  feed or sitemap, or matches a configured pattern, gets ``boost`` times a page's mean cash
  from V at once (as much as V holds), so the total cash never changes;
- :meth:`checkpoint` encodes the whole state with the pages' URLs (a compressed ``.npz``) for
  the metadata writer (:class:`metadata.SaveOpic`), and :meth:`from_checkpoint` continues
  from it after a restart: same pages, same cash, same G, same damping (its history was
  accumulated with it). Bytes that do not decode (a truncated or altered blob) raise
  :class:`OpicCheckpointError`, which says how to start afresh. A checkpoint written under
  the ``inflow`` or ``papers`` estimate keeps no Adaptive OPIC histories: continued under a
  window estimate, :meth:`keep_window_histories` gives each page a default history at the
  rate its inflow estimate gives, and keeps them from then on;
- :meth:`replay` is :meth:`visit` for a fetch the store holds but the restored state missed
  (fetched after the checkpoint, or with OPIC off): :mod:`xyro.crawl.opic_replay` calls it
  at start, through the same visit path, so the state agrees with the store again.

Thread-safety: visits, grants and checkpoints take the lock (the dispatcher visits; the
daemon's checkpoint timer and ``xyro status`` read). :attr:`cash` reads without it, since
the frontier calls it under its own lock: under the GIL it reads one page's stored cash and
the offset, a value at most one visit old. The Greedy key must be exact, since a queue keeps
it as long as the page waits: it is read between two looks at a visit counter that is odd
while a visit runs, and under the lock when a visit ran meanwhile.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from metadata import SaveOpic
from ranking.opic import ESTIMATES, OpicCheckpoint, OpicParams, OpicState
from ranking.opic_adaptive import WINDOW_ESTIMATES, AdaptiveParams
from xyro.clock import Clock
from xyro.errors import XyroError

if TYPE_CHECKING:
    from xyro.crawl.cash_queue import GreedyCash

_URLS_KEY = "urls"
_AFRESH = "delete it (DELETE FROM opic_checkpoint) to start OPIC afresh from the fetches stored"


class OpicCheckpointError(XyroError, ValueError):
    """The stored OPIC checkpoint cannot be continued from (it does not decode, or its parts
    disagree). A restart meets the same row: exit 2, so that systemd's
    ``RestartPreventExitStatus=2`` does not restart into it every few seconds."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class Focus:
    """Extra cash for newly found pages that look wanted (000 §3).

    ``xml``: links the extractors flag as likely XML (``.xml``, feeds, sitemaps, XML link
    kinds); ``patterns``: regular expressions searched in the URL; ``boost``: the grant, in
    mean page cash (total / pages), taken from V as far as V holds it.
    """

    xml: bool = True
    patterns: tuple[str, ...] = ()
    boost: float = 1.0

    def wants(self, url: str, likely_xml: bool, compiled: Sequence[re.Pattern[str]]) -> bool:
        if self.xml and likely_xml:
            return True
        return bool(compiled) and any(p.search(url) for p in compiled)


@dataclass(frozen=True, slots=True)
class OpicCheckpointData:
    """What one checkpoint hands the writer: the encoded state and the per-URL columns."""

    clock: float
    data: bytes
    urls: tuple[str, ...]
    cash: np.ndarray
    history: np.ndarray
    estimate: np.ndarray


class _Cash:
    """:attr:`OnlineOpic.cash`: called with a URL, its cash now; ``key``, its Greedy key."""

    __slots__ = ("key", "_opic")

    def __init__(self, opic: OnlineOpic) -> None:
        self._opic = opic
        self.key = opic.greedy_key

    def __call__(self, url: str) -> float:
        return self._opic.cash_now(url)


class OnlineOpic:
    """The crawl's OPIC state: URL → page id, visits, focus, estimates, checkpoints."""

    def __init__(self, params: OpicParams = OpicParams(), focus: Focus | None = None,
                 estimate: str = "inflow", *, state: OpicState | None = None,
                 urls: Sequence[str] = ()) -> None:
        if estimate not in ESTIMATES:
            raise ValueError(f"OPIC estimate {estimate!r} is unknown; use one of {ESTIMATES}")
        self._state = state if state is not None else OpicState.create(0, params)
        if self._state.n != len(urls):
            raise ValueError(f"OPIC state of {self._state.n} pages given {len(urls)} URLs")
        self._urls: list[str] = list(urls)
        self._ids: dict[str, int] = {url: i for i, url in enumerate(self._urls)}
        self._focus = focus
        self._patterns = tuple(re.compile(p) for p in focus.patterns) if focus else ()
        self._estimate = estimate
        self._lock = threading.Lock()
        self.visits = 0
        self.replayed = 0  # visits replayed from the store at start (not in ``visits``)
        self.granted = 0.0  # focus cash handed out since start
        # Greedy key (module doc): V's cash handed to each page since this object was made,
        # and a counter, odd while a visit runs, to read the key without the lock.
        self._handed = 0.0
        self._writes = 0
        self.cash: GreedyCash = _Cash(self)

    # -- the crawl's calls ------------------------------------------------------------------

    def visit(self, url: str, children: Sequence[str],
              likely_xml: Sequence[bool] | None = None) -> None:
        """Page ``url`` was read and links to ``children`` (flags for focus: likely XML)."""
        with self._lock:
            self._visit(url, children, likely_xml)
            self.visits += 1

    def replay(self, url: str, children: Sequence[str],
               likely_xml: Sequence[bool] | None = None) -> None:
        """:meth:`visit` of a fetch the store holds but this state missed, at start
        (:mod:`xyro.crawl.opic_replay`); counted in ``replayed``, not ``visits``."""
        with self._lock:
            self._visit(url, children, likely_xml)
            self.replayed += 1

    def was_visited(self) -> Callable[[str], bool]:
        """A test of "this state visited ``url`` at least once", as the state is now (later
        visits do not change its answers): what a replay at start checks the store against."""
        with self._lock:
            visits = self._state.visits()
            ids = self._ids
        n = len(visits)

        def visited(url: str) -> bool:
            page = ids.get(url)
            return page is not None and page < n and bool(visits[page])
        return visited

    def visited_pages(self) -> int:
        """How many pages this state visited at least once."""
        with self._lock:
            return int(np.count_nonzero(self._state.visits()))

    def _visit(self, url: str, children: Sequence[str],
               likely_xml: Sequence[bool] | None) -> None:
        """One visit (lock held): new pages added with their focus grants, then OPIC's."""
        get = self._ids.get
        page = get(url)
        ids = list(map(get, children))
        state = self._state
        before = state.virtual_history
        self._writes += 1
        try:
            if page is None or None in ids:  # new pages: about one visit in two
                page, ids = self._add_new(url, children, likely_xml)
            state.visit_known(page, ids)  # type: ignore[arg-type]
            # V flushes at most once a visit, to the n pages known then, the same share each
            self._handed += (state.virtual_history - before) / state.n
        finally:
            self._writes += 1

    def cash_now(self, url: str) -> float:
        """The cash of ``url`` now (0.0 for a URL OPIC has not met); also :attr:`cash`."""
        page = self._ids.get(url)
        return 0.0 if page is None else self._state.cash_of(page)

    def greedy_key(self, url: str) -> float:
        """``url``'s cash less V's per-page handouts so far (module doc); also
        ``cash.key``. Exact: read again under the lock if a visit ran meanwhile."""
        writes = self._writes
        if not writes & 1:
            page = self._ids.get(url)
            key = (0.0 if page is None else self._state.cash_of(page)) - self._handed
            if self._writes == writes:
                return key
        with self._lock:
            page = self._ids.get(url)
            return (0.0 if page is None else self._state.cash_of(page)) - self._handed

    def _add_new(self, url: str, children: Sequence[str],
                 likely_xml: Sequence[bool] | None) -> tuple[int, list[int]]:
        """Add the pages among ``url`` and ``children`` not met yet (lock held), with their
        focus grants; returns the ids of ``url`` and ``children``."""
        ids = self._ids
        new: dict[str, bool] = {}  # new URL -> likely XML, in the order met
        if url not in ids:
            new[url] = False
        flags = likely_xml if likely_xml is not None else (False,) * len(children)
        for child, xml in zip(children, flags):
            if child not in ids:
                new[child] = new.get(child, False) or xml
        first = self._state.add_pages(len(new), self._focus_cash(new))
        for k, added in enumerate(new):
            ids[added] = first + k
        self._urls.extend(new)
        return ids[url], [ids[c] for c in children]

    def _focus_cash(self, new: dict[str, bool]) -> float | np.ndarray:
        """Each new page's focus grant from V (0.0 for all when none is wanted)."""
        focus = self._focus
        if focus is None or focus.boost <= 0:
            return 0.0
        patterns = self._patterns
        wanted = [focus.wants(u, xml, patterns) for u, xml in new.items()]
        count = sum(wanted)
        if not count:
            return 0.0
        state = self._state
        each = min(focus.boost * state.total / max(state.n + len(new), 1),
                   state.virtual_cash / count)
        if each <= 0:
            return 0.0
        self.granted += each * count
        return each if count == len(new) else np.where(wanted, each, 0.0)

    # -- read-outs --------------------------------------------------------------------------

    def snapshot(self) -> dict[str, float | int]:
        """Counters for ``xyro status`` and the metrics endpoint."""
        with self._lock:
            s = self._state
            return {"pages": s.n, "visits": self.visits, "clock_g": s.clock,
                    "virtual_cash": s.virtual_cash, "total_cash": s.total_cash(),
                    "focus_granted": self.granted}

    def facts(self) -> dict[str, float | int | None]:
        """The damping c the state runs with, its mean reads (visits) per page and its pages
        never read, for comparisons with an offline ranking (``xyro rank --compare``)."""
        with self._lock:
            visits = self._state.visits()
            return {"opic_damping": self._state.params.damping,
                    "opic_reads_per_page": round(float(visits.mean()), 3) if visits.size else 0.0,
                    "opic_unread_pages": int((visits == 0).sum())}

    def estimates(self) -> tuple[list[str], np.ndarray]:
        """(URLs, estimate per URL; sums to 1) with the configured estimate."""
        with self._lock:
            return list(self._urls), self._state.estimate(self._estimate)

    def __len__(self) -> int:
        return self._state.n

    def load_kernels(self) -> None:
        """Run every compiled kernel a crawl calls (visits of new and known pages, V's
        flush, the estimate, a checkpoint) once, on a scratch state with these parameters;
        this state is not touched.

        Numba loads a kernel's machine code at its first call, and its first kernel brings
        up the compiler's runtime: about half a second on a 2-core machine even from the
        on-disk cache. The composition root pays it when a crawl is built, rather than the
        dispatcher at the first fetched page while every fetch thread waits on it.
        """
        scratch = OnlineOpic(self._state.params, self._focus, self._estimate)
        scratch.visit("a", ["b", "c"], [False, True])
        scratch.visit("b", ["a", "c"])
        scratch.visit("c", [])
        scratch.checkpoint()

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint(self) -> OpicCheckpointData:
        """The whole state, encoded, with the columns the writer puts on ``urls``."""
        with self._lock:
            state = self._state
            arrays = state.checkpoint().to_arrays()
            urls = tuple(self._urls)
            cash, history = state.cash(), state.history()
            estimate = state.estimate(self._estimate)
            clock = state.clock
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays,
                            **{_URLS_KEY: np.frombuffer("\n".join(urls).encode(), np.uint8)})
        return OpicCheckpointData(clock, buffer.getvalue(), urls, cash, history, estimate)

    @classmethod
    def from_checkpoint(cls, data: bytes, focus: Focus | None = None,
                        estimate: str = "inflow") -> OnlineOpic:
        """Continue from :meth:`checkpoint`'s bytes; :class:`OpicCheckpointError` (a
        ValueError) if they do not decode into a consistent state."""
        arrays = _decode(data)
        raw = arrays.pop(_URLS_KEY, None)
        if raw is None:
            raise OpicCheckpointError(f"the stored OPIC checkpoint has no URL list; {_AFRESH}")
        try:
            text = raw.tobytes().decode()
            urls = text.split("\n") if text else []
            state = OpicState.restore(OpicCheckpoint.from_arrays(arrays))
        except (ValueError, TypeError, IndexError) as exc:
            raise OpicCheckpointError(f"the stored OPIC checkpoint is inconsistent ({exc}); "
                                      f"{_AFRESH}") from exc
        if state.n != len(urls):
            raise OpicCheckpointError(f"the stored OPIC checkpoint holds {state.n} pages but "
                                      f"{len(urls)} URLs; {_AFRESH}")
        return cls(state.params, focus, estimate, state=state, urls=urls)

    def continue_under(self, damping: float, estimate: str) -> list[str]:
        """A restored state under the configuration's ``damping`` and ``estimate``: keeps
        its own damping, gains window histories if ``estimate`` needs them; returns what
        differs from the configuration, each a warning for the log."""
        notes = []
        kept = self._state.params.damping
        if kept != damping:
            # DESIGN.md §5: OPIC's fixpoint is the teleport PageRank with damping c; the
            # history was accumulated with the old c, and switching would mix two fixpoints.
            notes.append(
                f"continued with its own damping c = {kept}, not ranking.damping = "
                f"{damping}: its history was accumulated with c = {kept}, and a mixture "
                f"would estimate neither PageRank; to run OPIC with c = {damping}, stop the "
                "crawl and DELETE FROM opic_checkpoint (the next start rebuilds OPIC by "
                "replaying the stored fetches, one visit per page)")
        if estimate in WINDOW_ESTIMATES and self.keep_window_histories():
            notes.append(
                f"written under another ranking.opic.estimate, it kept no Adaptive OPIC "
                f"histories: for estimate {estimate} each of its {len(self)} pages starts "
                "with a default history at the rate of its inflow estimate, refined as "
                "pages are read again")
        return notes

    def keep_window_histories(self, adaptive: AdaptiveParams = AdaptiveParams()) -> bool:
        """Keep Adaptive OPIC histories from now on if this state has none (restored from a
        checkpoint written under another estimate); True if it had none. Each page starts
        with a default history at the rate of its ``inflow`` estimate
        (:meth:`ranking.opic.OpicState.with_adaptive`), so the window estimates go on from
        the importance known rather than from uniform."""
        with self._lock:
            if self._state.params.adaptive is not None:
                return False
            self._state = self._state.with_adaptive(adaptive)
            return True


def _decode(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of a checkpoint's bytes, or :class:`OpicCheckpointError`."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    # A truncated or altered blob makes zipfile, zlib or numpy's header parser raise what it
    # meets first (a bad zip, a zlib error, an unknown compression method byte, a header
    # that does not tokenize, an OSError, ValueError or EOFError): all mean the same.
    except Exception as exc:  # noqa: BLE001
        raise OpicCheckpointError(f"the stored OPIC checkpoint does not decode "
                                  f"({type(exc).__name__}: {exc}); {_AFRESH}") from exc


class OpicCheckpoints:
    """Writes the crawl's OPIC state through the metadata writer every ``interval_s`` of
    clock time and when a crawl stops (:class:`metadata.SaveOpic`). With ``importance``
    (``ranking.importance: opic``) the planner's ``urls.importance`` becomes N·estimate."""

    def __init__(self, opic: OnlineOpic, submit: Callable[[Any], object], clock: Clock,
                 interval_s: float, importance: bool = False) -> None:
        self.opic = opic
        self._submit = submit
        self._clock = clock
        self._interval_s = interval_s
        self._importance = importance
        self._last = clock.now()
        self.written = 0

    def due(self, now: float) -> bool:
        return now - self._last >= self._interval_s

    def save(self) -> None:
        """Checkpoint now (the dispatcher calls this; a crash loses at most one interval)."""
        cp = self.opic.checkpoint()
        now = self._clock.now()
        importance = cp.estimate * len(cp.urls) if self._importance else None
        self._submit(SaveOpic(now, cp.clock, cp.data, cp.urls, cp.cash, cp.history,
                              cp.estimate, importance))
        self._last = now
        self.written += 1
