"""OPIC inside the crawl: every fetched page is a visit (000 §2–3, 004; DESIGN.md §5).

The numeric state is :class:`ranking.opic.OpicState` (cash, history, the clock G, the
virtual page V); this module gives it the crawl's vocabulary:

- pages are URLs, numbered in the order the crawl meets them (a dict URL → page id);
- :meth:`OnlineOpic.visit` is called for every page the crawl fetched and parsed, with the
  links it found (HTML and XML links alike): the page hands its cash to its children and V.
  A 304 carries no links and is not a visit (its cash waits for the next full read);
- :meth:`OnlineOpic.cash` is the frontier's key for unread pages (Greedy order);
- focus (000 §3 "Focused crawling"): a newly found link that looks like an XML document,
  feed or sitemap, or matches a configured pattern, gets ``boost`` times a page's mean cash
  from V at once (as much as V holds), so the total cash never changes;
- :meth:`checkpoint` encodes the whole state with the pages' URLs (a compressed ``.npz``) for
  the metadata writer (:class:`metadata.SaveOpic`), and :meth:`from_checkpoint` continues
  from it after a restart: same pages, same cash, same G;
- :meth:`replay` is :meth:`visit` for a fetch the store holds but the restored state missed
  (fetched after the checkpoint, or with OPIC off): :mod:`xyro.crawl.opic_replay` calls it
  at start, through the same visit path, so the state agrees with the store again.

Thread-safety: visits, grants and checkpoints take the lock (the dispatcher visits; the
daemon's checkpoint timer and ``xyro status`` read). :meth:`cash` reads without it, since
the frontier calls it under its own lock: under the GIL it reads one page's stored cash and
the offset, a value at most one visit old, which is all an ordering key needs.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metadata import SaveOpic
from ranking.opic import ESTIMATES, OpicCheckpoint, OpicParams, OpicState
from xyro.clock import Clock

_URLS_KEY = "urls"


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
        if page is None or None in ids:  # new pages: about one visit in two
            page, ids = self._add_new(url, children, likely_xml)
        self._state.visit_known(page, ids)  # type: ignore[arg-type]

    def cash(self, url: str) -> float:
        """The cash of ``url`` now (0.0 for a URL OPIC has not met): the Greedy key."""
        page = self._ids.get(url)
        return 0.0 if page is None else self._state.cash_of(page)

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
        """Continue from :meth:`checkpoint`'s bytes. ValueError if they do not decode."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"the stored OPIC checkpoint does not decode ({exc}); "
                             "delete it (DELETE FROM opic_checkpoint) to start OPIC afresh"
                             ) from exc
        raw = arrays.pop(_URLS_KEY, None)
        if raw is None:
            raise ValueError("the stored OPIC checkpoint has no URL list; delete it "
                             "(DELETE FROM opic_checkpoint) to start OPIC afresh")
        text = raw.tobytes().decode()
        urls = text.split("\n") if text else []
        state = OpicState.restore(OpicCheckpoint.from_arrays(arrays))
        return cls(state.params, focus, estimate, state=state, urls=urls)


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
