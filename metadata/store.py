"""The metadata store: opening/migrating the file, URL ids, reads, and the writer.

Threading model (DESIGN.md §4): exactly one :class:`~metadata.writer.Writer` thread writes
crawl results; any thread may read through :meth:`MetadataStore.read_connection` (its own
connection) or use :meth:`MetadataStore.atomic` / :meth:`MetadataStore.url_ids` on a
connection private to the calling thread.

A store opened ``read_only`` never writes (no migration, no writer, connections in SQLite's
``mode=ro``), so a user who may read the file but not write it, or its folder, can inspect
it, even while the daemon runs (see :mod:`metadata.connection` for what SQLite needs).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from metadata.connection import (BUSY_TIMEOUT_S, connect, connect_read_only, open_error,
                                 search_problem, write_problem)
from metadata.errors import MetadataError, StoreAccessError, StoreUnusableError
from metadata.graph import LinkStream, export_graph, graph_counts, stream_graph
from metadata.idmap import IdMap
from metadata.records import FrontierRow, Graph, UnitSpent
from metadata.refresh_queries import FOLDER_UNIT_KEY, state_value
from metadata.resolver import UrlResolver
from metadata import seeds as seed_table
from metadata.schema import CURRENT_VERSION, file_version, migrate
from metadata.seeds import StoredSeed
from metadata.status import store_status
from metadata.urlkeys import HashFn, url_hash
from metadata.views import NEWEST_UNIT_FIRST
from metadata.writer import Writer

log = logging.getLogger(__name__)

StopCheck = Callable[[], None]
"""Returns while a long read may go on; raises (the caller's exception) to abandon it."""

# SQLite virtual-machine instructions between two calls of a stop check during a scan:
# ~1 ms of work here, so a check costs nothing measurable and a stop waits about that long.
STOP_CHECK_INSTRUCTIONS = 100_000
_UNIT_SPENT_COLUMNS = ("unit, unit_s, bandwidth, fetched, refresh, discovery, urgent, "
                       "carried_over, ended, updated_at")


class MetadataStore:
    """One metadata database file. Create with :meth:`open`."""

    def __init__(self, path: Path, version: int, hash_fn: HashFn, cache_mb: int, *,
                 read_only: bool = False, immutable_warning: str | None = None) -> None:
        self.path = path
        self._version = version
        self._read_only = read_only
        self._immutable = immutable_warning is not None
        # Logged once, before the first read (a writing command never reads this way).
        self._immutable_warning = immutable_warning
        self._hash = hash_fn
        self._cache_mb = cache_mb
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # The URL ids of url_ids(), shared by the threads' connections (one at a time).
        self._ids = IdMap()
        self._ids_lock = threading.RLock()
        self._writer: Writer | None = None
        self._closed = False
        #: The schema version the file had when :meth:`open` found it (0: a new file); below
        #: :attr:`schema_version` when this open upgraded it.
        self.found_version = version

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False, hash_fn: HashFn = url_hash,
             cache_mb: int = 64, warn: bool = True) -> MetadataStore:
        """Open ``path``, creating it or migrating it in place to the current schema.

        ``read_only``: open an existing store without writing anything, not even a
        migration; a schema older than this code's is refused (``xyro init`` upgrades it).
        ``hash_fn`` is the URL look-up hash (tests inject a colliding one); it must be the
        same every time a file is opened. Raises :class:`StoreAccessError` when this user
        may not read (or, unless ``read_only``, write) the file, its WAL files or its folder,
        and :class:`MetadataError` for a file that is not a Xyro store, is corrupt, or was
        written by a newer version. ``warn`` False: no warning when a read-only store can
        only be read as immutable (a look-up made for a command whose own open warns).
        """
        path = Path(path)
        if not os.path.isdir(path.parent):
            problem = search_problem(path)  # a folder on the way this user may not enter
            raise (StoreAccessError(problem) if problem else StoreUnusableError(
                f"directory {path.parent} for metadata store {path.name} does not exist; "
                "create it or fix the storage path"))
        if read_only:
            return cls._open_read_only(path, hash_fn, cache_mb, warn)
        conn = connect(path, cache_mb=cache_mb)
        try:
            found = migrate(conn, str(path))
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise open_error(path, exc, write=True) from exc
        finally:
            conn.close()
        store = cls(path, int(version), hash_fn, cache_mb)
        store.found_version = int(found)
        return store

    @classmethod
    def _open_read_only(cls, path: Path, hash_fn: HashFn, cache_mb: int,
                        warn: bool = True) -> MetadataStore:
        if not os.path.exists(path):
            raise StoreUnusableError(f"no metadata database at {path}: run `xyro init` "
                                     "first, or point storage.database at an existing one")
        conn, warning = connect_read_only(path, cache_mb=cache_mb)
        try:
            version = file_version(conn, str(path))
        except sqlite3.DatabaseError as exc:
            raise open_error(path, exc, write=False) from exc
        finally:
            conn.close()
        if version > CURRENT_VERSION:
            raise StoreUnusableError(
                f"{path} has metadata schema version {version}, newer than this Xyro "
                f"supports ({CURRENT_VERSION}); upgrade Xyro or use a backup made by this "
                "version")
        if version < CURRENT_VERSION:
            what = (f"has metadata schema version {version}, older than this Xyro's "
                    f"({CURRENT_VERSION})") if version else "holds no Xyro schema yet"
            raise StoreAccessError(f"{path} {what} and is opened read-only here: run "
                                   "`xyro init` as a user who can write it to upgrade it")
        store = cls(path, version, hash_fn, cache_mb, read_only=True, immutable_warning=warning)
        if not warn:
            store._immutable_warning = None   # still read as immutable, without the warning
        return store

    @property
    def schema_version(self) -> int:
        return self._version

    @property
    def read_only(self) -> bool:
        """True when opened ``read_only``: :meth:`writer` and :meth:`atomic` refuse."""
        return self._read_only

    def _warn_immutable(self) -> None:
        with self._lock:
            warning, self._immutable_warning = self._immutable_warning, None
        if warning is not None:
            log.warning("%s", warning)

    def _refuse_writes(self) -> None:
        if self._read_only:
            raise StoreAccessError(write_problem(self.path) or (
                f"metadata store {self.path} was opened read-only: this command cannot "
                "write it"))

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        """Close the writer (flushing it) and every connection this store opened."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise MetadataError(f"metadata store {self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self._warn_immutable()
            conn = connect(self.path, cache_mb=self._cache_mb, read_only=self._read_only,
                           immutable=self._immutable)
            self._local.conn = conn
            self._local.resolver = UrlResolver(conn, self._hash, self._ids)
            self._local.depth = 0
            with self._lock:
                self._conns.append(conn)
        return conn

    def read_connection(self) -> sqlite3.Connection:
        """A new read-only connection for the calling thread; the caller closes it."""
        self._warn_immutable()
        return connect(self.path, cache_mb=self._cache_mb, read_only=True,
                       immutable=self._immutable)

    # -- transactions and ids ------------------------------------------------------------
    @contextmanager
    def atomic(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction on the calling thread's connection (nested: a savepoint).

        ``durable``: the commit is on disk when the block ends (``synchronous=FULL`` for it;
        the store's NORMAL may lose the last commits to a power loss). For a commit that
        file deletions follow: a power loss must not bring back rows whose files are gone.
        """
        self._refuse_writes()
        conn = self._conn()
        local = self._local
        if durable:
            if local.depth:
                raise MetadataError("a durable transaction cannot be nested in another")
            with self._synchronous(conn, "FULL"), self.atomic() as same:
                yield same
            return
        if local.depth:
            name = f"sp{local.depth}"
            conn.execute(f"SAVEPOINT {name}")
            local.depth += 1
            try:
                yield conn
            except BaseException:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
                self._forget_ids()
                raise
            finally:
                local.depth -= 1
            conn.execute(f"RELEASE {name}")
            return
        conn.execute("BEGIN IMMEDIATE")
        local.depth = 1
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            self._forget_ids()
            raise
        finally:
            local.depth = 0
        conn.execute("COMMIT")

    @staticmethod
    @contextmanager
    def _synchronous(conn: sqlite3.Connection, level: str) -> Iterator[None]:
        before = conn.execute("PRAGMA synchronous").fetchone()[0]
        conn.execute(f"PRAGMA synchronous = {level}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA synchronous = {before}")

    def url_ids(self, urls: Sequence[str], create: bool = True) -> list[int | None]:
        """Stable ids of canonical ``urls`` (same order); new ones are created when ``create``,
        else reported as None."""
        urls = list(urls)
        for url in urls:
            if not isinstance(url, str) or not url:
                raise MetadataError(f"URL must be a non-empty string, got {url!r}")
        self._conn()
        resolver: UrlResolver = self._local.resolver
        if create:
            with self.atomic(), self._ids_lock:
                found = resolver.resolve(urls, 0)
        else:
            with self._ids_lock:
                found = resolver.lookup(urls)
        return [found.get(u) for u in urls]

    def _forget_ids(self) -> None:
        """After a rollback the map may name rows that no longer exist: reload it."""
        with self._ids_lock:
            self._ids.reset()

    def url_of(self, url_id: int) -> str | None:
        row = self._conn().execute("SELECT url FROM urls WHERE id = ?", (url_id,)).fetchone()
        return None if row is None else row[0]

    def opic_checkpoint(self) -> tuple[float, int, float, bytes] | None:
        """(written_at, pages, clock G, data) of the crawl's last OPIC checkpoint, or None."""
        row = self._conn().execute("SELECT written_at, pages, clock, data FROM "
                                   "opic_checkpoint WHERE id = 1").fetchone()
        return None if row is None else (row[0], row[1], row[2], bytes(row[3]))

    def fetch_units(self, last: int = 1, before: int | None = None) -> list[UnitSpent]:
        """The ``last`` units' bandwidth rows (``fetch_units``), newest first
        (:data:`metadata.views.NEWEST_UNIT_FIRST`); with ``before``, only units numbered
        below it (numbers count in each row's own unit length)."""
        rows = self._conn().execute(
            f"SELECT {_UNIT_SPENT_COLUMNS} FROM fetch_units WHERE unit < ? "
            f"ORDER BY {NEWEST_UNIT_FIRST} LIMIT ?",
            (2**62 if before is None else before, last)).fetchall()
        return [_unit_spent(row) for row in rows]

    def fetch_unit(self, unit: int, unit_s: float) -> UnitSpent | None:
        """The bandwidth row of unit ``unit`` of ``unit_s`` seconds, or None: a row of
        another unit length is another span of time, even under the same number."""
        row = self._conn().execute(
            f"SELECT {_UNIT_SPENT_COLUMNS} FROM fetch_units WHERE unit = ? AND unit_s = ?",
            (unit, unit_s)).fetchone()
        return None if row is None else _unit_spent(row)

    def add_seeds(self, urls: Sequence[str], priority: int, at: float) -> int:
        """Store canonical ``urls`` as seeds (:mod:`metadata.seeds`); returns how many are
        new. Safe while a crawler writes the database: it touches the ``seeds`` table only."""
        self._refuse_writes()
        try:
            return seed_table.add_seeds(self._conn(), urls, priority, at)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise MetadataError(
                f"cannot store seeds in {self.path}: another process kept the database "
                f"locked for the whole busy timeout ({exc}); try again, and if it persists "
                "look for a stuck process holding it (fuser on the file)") from None

    def seeds(self, after_id: int = 0) -> list[StoredSeed]:
        """The seeds added with ``xyro seed`` whose id is above ``after_id``, oldest first."""
        return seed_table.stored_seeds(self._conn(), after_id)

    def get_state(self, key: str, default: object = None) -> object:
        row = self._conn().execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def stored_versions(self) -> int:
        """How many XML versions the warehouse holds for this database (their rows)."""
        return int(self._conn().execute("SELECT count(*) FROM xml_versions").fetchone()[0])

    def set_state(self, key: str, value: float | int | str | None) -> None:
        """Write one ``state`` key at once, outside the writer (which must not be running:
        e.g. before a crawl starts it, after it closed)."""
        with self.atomic() as conn:
            conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)",
                         (key, json.dumps(value)))

    # -- writer --------------------------------------------------------------------------
    def writer(self, batch_size: int = 2000, flush_interval_s: float = 0.5, *,
               max_batch_size: int | None = None,
               dead_after: int = 3, now: Callable[[], float] | None = None,
               busy_timeout_s: float = BUSY_TIMEOUT_S) -> Writer:
        """Start THE writer thread (one per store at a time).

        ``max_batch_size`` (default 16 × ``batch_size``): how far a batch may grow while
        the queue holds a backlog (group commit, see :mod:`metadata.writer`).
        ``dead_after``: 404/410 answers in a row after which a page is DEAD. ``now`` (e.g. a
        clock's ``now``) stamps ``Enqueue`` ops that carry no ``enqueued_at``. While another
        connection holds the write lock, the writer waits and warns every ``busy_timeout_s``.
        The writer keeps a map of every URL hash to its id (12 bytes per URL,
        :mod:`metadata.idmap`).
        """
        if self._closed:
            raise MetadataError(f"metadata store {self.path} is closed")
        self._refuse_writes()
        if self._writer is not None and not self._writer._closed:
            raise MetadataError(f"metadata store {self.path} already has a writer; "
                                "share it (submit is thread-safe) or close it first")
        conn = connect(self.path, cache_mb=max(self._cache_mb, 512),
                       busy_timeout_s=busy_timeout_s)
        resolver = UrlResolver(conn, self._hash, IdMap())
        self._writer = Writer(conn, resolver, batch_size=batch_size,
                              flush_interval_s=flush_interval_s, dead_after=dead_after, now=now,
                              max_batch_size=max_batch_size)
        return self._writer

    # -- reads ---------------------------------------------------------------------------
    def frontier_rows(self) -> Iterator[FrontierRow]:
        """The persisted frontier (for a restart), in URL-id order."""
        conn = self.read_connection()
        try:
            rows = conn.execute(
                "SELECT f.url_id, u.url, f.priority, u.depth, f.not_before "
                "FROM frontier f JOIN urls u ON u.id = f.url_id ORDER BY f.url_id")
            for row in rows:
                yield FrontierRow(*row)
        finally:
            conn.close()

    def export_graph(self, check_stop: StopCheck | None = None) -> Graph:
        """The out-link graph as CSR (see :class:`metadata.records.Graph`).

        ``check_stop`` (optional) is called about every millisecond of SQLite work while the
        graph is read (:func:`_stoppable`); what it raises ends the export."""
        conn = self.read_connection()
        try:
            with _stoppable(conn, check_stop):
                return export_graph(conn)
        finally:
            conn.close()

    def graph_counts(self) -> tuple[int, int]:
        """(pages, links), reading no child list (:func:`metadata.graph.graph_counts`)."""
        conn = self.read_connection()
        try:
            return graph_counts(conn)
        finally:
            conn.close()

    @contextmanager
    def stream_graph(self, max_links: int,
                     check_stop: StopCheck | None = None) -> Iterator[LinkStream]:
        """The graph as counts, XML mask and child-list chunks of about ``max_links`` links,
        all from one read snapshot that lasts as long as the block (DESIGN.md §5 "Scale";
        see :class:`metadata.graph.LinkStream`). ``check_stop`` (optional) is called about
        every millisecond of SQLite work while the block lasts, in the XML mask's scan and in
        each chunk's; what it raises ends the stream (and leaves the block)."""
        conn = self.read_connection()
        try:
            with _stoppable(conn, check_stop), stream_graph(conn, max_links) as stream:
                yield stream
        finally:
            conn.close()

    def folder_unit_s(self) -> float | None:
        """The length in seconds of the time unit the stored folders (``due_unit``) count in,
        as the planner last filed them; None before its first run."""
        conn = self.read_connection()
        try:
            unit = state_value(conn, FOLDER_UNIT_KEY)
        finally:
            conn.close()
        return float(unit) if isinstance(unit, (int, float)) and unit > 0 else None

    def status(self, current_unit: int | None = None) -> dict:
        """Summary for ``xyro status``; ``current_unit`` is the planner's time unit index."""
        conn = self.read_connection()
        try:
            return store_status(conn, current_unit)
        finally:
            conn.close()


@contextmanager
def _stoppable(conn: sqlite3.Connection, check_stop: StopCheck | None) -> Iterator[None]:
    """Let ``check_stop`` interrupt any statement ``conn`` runs during the block.

    A single statement (the export's ``fetchall`` of every child list, the XML mask's scan)
    can run for seconds, and no Python code runs between its rows. SQLite's progress
    handler is called every :data:`STOP_CHECK_INSTRUCTIONS` instructions of its virtual
    machine: it calls ``check_stop`` and, when that raises, returns non-zero, which makes
    SQLite abandon the statement ("interrupted"). The exception ``check_stop`` raised then
    replaces SQLite's error, so the caller sees its own exception wherever the stop came."""
    if check_stop is None:
        yield
        return
    raised: list[BaseException] = []

    def handler() -> int:
        if not raised:
            try:
                check_stop()
            except BaseException as exc:  # handed back below, never lost
                raised.append(exc)
        return 1 if raised else 0

    conn.set_progress_handler(handler, STOP_CHECK_INSTRUCTIONS)
    try:
        yield
    except sqlite3.Error as exc:
        if raised:
            raise raised[0] from exc
        raise
    finally:
        conn.set_progress_handler(None, 0)
    if raised:  # interrupted in a statement whose error the reader swallowed
        raise raised[0]


def _unit_spent(row: Sequence) -> UnitSpent:
    """A ``fetch_units`` row (:data:`_UNIT_SPENT_COLUMNS`) as its record; SQLite keeps
    ``ended`` as 0/1."""
    return UnitSpent(*row[:8], bool(row[8]), row[9])
