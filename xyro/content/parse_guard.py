"""One guard for every lxml parse in the process: libxml2's entity loader is process-global.

lxml installs its resolver dispatch as libxml2's external-entity loader for the length of
each parse and restores the loader it found when the parse ends (``_ParserContext.prepare``
and ``cleanup`` in lxml's parser.pxi, for every parse: HTML, feeds, catalogs, XML). Two
overlapping parses therefore undo each other: an HTML page parsed by one fetch thread,
started while no parse ran, puts libxml2's default loader back when it ends, and a DocBook
document being parsed by another thread then has its next DTD or entity load answered by
that default loader instead of Xyro's resolver ("failed to load ...: Attempt to load
network entity"; reproduced here about once in 10,000 DOCTYPE parses beside HTML parsing).

So a parse that may load external DTDs or entities (a document with a DOCTYPE, a DTD
validation) runs *exclusive* of every other parse, and all other parses, which load nothing
external, run *shared*: side by side, since a loader swapped between two of them is never
used. A waiting exclusive parse goes before new shared ones, so a busy crawl's HTML cannot
starve it. Inside an exclusive parse its own thread may parse again (an XML catalog read
while the resolver answers a load) without waiting for itself, and so may a thread inside a
shared parse take a shared hold again: were it to queue behind a waiting exclusive parse, that
one would wait for its outer hold and both for ever, and every later parse behind them. An
exclusive hold inside a shared one of the same thread could never be granted: it is refused.

A parser built while its thread holds no exclusive hold loads nothing external
(:func:`xyro.loader.parser.safe_parser` asks :meth:`ParseGuard.holds_exclusive`), so a body
wrongly judged DOCTYPE-free still reads no DTD, entity or local file.

:data:`PARSES` is module state, the one exception to "no globals": the hazard it guards is
libxml2's process-global loader, shared by every component whichever built it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ParseGuard:
    """A readers-writer lock for lxml parses: ``shared()`` for parses that load nothing
    external, ``exclusive()`` for those that may; writers first, reentrant for the writer and
    for a thread already holding a shared hold."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._shared = 0  # threads holding a shared hold
        self._writer: int | None = None  # thread id of the exclusive parse
        self._waiting = 0  # exclusive parses waiting
        self._mine = threading.local()  # .shared: this thread's nested shared holds

    def holds_exclusive(self) -> bool:
        """True when the calling thread is inside its exclusive parse."""
        return self._writer == threading.get_ident()

    @contextmanager
    def shared(self) -> Iterator[None]:
        if self.holds_exclusive():  # within this thread's exclusive parse
            yield
            return
        depth = getattr(self._mine, "shared", 0)
        if depth:  # within this thread's shared parse: never queue behind a writer
            self._mine.shared = depth + 1
            try:
                yield
            finally:
                self._mine.shared = depth
            return
        with self._cond:
            while self._writer is not None or self._waiting:
                self._cond.wait()
            self._shared += 1
        self._mine.shared = 1
        try:
            yield
        finally:
            self._mine.shared = 0
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if self.holds_exclusive():
            yield
            return
        if getattr(self._mine, "shared", 0):
            raise RuntimeError(
                "an exclusive lxml parse was started inside a shared one of the same thread: "
                "it would wait for that thread's own shared hold for ever; take the exclusive "
                "hold first (xyro.content.parse_guard)")
        with self._cond:
            self._waiting += 1
            while self._writer is not None or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._writer = threading.get_ident()
        try:
            yield
        finally:
            with self._cond:
                self._writer = None
                self._cond.notify_all()


#: The process's one guard (module doc).
PARSES = ParseGuard()
