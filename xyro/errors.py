"""User-facing errors: one clear line and an exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path


class XyroError(Exception):
    """An error the CLI reports as one line (what happened, to what, what to do)."""

    exit_code = 1


class UsageError(XyroError):
    """Bad command-line input that click itself cannot catch (exit code 2)."""

    exit_code = 2


class AccessError(XyroError):
    """A file or folder Xyro needs cannot be read, written or created by this user
    (permissions, read-only file system): an environment problem, exit code 2 like a bad
    configuration (DESIGN.md §7). The message names the path, its owner and mode, the user,
    and what to do."""

    exit_code = 2


def permission_message(exc: PermissionError) -> str:
    """One line for a permission error no check foresaw: the path, its owner and mode, the
    user, and what to do."""
    from metadata.connection import search_problem
    from metadata.errors import access_message

    if not exc.filename:
        return f"{exc.strerror or exc}: run as a user with access, or fix the permissions"
    path = Path(exc.filename)
    return search_problem(path) or access_message(path, "access", "fix its permissions")
