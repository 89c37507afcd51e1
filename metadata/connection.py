"""Opening SQLite connections with the store's settings (WAL, synchronous=NORMAL, ...).

Two kinds of connection (DESIGN.md §4: one thread writes, readers use their own):

* a writing connection: the file, its ``-wal``/``-shm`` files and (while one of them is
  missing) its folder must be writable by this user; this is checked before SQLite runs, as
  SQLite would otherwise open an unwritable file read-only without a word and fail at the
  first write, deep in the writer thread;
* a reading connection (``query_only``): never writes rows and never changes the journal
  mode. A user who may write the store opens it read-write all the same (URI ``mode=rw``),
  so that the last connection to close checkpoints and removes the ``-wal``/``-shm`` files
  as it always did; any other user opens it with URI ``mode=ro``. SQLite can read a WAL
  database read-only when its ``-wal`` and ``-shm`` files exist and are readable (the
  daemon runs, or it was stopped uncleanly), or when it may create them in the folder.
  When it may do neither (a stopped daemon's database in a folder this user cannot
  write), :func:`connect_read_only` falls back to ``immutable=1``: SQLite then takes no
  locks at all, which is safe only while no process writes the file, so the store logs a
  warning before it reads that way.

Errors are told apart: permission problems name the path, its owner and mode and the user
(:class:`StoreAccessError`, exit 2); only a file SQLite read and found not to be a
database (``SQLITE_NOTADB``, ``SQLITE_CORRUPT``) gets the advice to restore it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from metadata.errors import (ELSEWHERE, MetadataError, StoreAccessError, StoreFullError,
                             StoreUnusableError, access_message, owner_of, user_name)

BUSY_TIMEOUT_S = 30.0
#: What a writing connection leaves of its WAL file after a checkpoint. A reader kept open
#: (an operator's sqlite3 session) blocks checkpoints, and the WAL grows by every commit
#: meanwhile (about 10 KB a page fetched); without a limit the file kept that size until
#: the daemon exited.
JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024


def sidecars(path: Path) -> tuple[Path, Path]:
    """The WAL files SQLite keeps beside ``path``: ``-wal`` (new pages) and ``-shm`` (index)."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def search_problem(path: Path, elsewhere: str = ELSEWHERE) -> str | None:
    """Why this user cannot reach ``path`` (a folder on the way it may not enter), or None;
    ``elsewhere``: the way out offered (see :func:`~metadata.errors.access_message`)."""
    for folder in reversed(Path(os.path.abspath(path)).parents):
        if not os.access(folder, os.X_OK):
            if not os.path.exists(folder):  # its parent could be entered: simply missing
                return None
            return access_message(folder, "enter", elsewhere)
    return None


def write_problem(path: Path) -> str | None:
    """Why this user cannot write the store at ``path``, or None when it can."""
    problem = search_problem(path)
    if problem is not None:
        return problem
    files = [p for p in (path, *sidecars(path)) if os.path.exists(p)]
    # SQLite creates the database and its -wal/-shm files (and deletes them) in the folder.
    targets = files if len(files) == 3 else [path.parent, *files]
    for target in targets:
        if not os.access(target, os.W_OK):
            return access_message(target, "write")
    return None


def read_problem(path: Path) -> str | None:
    """Why this user cannot read the store at ``path`` (file or WAL files), or None."""
    problem = search_problem(path)
    if problem is not None:
        return problem
    for target in (path, *sidecars(path)):
        if os.path.exists(target) and not os.access(target, os.R_OK):
            return access_message(target, "read")
    return None


def _corrupt(path: Path, exc: sqlite3.Error) -> MetadataError:
    return StoreUnusableError(
        f"{path} is not a usable metadata database ({exc}); restore it from a backup or "
        "move it aside and run `xyro init` to start a new one")


def _is_corrupt(errorname: str) -> bool:
    """SQLite read the file and found it is not a database, or a damaged one."""
    return errorname == "SQLITE_NOTADB" or errorname.startswith("SQLITE_CORRUPT")


def database_failure(path: Path, exc: sqlite3.DatabaseError) -> MetadataError | None:
    """The one-line error for ``exc`` met on ``path`` after it opened (a command's read or
    write), or None when it is none of these: a file found corrupt, a write lock held by
    another connection past the busy timeout, a full disk."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if _is_corrupt(name) and not os.access(Path(path).parent, os.W_OK):
        # Read as immutable (no -shm could be made): a daemon that wrote meanwhile makes a
        # sound file look malformed to this reader, and a "restore it" would lose it.
        return StoreUnusableError(
            f"{path} changed while this command read it as immutable ({exc}): it has no "
            f"write access to {Path(path).parent}, so it cannot follow the running daemon's "
            "writes; run it again as the database's owner or in its group with write access "
            "to that folder (if no daemon runs, check the file with `sqlite3 "
            f"{path} 'PRAGMA integrity_check'`)")
    if _is_corrupt(name):
        return _corrupt(path, exc)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return MetadataError(
            f"the metadata database {path} stayed locked by another connection for "
            f"{BUSY_TIMEOUT_S:.0f} s ({exc}): an sqlite3 session left in a transaction, a "
            "VACUUM or a backup? End it (read with `sqlite3 -readonly`), then try again")
    if name.startswith("SQLITE_FULL"):
        return StoreFullError(f"the disk of the metadata database {path} is full ({exc}); "
                              "free space, then try again")
    return None


def open_error(path: Path, exc: sqlite3.Error, *, write: bool) -> MetadataError:
    """The error to raise for ``exc`` met while opening ``path``: permission or corruption."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if _is_corrupt(name):
        return _corrupt(path, exc)
    if os.path.isdir(path):
        return StoreAccessError(f"metadata store {path} is a folder, not a database file: "
                                f"point storage.database at a file (e.g. {path}/xyro.db)")
    problem = write_problem(path) if write else read_problem(path)
    if problem is not None:
        return StoreAccessError(problem)
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        verb = "write" if write else "read"
        return StoreAccessError(
            f"cannot {verb} metadata store {path} as user {user_name()} ({exc}): check the "
            "permissions of the file, of its -wal and -shm files and of its folder")
    return MetadataError(f"cannot open metadata store {path} ({exc}); check the disk and "
                         "that no other program holds the file locked")


def connect(path: Path, *, cache_mb: int = 64, busy_timeout_s: float = BUSY_TIMEOUT_S,
            read_only: bool = False, immutable: bool = False,
            journal_size_limit: int = JOURNAL_SIZE_LIMIT_BYTES) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit ``BEGIN``/``COMMIT``).

    WAL lets readers run while the writer commits; synchronous=NORMAL in WAL mode syncs at
    checkpoints only, which keeps commits cheap and still never corrupts the file on a
    crash (a power loss may drop the last commits). ``check_same_thread`` is off because a
    connection is created by one thread and used by the writer thread; each connection is
    still used by one thread at a time.

    ``read_only`` opens a reading connection (module docstring; ``immutable=1`` when
    ``immutable``); otherwise :class:`StoreAccessError` is raised up front when this user
    cannot write the file, its WAL files or its folder, and the WAL file is cut back to
    ``journal_size_limit`` bytes after each checkpoint that empties it.
    """
    if read_only:
        return _connect_reader(path, cache_mb, busy_timeout_s, immutable)
    problem = write_problem(path)
    if problem is not None:
        raise StoreAccessError(problem)
    conn = _open(path, str(path), busy_timeout_s, write=True)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StoreUnusableError(f"{path}: SQLite refused WAL mode (got {mode!r}); put the "
                                "store on a local file system")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA journal_size_limit = {int(journal_size_limit)}")
        _tune(conn, cache_mb)
    except sqlite3.Error as exc:
        conn.close()
        raise open_error(path, exc, write=True) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def connect_read_only(path: Path, *, cache_mb: int = 64, busy_timeout_s: float = BUSY_TIMEOUT_S,
                      ) -> tuple[sqlite3.Connection, str | None]:
    """A reading connection and, when it had to be opened ``immutable`` (module docstring),
    the warning to log before reading through it (None otherwise).

    The fallback is taken only when SQLite cannot create the ``-shm`` file (it says
    ``SQLITE_READONLY_DIRECTORY``, or ``SQLITE_CANTOPEN`` on a read-only file system, where
    the folder is not writable for anyone) and neither WAL file exists: then the main file
    holds every committed transaction and no writer had the file open when we looked.
    """
    try:
        return _connect_reader(path, cache_mb, busy_timeout_s, immutable=False), None
    except StoreAccessError as exc:
        name = getattr(exc.__cause__, "sqlite_errorname", None)
        no_shm = name == "SQLITE_READONLY_DIRECTORY" or (
            name == "SQLITE_CANTOPEN" and read_only_file_system(path.parent))
        if not no_shm or any(os.path.exists(p) for p in sidecars(path)):
            raise
    conn = _connect_reader(path, cache_mb, busy_timeout_s, immutable=True)
    return conn, immutable_warning(path)


def read_only_file_system(folder: Path) -> bool:
    """True if ``folder`` is on a file system mounted read-only."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def immutable_warning(path: Path) -> str:
    """What reading ``path`` with ``immutable=1`` means, and how to avoid it: one line."""
    me, folder = user_name(), path.parent
    if read_only_file_system(folder):
        return (f"reading {path} as immutable: its folder {folder} is on a read-only file "
                "system, so no -shm file can be made and none exists; no process can write "
                "the database there either, so what is read is what was last committed")
    owner, described = owner_of(folder) or ("its owner", "")
    return (f"reading {path} as immutable: user {me} cannot create its -shm file in folder "
            f"{folder} ({described}) and none exists; this is safe only while no process "
            f"writes the database (the daemon is stopped). To read it while the daemon runs, "
            f"run as {owner} or give {me} write access to that folder")


def _connect_reader(path: Path, cache_mb: int, busy_timeout_s: float,
                    immutable: bool) -> sqlite3.Connection:
    flag = ("immutable=1" if immutable
            else "mode=rw" if write_problem(path) is None else "mode=ro")
    conn = _open(path, f"file:{quote(os.path.abspath(path))}?{flag}", busy_timeout_s,
                 write=False)
    try:
        _tune(conn, cache_mb)
        conn.execute("PRAGMA query_only = ON")
        # SQLite opens lazily: read the schema now, so a problem shows here and not later.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        conn.close()
        raise open_error(path, exc, write=False) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _open(path: Path, target: str, busy_timeout_s: float, *, write: bool) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                               timeout=busy_timeout_s, uri=not write)
    except sqlite3.Error as exc:
        raise open_error(path, exc, write=write) from exc
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    return conn


def _tune(conn: sqlite3.Connection, cache_mb: int) -> None:
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA cache_size = {-1024 * cache_mb}")
