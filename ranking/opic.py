"""OPIC, on-line page importance: cash, history and the clock G, on arrays (000 §2, 004 §2,
DESIGN.md §5 "OPIC").

Every known page i holds cash C[i] and a history H[i]; G, the total cash handed out by
visits, is the clock. Visiting page i with children ch (the ids of its links, a page linked
twice gets two shares) does

    H[i] += C[i];  G += C[i];  each child gets c·C[i]/|ch|;  V gets (1 − c)·C[i];  C[i] = 0

with all of C[i] going to V when i has no known children. The virtual page V closes the
graph (000 §1 "On the Web": every page links to V, V links to every page); its cash is
handed to all known pages at once — when it holds ``virtual_flush`` times the mean page cash,
or on ``flush_virtual()`` — as one running offset added to every page's cash, not n
additions. With that split the fixpoint is the ``teleport`` PageRank of
``ranking.importance.direct_importance`` with damping c (dangling mass spread uniformly).
The total cash (pages, offset and V) never changes; a new page starts with no cash (or cash
taken from V), and focus grants move cash from V to chosen pages (000 §3 "Focused crawling").

Estimates (normalized to sum 1 over the known pages; uniform while nothing has flowed):

- ``papers``: (H + C)/(G + 1) (000 §2, 004 §2), i.e. (H + C)/Σ(H + C), equal to the papers'
  formula for a total cash of 1 when V holds nothing;
- ``inflow`` (default): H + C − C₀, C₀ the endowment (initial cash and grants), normalized:
  the cash received through links and V only; it converges far faster (DESIGN.md §5);
- ``fixed_window``, ``variable_window``, ``bao``: Adaptive OPIC (``ranking.opic_adaptive``).

Storage: cash is kept relative to the running offset (C[i] = stored[i] + offset); the offset
is folded back into the stored cash once it exceeds the mean page cash, an O(n) pass every
few reads per page, so rounding stays at the scale of a page's own cash. Per-page arrays are
buffers with amortized (doubling) growth; ``n`` pages are in use.

Visits run in one compiled kernel (numba, in ``ranking.opic_select``): one page
(``OpicState.visit``), a batch of pages with their children as CSR rows (``visit_rows``), or
runs under a selection policy over a stored graph (``ranking.opic_select``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from ranking.opic_adaptive import WINDOW_ESTIMATES, AdaptiveParams, bao_rates, window_rates
from ranking.opic_select import (CLOCK, OFFSET, RECENT, TOTAL, VIRTUAL, VIRTUAL_HISTORY,
                                 flush_virtual_kernel, visit_one_kernel, visit_rows_kernel)

ESTIMATES = ("inflow", "papers") + WINDOW_ESTIMATES

PAGE_FIELDS = ("stored_cash", "history", "endowment", "pending", "born", "visits")
ADAPTIVE_FIELDS = ("bao_history", "bao_clock", "ring_cash", "ring_time", "ring_len",
                   "ring_head")
INT_FIELDS = ("visits", "ring_len", "ring_head")
GRANT_SLACK = 1e-12  # relative: grants may exceed V by rounding, not more


@dataclass(frozen=True)
class OpicParams:
    """``damping``: c in (0, 1), the share of a visit's cash that goes to its children.
    ``virtual_flush``: V hands its cash to all pages once it holds this many times the mean
    page cash (0: after every visit); a larger value keeps cash in V for focus grants, and
    n or more (V would have to hold all the cash) keeps it there until ``flush_virtual()``:
    the pages then run dry and the clock G stops, which tests use to follow cash by hand.
    ``adaptive``: window parameters to keep Adaptive OPIC histories, None for none."""

    damping: float = 0.85
    virtual_flush: float = 1.0
    adaptive: AdaptiveParams | None = None

    def __post_init__(self) -> None:
        c = self.damping
        if not (isinstance(c, (int, float)) and not isinstance(c, bool) and 0.0 < c < 1.0):
            raise ValueError(f"damping c={c!r} is outside (0, 1); 0.85 is usual "
                             "(c = 1 would leave no cash for the virtual page)")
        f = self.virtual_flush
        if not (isinstance(f, (int, float)) and math.isfinite(f) and f >= 0):
            raise ValueError(f"virtual_flush={f!r} must be a finite number >= 0 "
                             "(in mean page cash; 0 = hand V's cash out after every visit)")
        if self.adaptive is not None and not isinstance(self.adaptive, AdaptiveParams):
            raise ValueError(f"adaptive={self.adaptive!r} must be AdaptiveParams or None")

    def kernel_array(self) -> np.ndarray:
        a = self.adaptive
        return np.array([self.damping, self.virtual_flush,
                         a.window if a else 1.0, 1.0 if a else 0.0,
                         -1.0 if a is None or a.default_history is None else a.default_history,
                         a.recent_weight if a else 0.0])


@dataclass(frozen=True, eq=False)
class OpicCheckpoint:
    """Everything an ``OpicState`` holds, trimmed to its n pages: restoring it gives the
    same state bit for bit. A page's cash is ``stored_cash + offset``. ``to_arrays`` /
    ``from_arrays`` convert to and from a dict of arrays (e.g. for ``numpy.savez``)."""

    params: OpicParams
    total: float
    clock: float
    virtual_cash: float
    offset: float
    virtual_history: float
    recent_default: float
    stored_cash: np.ndarray
    history: np.ndarray
    endowment: np.ndarray
    pending: np.ndarray
    born: np.ndarray
    visits: np.ndarray
    bao_history: np.ndarray
    bao_clock: np.ndarray
    ring_cash: np.ndarray
    ring_time: np.ndarray
    ring_len: np.ndarray
    ring_head: np.ndarray

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays (scalars as 0-d arrays); the params as ``params_*`` entries."""
        out: dict[str, np.ndarray] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "params":
                out[f.name] = np.array(value)
        p, a = self.params, self.params.adaptive
        out["params_core"] = np.array([p.damping, p.virtual_flush])
        out["params_adaptive"] = np.array([] if a is None else [
            a.window, a.visits, a.measures,
            np.nan if a.default_history is None else a.default_history, a.recent_weight])
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> OpicCheckpoint:
        """The checkpoint back from ``to_arrays``' dict; ValueError if an entry is missing."""
        names = [f.name for f in fields(cls) if f.name != "params"]
        missing = [k for k in names + ["params_core", "params_adaptive"] if k not in arrays]
        if missing:
            raise ValueError(f"OPIC checkpoint arrays lack {missing}; pass the dict "
                             "OpicCheckpoint.to_arrays() produced")
        core = np.asarray(arrays["params_core"], dtype=np.float64)
        ad = np.asarray(arrays["params_adaptive"], dtype=np.float64)
        adaptive = None if ad.size == 0 else AdaptiveParams(
            float(ad[0]), int(ad[1]), int(ad[2]),
            None if math.isnan(ad[3]) else float(ad[3]), float(ad[4]))
        params = OpicParams(float(core[0]), float(core[1]), adaptive)
        values = {k: np.asarray(arrays[k]) for k in names}
        for k in names[:6]:
            values[k] = float(values[k])
        return cls(params=params, **values)


def _empty_adaptive(params: OpicParams, n: int) -> dict[str, np.ndarray]:
    m = params.adaptive.ring_size if params.adaptive else 0
    rows = n if params.adaptive else 0
    return {"bao_history": np.zeros(rows), "bao_clock": np.zeros(rows),
            "ring_cash": np.zeros((rows, m)), "ring_time": np.zeros((rows, m)),
            "ring_len": np.zeros(rows, np.int64), "ring_head": np.zeros(rows, np.int64)}


class OpicState:
    """The OPIC state of n known pages (ids 0..n−1) plus the virtual page V (module doc).

    Build with ``create`` (n pages sharing ``total`` cash) or ``restore``. Not thread-safe:
    one owner visits, grants and reads estimates."""

    def __init__(self, params: OpicParams, n: int, scalars: np.ndarray,
                 buffers: dict[str, np.ndarray]) -> None:
        self.params = params
        self.n = n
        self._scalars = scalars
        self._buf = buffers
        self._prm = params.kernel_array()
        self._kernel_args: tuple | None = None  # kernel_buffers(), rebuilt when buffers grow

    # ---- construction, checkpoint ---------------------------------------------------------

    @classmethod
    def create(cls, n: int, params: OpicParams = OpicParams(), total: float = 1.0) -> OpicState:
        """n pages with total/n cash each (the papers' start, 000 §2); with n = 0, V holds
        the total until pages are added and given cash (``add_pages(k, cash=...)``)."""
        _check_count(n, "n")
        if not (isinstance(total, (int, float)) and math.isfinite(total) and total > 0):
            raise ValueError(f"total cash {total!r} must be a positive finite number")
        scalars = np.zeros(6)
        scalars[TOTAL] = scalars[VIRTUAL] = float(total)
        scalars[RECENT] = 1.0
        state = cls(params, 0, scalars, {
            "stored_cash": np.zeros(0), "history": np.zeros(0), "endowment": np.zeros(0),
            "pending": np.zeros(0), "born": np.zeros(0), "visits": np.zeros(0, np.int64),
            **_empty_adaptive(params, 0)})
        if n:
            state.add_pages(n, cash=float(total) / n)
        return state

    def checkpoint(self) -> OpicCheckpoint:
        """A copy of the whole state (exact: ``restore`` gives it back bit for bit)."""
        s, n = self._scalars, self.n
        trimmed = {k: self._buf[k][:n].copy() if len(self._buf[k]) else self._buf[k].copy()
                   for k in PAGE_FIELDS + ADAPTIVE_FIELDS}
        return OpicCheckpoint(self.params, float(s[TOTAL]), float(s[CLOCK]),
                              float(s[VIRTUAL]), float(s[OFFSET]), float(s[VIRTUAL_HISTORY]),
                              float(s[RECENT]), **trimmed)

    @classmethod
    def restore(cls, checkpoint: OpicCheckpoint) -> OpicState:
        """The state a checkpoint was taken from; ValueError if its arrays disagree."""
        cp = checkpoint
        n = len(np.asarray(cp.stored_cash))
        expected = _empty_adaptive(cp.params, n)
        buffers: dict[str, np.ndarray] = {}
        for k in PAGE_FIELDS + ADAPTIVE_FIELDS:
            value = np.asarray(getattr(cp, k))
            shape = (n,) if k in PAGE_FIELDS else expected[k].shape
            if value.shape != shape:
                raise ValueError(f"OPIC checkpoint field {k} has shape {value.shape}, "
                                 f"expected {shape} for {n} pages; the checkpoint is "
                                 "inconsistent (restore it from one to_arrays() dict)")
            dtype = np.int64 if k in INT_FIELDS else np.float64
            buffers[k] = np.array(value, dtype=dtype)
        scalars = np.array([cp.total, cp.clock, cp.virtual_cash, cp.offset,
                            cp.virtual_history, cp.recent_default], dtype=np.float64)
        return cls(cp.params, n, scalars, buffers)

    def with_adaptive(self, adaptive: AdaptiveParams) -> OpicState:
        """A copy of this state, kept without Adaptive OPIC histories, that keeps them from
        now on (this one is unchanged; ValueError if it has them). Each page starts with
        the default history (``ranking.opic_adaptive``) at the rate of its ``inflow``
        estimate, not a new page's rate: all pages receive about one unit of cash per unit
        of G, so that estimate is a rate, and the best guess of what each page receives."""
        if self.params.adaptive is not None:
            raise ValueError("this OPIC state already keeps Adaptive OPIC histories")
        params = replace(self.params, adaptive=adaptive)
        rates = self.estimate("inflow")
        state = OpicState.restore(replace(self.checkpoint(), params=params,
                                          **_empty_adaptive(params, self.n)))
        state._default_history(slice(0, self.n), rates)
        return state

    # ---- read-outs -----------------------------------------------------------------------

    @property
    def clock(self) -> float:
        """G: the total cash handed out by visits so far."""
        return float(self._scalars[CLOCK])

    @property
    def virtual_cash(self) -> float:
        """The cash V holds (not yet handed to the pages)."""
        return float(self._scalars[VIRTUAL])

    @property
    def virtual_history(self) -> float:
        """All the cash V has handed to the pages so far (its flushes)."""
        return float(self._scalars[VIRTUAL_HISTORY])

    @property
    def total(self) -> float:
        """The total cash the state was created with (the invariant)."""
        return float(self._scalars[TOTAL])

    def cash_of(self, page: int) -> float:
        """C[page] in O(1) (``page`` a known id; no check: the crawl's hot path)."""
        return float(self._buf["stored_cash"][page] + self._scalars[OFFSET])

    def cash(self) -> np.ndarray:
        """C[i] of every known page (a new array)."""
        return self._buf["stored_cash"][:self.n] + self._scalars[OFFSET]

    def history(self) -> np.ndarray:
        """H[i]: all the cash page i handed out at its visits (a copy)."""
        return self._buf["history"][:self.n].copy()

    def endowment(self) -> np.ndarray:
        """C₀[i]: the cash page i was given rather than received (initial cash, grants)."""
        return self._buf["endowment"][:self.n].copy()

    def visits(self) -> np.ndarray:
        """How many times each page was visited (a copy)."""
        return self._buf["visits"][:self.n].copy()

    def total_cash(self) -> float:
        """Σ page cash + V: equals ``total`` up to rounding, whatever happened."""
        s = self._scalars
        return float(self._buf["stored_cash"][:self.n].sum() + self.n * s[OFFSET] + s[VIRTUAL])

    def default_rate(self) -> float:
        """r₀: the rate per unit of G a newly found page is assumed to have
        (``ranking.opic_adaptive``, "Default history")."""
        a = self.params.adaptive
        rho = self._scalars[RECENT] if a is None or a.default_history is None \
            else a.default_history
        return float(rho) / max(self.n, 1)

    def estimate(self, kind: str = "inflow") -> np.ndarray:
        """Importance of every known page, sum 1 (module doc lists the kinds)."""
        if kind not in ESTIMATES:
            raise ValueError(f"estimate kind {kind!r} is unknown; use one of {ESTIMATES}")
        n = self.n
        if kind == "papers":
            values = self._buf["history"][:n] + self.cash()
        elif kind == "inflow":
            values = self._buf["history"][:n] + self.cash() - self._buf["endowment"][:n]
        else:
            values = self.adaptive_rates(kind)
        return _normalized(np.maximum(values, 0.0))

    def adaptive_rates(self, kind: str) -> np.ndarray:
        """Adaptive OPIC's inflow per unit of G of every page, before normalization
        (``ranking.opic_adaptive``); ``kind`` is one of ``WINDOW_ESTIMATES``."""
        if kind not in WINDOW_ESTIMATES:
            raise ValueError(f"adaptive rates kind {kind!r} is unknown; use one of "
                             f"{WINDOW_ESTIMATES}")
        if self.params.adaptive is None:
            raise ValueError(f"{kind!r} needs the Adaptive OPIC histories: create the state "
                             "with OpicParams(adaptive=AdaptiveParams(...))")
        a, b, n = self.params.adaptive, self._buf, self.n
        inflow_now = np.maximum(self.cash() - b["pending"][:n], 0.0)
        if kind == "bao":
            return bao_rates(b["bao_history"][:n], b["bao_clock"][:n], inflow_now, self.clock,
                             a.window)
        return window_rates(kind == "fixed_window", self.clock, a.window, a.visits, inflow_now,
                            b["ring_cash"], b["ring_time"], b["ring_len"], b["ring_head"],
                            self.default_rate())

    def greedy_pick(self, candidates: object | None = None) -> int:
        """The page with the most cash among ``candidates`` (ids; None = all known pages);
        ties go to the first in ``candidates`` (the lowest id for all pages)."""
        stored = self._buf["stored_cash"]  # same order as cash: the offset is common
        if candidates is None:
            if self.n == 0:
                raise ValueError("greedy_pick: no known pages; add_pages first")
            return int(np.argmax(stored[:self.n]))
        ids = self.page_ids(candidates, "candidates")
        if ids.size == 0:
            raise ValueError("greedy_pick: candidates is empty; give at least one page id")
        return int(ids[np.argmax(stored[ids])])

    # ---- changes -------------------------------------------------------------------------

    def add_pages(self, k: int, cash: float | object = 0.0) -> int:
        """Make room for k new pages (ids n..n+k−1, returned: the first) with no cash or
        ``cash`` each (a number or k numbers) taken from V, counted as endowment. With
        Adaptive OPIC they get the default history (``ranking.opic_adaptive``)."""
        _check_count(k, "k")
        if type(cash) is float:  # the crawl's common case: one number, checked without numpy
            if not (cash >= 0 and math.isfinite(cash)):
                raise ValueError("cash must be finite and >= 0 (cash cannot be negative)")
            amounts: float | np.ndarray = cash
            total = cash * k
        else:
            amounts = _amounts(cash, k, "cash")
            total = float(amounts.sum())
        self._take_from_virtual(total, f"add_pages({k}, cash=...)")
        first, self.n = self.n, self.n + k
        self._grow(self.n)
        b, s = self._buf, self._scalars
        new = slice(first, self.n)
        b["stored_cash"][new] = amounts - s[OFFSET]
        b["history"][new] = 0.0
        b["endowment"][new] = amounts
        b["pending"][new] = amounts
        b["born"][new] = s[CLOCK]
        b["visits"][new] = 0
        if self.params.adaptive is not None:
            self._default_history(new)
        return first

    def _default_history(self, new: slice, rate: float | np.ndarray | None = None) -> None:
        """Pages ``new`` received ``rate`` (default: ``default_rate()``) per unit of G
        during the last window (``ranking.opic_adaptive``, "Default history")."""
        b, g, window = self._buf, self._scalars[CLOCK], self.params.adaptive.window
        prior = (self.default_rate() if rate is None else rate) * window
        b["bao_history"][new] = prior
        b["bao_clock"][new] = g
        b["ring_cash"][new] = 0.0
        b["ring_time"][new] = 0.0
        b["ring_time"][new, 0] = g - window
        b["ring_cash"][new, 1] = prior
        b["ring_time"][new, 1] = g
        b["ring_len"][new] = 2
        b["ring_head"][new] = 2 % b["ring_cash"].shape[1]

    def _grow(self, need: int) -> None:
        """Amortized growth: every buffer at least doubles when it runs out."""
        have = len(self._buf["stored_cash"])
        if need <= have:
            return
        size = max(need, 2 * have, 16)
        for k in PAGE_FIELDS + (ADAPTIVE_FIELDS if self.params.adaptive else ()):
            old = self._buf[k]
            new = np.zeros((size,) + old.shape[1:], dtype=old.dtype)
            new[:len(old)] = old
            self._buf[k] = new
        self._kernel_args = None

    def grant(self, pages: object, amounts: float | object) -> None:
        """Focus (000 §3 "Focused crawling"): give ``amounts`` (one number, or one per page)
        of V's cash to ``pages``, as endowment. ValueError, and no change, if V holds less."""
        ids = self.page_ids(pages, "pages")
        values = _amounts(amounts, len(ids), "amounts")
        self._take_from_virtual(float(values.sum()), f"grant to {len(ids)} pages")
        b = self._buf
        for k in ("stored_cash", "endowment", "pending"):
            np.add.at(b[k], ids, values)

    def _take_from_virtual(self, amount: float, what: str) -> None:
        s = self._scalars
        if amount > s[VIRTUAL] * (1 + GRANT_SLACK) + 1e-300:
            raise ValueError(f"{what} needs {amount!r} cash but the virtual page V holds "
                             f"only {s[VIRTUAL]!r}; grant less, or let V accumulate "
                             "(raise OpicParams.virtual_flush, or grant before it flushes)")
        s[VIRTUAL] = max(s[VIRTUAL] - amount, 0.0)

    def flush_virtual(self) -> None:
        """Hand V's cash to all known pages now (one offset); no-op without pages."""
        if self.n:
            flush_virtual_kernel(self.n, self._buf["stored_cash"], self._scalars)

    def visit(self, page: int, children: object = ()) -> float:
        """Visit ``page`` whose links point to the page ids ``children`` (module doc);
        returns the cash it handed out. Ids must be known (``add_pages`` first)."""
        i = self.page_id(page)
        ids = self.page_ids(children, "children")
        handed = float(self._buf["stored_cash"][i] + self._scalars[OFFSET])
        visit_rows_kernel(self, np.array([i], np.int64), np.zeros(1, np.int64),
                          np.array([0, len(ids)], np.int64), ids)
        return handed

    def visit_known(self, page: int, children: Sequence[int] | np.ndarray) -> None:
        """:meth:`visit` without the checks, for a caller that made the ids itself
        (``children``: ids below n; the crawl's hot path, one visit per fetch)."""
        visit_one_kernel(self, page, np.asarray(children, dtype=np.int64))

    def visit_rows(self, pages: object, indptr: object, indices: object) -> None:
        """Visit ``pages`` in order; row r of the CSR (``indptr``, ``indices``) lists the
        children of pages[r] (e.g. a log of visits and their extracted links, replayed)."""
        ids = self.page_ids(pages, "pages")
        ptr, idx = self.csr(indptr, indices, len(ids))
        visit_rows_kernel(self, ids, np.arange(len(ids), dtype=np.int64), ptr, idx)

    # ---- shared with ranking.opic_select ---------------------------------------------------

    def kernel_buffers(self) -> tuple:
        """The arrays the compiled kernels update, in their argument order (one tuple, kept
        until the buffers grow: the crawl visits once per fetch)."""
        args = self._kernel_args
        if args is None:
            b = self._buf
            args = self._kernel_args = (
                b["stored_cash"], b["history"], b["pending"], b["born"], b["visits"],
                b["bao_history"], b["bao_clock"], b["ring_cash"], b["ring_time"],
                b["ring_len"], b["ring_head"], self._scalars, self._prm)
        return args

    def page_id(self, page: object) -> int:
        """``page`` as an int, or ValueError if it is not a known page id."""
        if isinstance(page, bool) or not isinstance(page, (int, np.integer)):
            raise ValueError(f"page id {page!r} must be an integer")
        if not 0 <= int(page) < self.n:
            raise ValueError(f"page id {int(page)} is not a known page: ids are in "
                             f"[0, {self.n}); add_pages first for new pages")
        return int(page)

    def page_ids(self, values: object, name: str) -> np.ndarray:
        """``values`` as int64 page ids, or ValueError (not integers, or not known pages)."""
        ids = np.asarray(values)
        if ids.ndim != 1:
            raise ValueError(f"{name} must be a 1-D sequence of page ids, got shape {ids.shape}")
        if ids.size == 0:
            return np.zeros(0, np.int64)
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"{name} must hold integer page ids, got dtype {ids.dtype}")
        low, high = int(ids.min()), int(ids.max())
        if low < 0:
            raise ValueError(f"{name} holds a negative page id ({low}); ids are in "
                             f"[0, {self.n})")
        if high >= self.n:
            raise ValueError(f"{name} holds page id {high} but only {self.n} pages are known; "
                             "add_pages first for new pages")
        return ids.astype(np.int64, copy=False)

    def csr(self, indptr: object, indices: object, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """A CSR of ``rows`` rows of children, checked (ValueError on bad input)."""
        ptr = np.asarray(indptr)
        if ptr.ndim != 1 or len(ptr) != rows + 1 or (
                ptr.size and not np.issubdtype(ptr.dtype, np.integer)):
            raise ValueError(f"indptr must be {rows + 1} integers (one row per visited page "
                             f"plus one), got shape {ptr.shape} dtype {ptr.dtype}")
        idx = self.page_ids(indices, "indices")
        if int(ptr[0]) != 0 or int(ptr[-1]) != len(idx) or bool(np.any(np.diff(ptr) < 0)):
            raise ValueError(f"indptr must rise from 0 to len(indices)={len(idx)} without "
                             "decreasing")
        return ptr.astype(np.int64, copy=False), idx


def _check_count(k: object, name: str) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"{name}={k!r} must be a non-negative integer number of pages")


def _amounts(values: float | object, k: int, name: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(k, float(a))
    if a.shape != (k,):
        raise ValueError(f"{name} has shape {a.shape}; give one number or {k} numbers")
    if not bool(np.all(np.isfinite(a))) or bool(np.any(a < 0)):
        raise ValueError(f"{name} must be finite and >= 0 (cash cannot be negative)")
    return a


def _normalized(values: np.ndarray) -> np.ndarray:
    total = float(values.sum())
    if not (total > 0 and math.isfinite(total)):
        return np.full(len(values), 1.0 / max(len(values), 1))
    return values / total
