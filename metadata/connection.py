"""Opening SQLite connections with the store's settings (WAL, synchronous=NORMAL, ...)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from metadata.errors import MetadataError

BUSY_TIMEOUT_S = 30.0


def connect(path: Path, *, cache_mb: int = 64, busy_timeout_s: float = BUSY_TIMEOUT_S,
            read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit ``BEGIN``/``COMMIT``).

    WAL lets readers run while the writer commits; synchronous=NORMAL in WAL mode syncs at
    checkpoints only, which keeps commits cheap and still never corrupts the file on a
    crash (a power loss may drop the last commits). ``check_same_thread`` is off because a
    connection is created by one thread and used by the writer thread; each connection is
    still used by one thread at a time.
    """
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                               timeout=busy_timeout_s)
    except sqlite3.Error as exc:
        raise MetadataError(f"cannot open metadata store {path}: {exc}; check the path "
                            "and its permissions") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise MetadataError(f"{path}: SQLite refused WAL mode (got {mode!r}); put the "
                                "store on a local file system")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute(f"PRAGMA cache_size = {-1024 * cache_mb}")
        if read_only:
            conn.execute("PRAGMA query_only = ON")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise MetadataError(
            f"{path} is not a usable metadata database ({exc}); restore it from a backup "
            "or move it aside and run `xyro init` to start a new one") from exc
    except BaseException:
        conn.close()
        raise
    return conn
