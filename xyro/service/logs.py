"""Logging to stderr in a form both journald and grep like.

Under systemd (stderr is journald's stream: ``JOURNAL_STREAM`` names its device and inode,
systemd.exec(5)) journald stamps each line itself, so lines carry a syslog priority prefix
(``<6>``) instead of a timestamp; in a terminal they carry an ISO timestamp, even where the
variable was inherited (a terminal started as a user service passes it to its shells).
``format="json"`` emits one JSON object per line for log shippers.
"""

from __future__ import annotations

import json
import logging
import os
import sys

def journald_stderr() -> bool:
    """stderr is the stream ``JOURNAL_STREAM`` names ("device:inode"), so journald reads it."""
    device, _, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    try:
        st = os.fstat(2)
        return (st.st_dev, st.st_ino) == (int(device), int(inode))
    except (OSError, ValueError):
        return False


_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
             logging.CRITICAL: 2}


class _JournalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prio = _PRIORITY.get(record.levelno, 6)
        # journald reads each line on its own: a traceback's lines carry the priority too,
        # or `journalctl -p err` would show its first line alone.
        lines = [f"{record.name}: {record.getMessage()}", *_exc(self, record).splitlines()[1:]]
        return "\n".join(f"<{prio}>{line}" for line in lines)


class _TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s",
                         "%Y-%m-%dT%H:%M:%S%z")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"t": record.created, "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def _exc(fmt: logging.Formatter, record: logging.LogRecord) -> str:
    return ("\n" + fmt.formatException(record.exc_info)) if record.exc_info else ""


def setup_logging(level: str = "info", fmt: str = "text") -> None:
    """Configure the root logger once, from the command's composition root."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    elif journald_stderr():
        handler.setFormatter(_JournalFormatter())
    else:
        handler.setFormatter(_TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    sys.excepthook = _log_uncaught
    root.setLevel(level.upper())
    # urllib3 logs every retry/pool event at DEBUG/WARNING; our own fetch log says enough.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    # APScheduler logs every job run at INFO; job outcomes are logged by the jobs themselves.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def log_fatal(message: str) -> bool:
    """Log ``message``, why the command ends, as one ERROR record when the log's form is
    read by a machine (JSON, or journald's priority prefix): a bare line there would be
    unparseable, or stored at info where ``journalctl -p err`` cannot see it. False when
    the log is plain text (or not set up): the caller prints :func:`bare_fatal` itself."""
    read_by_machine = (_JsonFormatter, _JournalFormatter)
    if not any(isinstance(h.formatter, read_by_machine) for h in logging.getLogger().handlers):
        return False
    logging.getLogger("xyro").error("%s", message)
    return True


def bare_fatal(message: str) -> str:
    """``message`` as the caller prints it when :func:`log_fatal` did not log it. Under
    journald with nothing logging yet (a configuration error comes before the log is set up)
    each line carries the error priority ``<3>``: journald stores a bare line at info, out of
    ``journalctl -p err``."""
    if logging.getLogger().handlers or not journald_stderr():
        return message
    return "\n".join(f"<{_PRIORITY[logging.ERROR]}>{line}" for line in message.splitlines())


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: object) -> None:
    """An exception nothing caught (a bug): one CRITICAL record, in the log's own form (with
    its priority under journald), instead of Python's bare traceback."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)  # type: ignore[arg-type]
        return
    logging.getLogger("xyro").critical("uncaught %s: %s; this is a bug, please report it",
                                       kind.__name__, exc, exc_info=(kind, exc, tb))

