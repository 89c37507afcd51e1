"""The exceptions the metadata manager raises for a store it cannot use, and the wording of
access problems: which path, whose it is, its mode, as which user, and what to do.

A permission problem is not corruption: it gets its own class (exit code 2, like a bad
configuration, DESIGN.md §7) and never the advice to restore or replace the file.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

#: The usual way out when the store's place cannot be used (the config key of its path).
ELSEWHERE = "point storage.database elsewhere"


class MetadataError(Exception):
    """The metadata store cannot be opened, migrated or written (message says what to do)."""


class StoreAccessError(MetadataError):
    """The store cannot be used as asked by this user: its file, its ``-wal``/``-shm`` files
    or its folder cannot be read or written (permissions, read-only file system), or a
    read-only open meets a schema that needs an upgrade. An environment problem: exit 2."""

    exit_code = 2


class StoreUnusableError(MetadataError):
    """The file is not a store this Xyro can use: corrupt, another program's database, a
    newer version's schema, a folder that does not exist, a file system without WAL. A
    restart meets the same file: exit 2, like a bad configuration (DESIGN.md §7), so that
    systemd's ``RestartPreventExitStatus=2`` does not restart into it every few seconds."""

    exit_code = 2


class StoreFullError(MetadataError):
    """The disk of the store is full. The operator frees space and starts again: exit 2,
    so that systemd's ``RestartPreventExitStatus=2`` does not restart into the same wall."""

    exit_code = 2


def user_name(uid: int | None = None) -> str:
    """The name of ``uid`` (default: the effective user), or the number when it has none."""
    uid = os.geteuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def owner_of(path: Path) -> tuple[str, str] | None:
    """(owner name, "owner …, group …, mode 0755") of ``path``; None if it cannot be stat'ed."""
    try:
        st = path.stat()
    except OSError:
        return None
    owner = user_name(st.st_uid)
    return owner, (f"owner {owner}, group {_group_name(st.st_gid)}, "
                   f"mode {stat.S_IMODE(st.st_mode):04o}")


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


_GRANT = {"read": "read ", "write": "write ", "enter": "search (x) ", "access": ""}


def access_message(path: Path, verb: str, elsewhere: str = ELSEWHERE) -> str:
    """One line: ``cannot <verb> <path> (owner, group, mode) as user <me>: what to do``.

    ``verb`` is ``read``, ``write``, ``enter`` (a folder) or ``access`` (any of them);
    ``elsewhere`` is the last resort offered, e.g. "point storage.database elsewhere".
    """
    kind = "folder " if os.path.isdir(path) else ""
    if verb == "write" and _read_only_fs(path):
        return (f"cannot write {kind}{path}: it is on a read-only file system; remount it "
                f"read-write or {elsewhere}")
    me = user_name()
    found = owner_of(path)
    if found is None:
        return f"cannot {verb} {kind}{path} as user {me}: check its permissions, or {elsewhere}"
    owner, described = found
    return (f"cannot {verb} {kind}{path} ({described}) as user {me}: run as {owner}, or give "
            f"{me} {_GRANT[verb]}access to it (e.g. through its group), or {elsewhere}")
