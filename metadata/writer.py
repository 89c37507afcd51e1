"""The one writer thread: ops in, batched transactions out (DESIGN.md §4).

Producers call :meth:`Writer.submit` from any thread; the queue is bounded, so a producer
faster than the disk blocks (back-pressure) instead of growing memory. The thread takes up
to ``batch_size`` ops, or what arrived within ``flush_interval_s`` of the first one, and
applies them as ONE transaction: a crash (even SIGKILL) loses at most the batches not yet
committed, never part of one, and never corrupts the file (WAL, synchronous=NORMAL).

Group commit grows with load: when a full batch is taken and at least ``batch_size`` more
ops are already waiting, the batch keeps growing up to ``max_batch_size`` (default 16 ×
``batch_size``). Per-commit costs (index pages rewritten into the WAL, the look-up and
insert statements, the id map's array work) are shared by more pages in a large batch, so a
saturated writer commits bigger batches and catches up (ingest benchmark, 600,000 pages:
11,871 pages/s with batches of up to 16,000 pages, 12,382 with 32,000), while a lightly
loaded one keeps latency at ``flush_interval_s``. The queue holds up to ``max_batch_size``
ops, so memory stays bounded (about 250 MB for 32,000 pages of ten links in flight).

Producers blocked on a full queue are woken when the batch reaches its first long SQLite
call rather than when the batch is taken (see :mod:`metadata.opqueue`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from metadata.apply import BatchApplier
from metadata.connection import database_failure
from metadata.errors import MetadataError
from metadata.opqueue import OpQueue
from metadata.records import Op
from metadata.resolver import UrlResolver

log = logging.getLogger(__name__)


def _locked(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock."""
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY,
                                                       sqlite3.SQLITE_LOCKED) \
        or "locked" in str(exc)


class _Flush:
    """A marker in the op queue: the batch ends here; ``done`` is set after its commit."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


def _is_marker(item: object) -> bool:
    return type(item) is _Flush


_STOP = _Flush()  # the marker that also stops the thread


class Writer:
    """Owns one connection and one thread; see the module docstring."""

    def __init__(self, conn: sqlite3.Connection, resolver: UrlResolver, *, batch_size: int,
                 flush_interval_s: float, dead_after: int,
                 now: Callable[[], float] | None, max_batch_size: int | None = None,
                 queue_size: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"writer batch_size must be >= 1, got {batch_size}")
        if flush_interval_s <= 0:
            raise ValueError(f"writer flush_interval_s must be > 0, got {flush_interval_s}")
        if dead_after < 1:
            raise ValueError(f"writer dead_after must be >= 1, got {dead_after}")
        self._conn = conn
        self._path = conn.execute("PRAGMA database_list").fetchone()[2]
        self._applier = BatchApplier(conn, resolver, dead_after, now)
        self._batch_size = batch_size
        self._max_batch = max(max_batch_size or 16 * batch_size, batch_size)
        self._interval = flush_interval_s
        self._queue = OpQueue(queue_size or max(4 * batch_size, self._max_batch), _is_marker)
        self._error: BaseException | None = None
        self._closed = False
        self._close_lock = threading.Lock()
        self._ops_written = 0
        self._batches = 0
        self._last_batch_s = 0.0
        self._busy_s = 0.0
        self._cpu_s = 0.0
        self._thread = threading.Thread(target=self._run, name="metadata-writer", daemon=True)
        self._thread.start()

    # -- producer side -----------------------------------------------------------------
    def submit(self, op: Op) -> None:
        """Queue ``op`` (thread-safe); blocks while the queue is full."""
        self._check()
        self._queue.put(op)

    def submit_many(self, ops: Iterable[Op]) -> None:
        for op in ops:
            self.submit(op)

    def flush(self) -> None:
        """Block until every op submitted before this call is committed."""
        self._check()
        marker = _Flush()
        self._queue.put(marker)
        marker.done.wait()
        self._check()

    def close(self) -> None:
        """Flush, stop the thread and close its connection; idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()
            self._conn.close()
        if self._error is not None:
            raise self._failure()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> dict:
        return {"ops_written": self._ops_written, "batches": self._batches,
                "last_batch_seconds": self._last_batch_s, "busy_seconds": self._busy_s,
                "cpu_seconds": self._cpu_s,
                "queue_size": self._queue.qsize(), "failed": self._error is not None}

    def _check(self) -> None:
        if self._error is not None:
            raise self._failure()
        if self._closed:
            raise MetadataError("metadata writer is closed; open a new one with store.writer()")

    def _failure(self) -> MetadataError:
        error = self._error
        known = (database_failure(Path(self._path), error)
                 if isinstance(error, sqlite3.DatabaseError) else None)
        if known is not None:   # a full disk, a lock held by another connection
            return type(known)(f"metadata writer stopped, its batch rolled back (its pages "
                               f"stay queued and are fetched again): {known}")
        return MetadataError(
            f"metadata writer stopped: a batch failed and was rolled back ({self._error}); "
            "ops since the last flush are lost; check the disk and the database, then restart")

    # -- writer thread -----------------------------------------------------------------
    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[Op] = []
            waiters: list[_Flush] = []
            stopping = self._collect(batch, waiters)
            if batch and self._error is None:
                self._commit(batch)
            self._queue.wake()  # the applier may have woken producers earlier (opqueue)
            for w in waiters:
                w.done.set()

    def _collect(self, batch: list[Op], waiters: list[_Flush]) -> bool:
        """Fill ``batch`` until full, a flush/stop marker, or the interval; True on stop."""
        take = self._queue.take
        items = take(self._batch_size, None)
        deadline = time.monotonic() + self._interval
        while True:
            for item in items:  # a marker can only be the last item of a take
                if item is _STOP:
                    return True
                if type(item) is _Flush:
                    waiters.append(item)
                    return False
                batch.append(item)  # type: ignore[arg-type]
            want = self._wanted(len(batch))
            if not want:
                return False
            items = take(want, 0)
            if not items:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                items = take(want, left)
                if not items:
                    return False

    def _wanted(self, n: int) -> int:
        """How many more ops a batch of ``n`` takes: up to ``batch_size``, then more only while
        at least ``batch_size`` others wait (group commit), up to ``max_batch_size``."""
        if n < self._batch_size:
            return self._batch_size - n
        backlog = self._queue.qsize()
        if n >= self._max_batch or backlog < self._batch_size:
            return 0
        return min(self._max_batch - n, backlog - self._batch_size + 1)

    def _begin(self) -> None:
        """BEGIN IMMEDIATE. Producers may still be asleep (their wake comes later in the
        batch), and one of them may hold the lock we need: if the lock is taken, wake them
        before waiting for it."""
        conn = self._conn
        timeout_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise
            self._queue.wake()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
        self._wait_for_lock(timeout_ms / 1000.0)

    def _wait_for_lock(self, timeout_s: float) -> None:
        """BEGIN IMMEDIATE until the write lock is ours. Another connection may hold it for
        long: an operator's ``sqlite3`` session left in a transaction, a VACUUM, a backup.
        The crawl waits behind the bounded queue (back-pressure) and a warning says why
        every busy timeout (``timeout_s``). Once a close is asked, the next timeout fails
        the batch (rolled back; the store's frontier keeps its URLs queued)."""
        started = time.monotonic()
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not _locked(exc) or self._closed:
                    raise
                log.warning("metadata: the database %s is locked by another connection "
                            "(%.0f s so far: an sqlite3 session left in a transaction, a "
                            "VACUUM, a backup?); the crawl waits until it ends",
                            self._path, time.monotonic() - started)
                continue
            waited = time.monotonic() - started
            if waited >= timeout_s:
                log.info("metadata: the database %s is ours again after %.0f s locked; the "
                         "crawl goes on", self._path, waited)
            return

    def _commit(self, batch: list[Op]) -> None:
        started = time.perf_counter()
        cpu_started = time.thread_time()
        conn = self._conn
        try:
            self._begin()
            self._applier.apply(batch, self._queue.wake)
            self._queue.wake()  # the commit is one long call without the GIL
            conn.execute("COMMIT")
        except BaseException as exc:  # keep draining so producers never block forever
            self._error = exc
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._applier.forget()
            return
        elapsed = time.perf_counter() - started
        self._ops_written += len(batch)
        self._batches += 1
        self._last_batch_s = elapsed
        self._busy_s += elapsed
        self._cpu_s += time.thread_time() - cpu_started
