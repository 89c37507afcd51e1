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
while the resolver answers a load) without waiting for itself.

:data:`PARSES` is module state, the one exception to "no globals": the hazard it guards is
libxml2's process-global loader, shared by every component whichever built it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ParseGuard:
    """A readers-writer lock for lxml parses: ``shared()`` for parses that load nothing
    external, ``exclusive()`` for those that may; writers first, reentrant for the writer."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._shared = 0
        self._writer: int | None = None  # thread id of the exclusive parse
        self._waiting = 0  # exclusive parses waiting

    @contextmanager
    def shared(self) -> Iterator[None]:
        if self._writer == threading.get_ident():  # within this thread's exclusive parse
            yield
            return
        with self._cond:
            while self._writer is not None or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:
            yield
            return
        with self._cond:
            self._waiting += 1
            while self._writer is not None or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._writer = me
        try:
            yield
        finally:
            with self._cond:
                self._writer = None
                self._cond.notify_all()


#: The process's one guard (module doc).
PARSES = ParseGuard()
