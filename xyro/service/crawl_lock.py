"""One crawler per database: an exclusive lock beside the metadata file (DESIGN.md §2).

Two crawlers on one database would each keep their own host queues and politeness clocks,
so a host would see both (twice the configured rate) and pages would be fetched twice.
``xyro run``, ``xyro crawl`` and ``xyro demo`` therefore hold an exclusive ``flock`` on
``<database>.lock`` for as long as they crawl; a second one exits with one line naming the
holder. The kernel drops the lock when its holder dies (even on SIGKILL), so a crash never
leaves a stale lock behind, and ``xyro status`` asks the same lock whether a crawler is alive. Entered after
``App.open_store(create=True)``, which makes the folder it lives in.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from xyro.errors import AccessError, XyroError


class CrawlerRunning(XyroError):
    """Another crawler holds the database (exit code 2, like any environment problem)."""

    exit_code = 2

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid  # the holder's, as its lock file names it (None: unreadable)


def holder_name(pid: int | None) -> str:
    """The lock's holder as messages name it: ``process 1234``, or ``another process`` when
    the lock file names none."""
    return f"process {pid}" if pid else "another process"


def lock_path(database: Path) -> Path:
    """``<database>.lock`` beside the database file itself, symlinks resolved: every path to
    one database (through a symlink, relative or not) names the one lock."""
    try:
        real = database.resolve()
    except (OSError, RuntimeError):  # a symlink loop: opening the store reports it
        real = database
    return real.with_name(real.name + ".lock")


class CrawlLock:
    """The held lock; a context manager that releases it (and keeps the file: unlinking a
    lock file another process has opened would let a third one lock a new inode)."""

    def __init__(self, database: Path, wait_s: float = 2.0) -> None:
        self.database = database
        self.path = lock_path(database)
        self._wait_s = wait_s  # outlasts `xyro status`'s probe, which holds it for microseconds
        self._fd: int | None = None

    def __enter__(self) -> CrawlLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def acquire(self) -> None:
        fd, writable = self._open()
        try:
            self._lock(fd)
        except BaseException:
            os.close(fd)
            raise
        if writable:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _open(self) -> tuple[int, bool]:
        """The lock file's descriptor, and whether it takes this process's pid.

        Root (a `sudo xyro seed`) creates it owned as the database is, so the service's
        user can still lock it; a lock file another user owns already is locked read-only
        (flock needs no write access), without the pid."""
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except PermissionError:
            return self._open_read_only(), False
        except OSError as exc:
            raise self._access_error(exc) from None
        if created and os.geteuid() == 0:
            _own_as(fd, self.database)
        return fd, True

    def _open_read_only(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise self._access_error(exc) from None

    def _access_error(self, exc: OSError) -> AccessError:
        owner = _owner(self.path)
        return AccessError(
            f"cannot open the crawl lock {self.path}{owner}: {exc.strerror or exc}; the "
            f"crawler needs to read it and to write the database's folder (storage.database)"
            f"; run xyro as the database's owner (sudo -u xyro ...)")

    def _lock(self, fd: int) -> None:
        deadline = time.monotonic() + self._wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise AccessError(
                        f"cannot lock {self.path}: {exc.strerror or exc}") from None
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        holder = _read_pid(fd)
        who = holder_name(holder)
        raise CrawlerRunning(
            f"another Xyro crawler ({who}) is running on {self.database}: two crawlers on "
            f"one database would break politeness and fetch pages twice; stop it first "
            f"(systemctl stop xyro) or point storage.database elsewhere", holder)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def crawler_alive(database: Path) -> bool | None:
    """Whether a crawler holds ``database``'s lock now: True, False, or None when this user
    cannot tell (the lock file unreadable). A missing lock file means no crawler."""
    try:
        fd = os.open(lock_path(database), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return True if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else None
    finally:
        os.close(fd)
    return False


def _own_as(fd: int, database: Path) -> None:
    """Give the lock file ``database``'s owner and group (best effort: no database yet, or
    a filesystem without owners, leaves it as created)."""
    try:
        st = database.stat()
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass


def _owner(path: Path) -> str:
    """`` (owned by uid N)`` for an existing file, or nothing."""
    try:
        return f" (owned by uid {path.stat().st_uid})"
    except OSError:
        return ""


def _read_pid(fd: int) -> int | None:
    """The pid the lock file names, if that process exists: a holder that could only lock
    the file read-only (another user's) leaves an older pid in it."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return None
    except (PermissionError, OverflowError, ValueError):
        pass
    return int(text)
