"""``xyro views``: the inspection views of the metadata database as CSV, JSON or JSON lines.

The views (``v_hosts``, ``v_recent_errors``, ``v_xml_documents``...; DESIGN.md §4
"Documented SQL views", :mod:`metadata.views`) are read with sqlite-utils, which already
does this job: ``Database.view_names()`` lists them, ``db.view(name).columns`` names their
columns (also for an empty view) and ``rows_where(limit=...)`` streams their rows
as dictionaries, identifiers quoted. The rows are then written with the standard ``csv``
and ``json`` modules: sqlite-utils' own writers live in its command-line module, which is
not part of its library API.

The database is opened read-only at the SQLite level (``mode=ro``): an operator who may
only read the file (DESIGN.md §8: a group that may read the state directory) can export
while the daemon runs, and nothing is ever written.

Registered on the main group by ``xyro.cli`` with :func:`register`.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import click
import sqlite_utils

from metadata import MetadataStore
from metadata.connection import connect_read_only
from xyro.errors import UsageError, XyroError

FORMATS = ("csv", "json", "jsonl")
log = logging.getLogger("xyro.views")


def open_read_only(path: Path) -> sqlite_utils.Database:
    """A sqlite-utils Database over the store's read-only connection.

    :func:`metadata.connection.connect_read_only` decides how (``mode=ro``; ``immutable``
    only when the user may not create the ``-shm`` file and no writer has the file open,
    with a warning logged here) and names the path in any refusal.
    """
    if not path.is_file():
        raise UsageError(f"no database at {path}: run `xyro init` first (or point "
                         "storage.database at an existing one)")
    # The store's own checks first: a Xyro database of this schema version, not another
    # SQLite file nor one from a newer Xyro (whose views may mean something else).
    MetadataStore.open(path, read_only=True).close()
    conn, warning = connect_read_only(path)
    if warning is not None:
        log.warning("%s", warning)
    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


@contextmanager
def _database(path: Path) -> Iterator[sqlite_utils.Database]:
    db = open_read_only(path)
    try:
        yield db
    finally:
        db.close()


def view_columns(db: sqlite_utils.Database, name: str) -> list[str]:
    """The column names of view ``name``, in order."""
    return [c.name for c in db.view(name).columns]


def check_view(db: sqlite_utils.Database, name: str, path: Path) -> None:
    """Raise a usage error (exit 2) naming the valid views when ``name`` is not one."""
    names = sorted(db.view_names())
    if name not in names:
        raise UsageError(f"unknown view {name!r} in {path}: choose one of "
                         f"{', '.join(names) or '(none: run `xyro init` to create them)'}")


def _cell(value: Any) -> Any:
    """BLOBs as upper-case hex, the form the views use for MD5 signatures."""
    return value.hex().upper() if isinstance(value, bytes) else value


def _json_line(row: dict[str, Any]) -> str:
    return json.dumps({k: _cell(v) for k, v in row.items()}, ensure_ascii=False)


def write_rows(rows: Iterable[dict[str, Any]], columns: list[str], fmt: str,
               out: TextIO) -> int:
    """Stream ``rows`` to ``out`` as CSV (header first), a JSON array (one object per line)
    or JSON lines; return how many rows were written."""
    n = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for n, row in enumerate(rows, start=1):
            writer.writerow([_cell(v) for v in row.values()])
    elif fmt == "jsonl":
        for n, row in enumerate(rows, start=1):
            out.write(_json_line(row) + "\n")
    else:
        out.write("[")
        for n, row in enumerate(rows, start=1):
            out.write(("\n" if n == 1 else ",\n") + _json_line(row))
        out.write("\n]\n" if n else "]\n")
    return n


def _listing(db: sqlite_utils.Database, path: Path, fmt: str) -> str:
    names = sorted(db.view_names())
    if fmt != "csv":
        return json.dumps({"database": str(path),
                           "views": {n: view_columns(db, n) for n in names}}, sort_keys=True)
    if not names:
        return f"no views in {path}: run `xyro init` to create them"
    width = max(len(n) for n in names)
    lines = [f"{len(names)} views in {path}; `xyro views NAME --format csv|json|jsonl` "
             "writes one:"]
    lines += [f"  {n:<{width}}  {', '.join(view_columns(db, n))}" for n in names]
    return "\n".join(lines)


@contextmanager
def _output(path: Path | None) -> Iterator[TextIO]:
    """The file given with ``-o`` (clear error when it cannot be written), else stdout."""
    if path is None:
        yield sys.stdout
        return
    try:
        stream = path.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise XyroError(f"cannot write {path}: {exc.strerror or exc}; choose a writable "
                        "path with -o") from None
    with stream:
        yield stream


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``| head``): stop without a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


@click.command("views")
@click.argument("name", required=False)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="csv", show_default=True,
              help="csv: header then rows; json: one array of objects; jsonl: one object "
                   "per line.")
@click.option("--limit", type=click.IntRange(min=0), default=0, metavar="N",
              help="Write at most N rows (0: all) [default: 0].")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to FILE instead of standard output.")
@click.pass_context
def views(ctx: click.Context, name: str | None, fmt: str, limit: int,
          output: Path | None) -> None:
    """List the inspection views of the metadata database, or write view NAME.

    Without NAME: the views and their columns (as JSON with --format json). With NAME
    (e.g. v_hosts, v_recent_errors, v_xml_documents): its rows in the view's order, times
    as UTC text. The database is opened read-only, so reading access is enough, also while
    the daemon runs. README.md ("Inspecting the metadata database") describes each view.
    """
    from xyro.cli.context import app_of as _app, checked_output

    app = _app(ctx)
    path, output = app.database_path, checked_output(app, output)
    with _database(path) as db:
        if name is None:
            with _output(output) as out:
                out.write(_listing(db, path, fmt) + "\n")
            return
        check_view(db, name, path)
        written = export_view(db, name, fmt, limit or None, output)
    if output is not None and written is not None:
        click.echo(f"wrote {written} row(s) of {name} as {fmt} to {output}", err=True)


def export_view(db: sqlite_utils.Database, name: str, fmt: str, limit: int | None,
                output: Path | None) -> int | None:
    """Write view ``name`` to ``output`` (stdout when None); the number of rows written,
    None when the reader of stdout went away first."""
    try:
        with _output(output) as out:
            n = write_rows(db.view(name).rows_where(limit=limit), view_columns(db, name), fmt,
                           out)
            out.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()
        return None
    return n


def register(cli: click.Group) -> None:
    """Add ``views`` to the main ``xyro`` group."""
    cli.add_command(views)
