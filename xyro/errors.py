"""User-facing errors: one clear line and an exit code, never a traceback."""

from __future__ import annotations


class XyroError(Exception):
    """An error the CLI reports as one line (what happened, to what, what to do)."""

    exit_code = 1


class UsageError(XyroError):
    """Bad command-line input that click itself cannot catch (exit code 2)."""

    exit_code = 2
