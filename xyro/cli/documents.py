"""``xyro documents`` and ``xyro export``: the XML warehouse seen from the command line
(DESIGN.md §4, XML versions).

Both only read: the metadata database through a read connection (``xml_versions`` joined
to ``urls`` and ``hosts``) and the warehouse blobs through
:class:`xyro.loader.warehouse.Warehouse` (content-addressed, zlib-compressed, checked
against their hash on read).

The warehouse also keeps the DTDs and external entity files the loader fetched for the
documents (so a restart need not fetch them again): their version rows carry no C14N
signature (:data:`metadata.status.ENTITY_VERSION`). ``xyro documents`` lists them apart,
after the documents, with how many documents declare each as their DTD.

Version numbers: the stored versions of a URL in fetch order, 1 = the oldest still kept;
negative numbers count from the newest (-1 = latest, the default). Pruning old versions
(``loader.versions_per_url``) renumbers, so ``xyro documents --versions`` shows the current
numbers.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from metadata.schema import FETCHED
from metadata.status import ENTITY_VERSION
from metadata.urlkeys import url_hash
from xyro.app import App
from xyro.errors import AccessError, XyroError
from xyro.loader.warehouse import Warehouse, WarehouseError
from xyro.net.urls import canonicalize
from xyro.publication.trust import parse_w3c_datetime


@dataclass(frozen=True, slots=True)
class DocumentFilter:
    """What ``xyro documents`` selects. ``host`` without a port matches every port;
    ``dtd`` is a case-insensitive substring of the latest version's DTD URL (of the URL
    itself for DTD and entity files); ``valid`` True/False selects validated documents by
    their latest result (DTDs and entities are never validated, so none match);
    ``changed_since`` (POSIX seconds) keeps URLs whose latest version was stored at or after
    it. ``limit`` applies to documents and to DTD/entity files separately."""

    host: str | None = None
    dtd: str | None = None
    valid: bool | None = None
    changed_since: float | None = None
    limit: int | None = 100


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One stored version: its number (1 = oldest kept), time, size, hashes, checks."""

    number: int
    fetched_at: float
    size: int
    md5: str
    storage_key: str
    valid: bool | None
    validation_error: str | None
    dtd_url: str | None
    schema_url: str | None


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """One XML document and its latest version."""

    url: str
    host: str
    versions: int
    first_fetched: float
    last_fetched: float
    size: int
    md5: str
    valid: bool | None
    validation_error: str | None
    dtd_url: str | None
    schema_url: str | None


@dataclass(frozen=True, slots=True)
class EntityRow:
    """One DTD or external entity file kept in the warehouse, and its latest version;
    ``used_by``: documents whose latest version declares it as their DTD."""

    url: str
    host: str
    versions: int
    first_fetched: float
    last_fetched: float
    size: int
    md5: str
    content_type: str | None
    used_by: int


#: The latest version of every URL in the warehouse (one window pass over xml_versions).
_LATEST = f"""
WITH ranked AS (
  SELECT v.*, {ENTITY_VERSION} AS is_entity, row_number() OVER w AS rn,
         count(*) OVER (PARTITION BY v.url_id) AS versions,
         min(v.fetched_at) OVER (PARTITION BY v.url_id) AS first_fetched
  FROM xml_versions v
  WINDOW w AS (PARTITION BY v.url_id ORDER BY v.fetched_at DESC, v.id DESC)),
latest AS (SELECT * FROM ranked WHERE rn = 1)
"""

_DOCUMENTS = _LATEST + """
SELECT u.url, h.host, r.versions, r.first_fetched, r.fetched_at, r.size, hex(r.md5), r.valid,
       r.validation_error, r.dtd_url, r.schema_url, count(*) OVER () AS total
FROM latest r JOIN urls u ON u.id = r.url_id JOIN hosts h ON h.id = u.host_id
WHERE NOT r.is_entity {where}
ORDER BY r.fetched_at DESC, u.url
{limit}
"""

_ENTITIES = _LATEST + """,
uses AS (SELECT dtd_url, count(*) AS n FROM latest
         WHERE NOT is_entity AND dtd_url IS NOT NULL GROUP BY dtd_url)
SELECT u.url, h.host, r.versions, r.first_fetched, r.fetched_at, r.size, hex(r.md5),
       u.content_type, coalesce(s.n, 0), count(*) OVER () AS total
FROM latest r JOIN urls u ON u.id = r.url_id JOIN hosts h ON h.id = u.host_id
     LEFT JOIN uses s ON s.dtd_url = u.url
WHERE r.is_entity {where}
ORDER BY r.fetched_at DESC, u.url
{limit}
"""


def _where(flt: DocumentFilter, dtd_column: str) -> tuple[str, list[Any]]:
    """SQL conditions and arguments for ``flt``; ``dtd_column`` is what ``--dtd`` matches."""
    where: list[str] = []
    args: list[Any] = []
    if flt.host:
        host = flt.host.strip().lower()
        where.append("(h.host = ? OR substr(h.host, 1, ?) = ?)")
        args += [host, len(host) + 1, host + ":"]
    if flt.dtd:
        where.append(f"instr(lower({dtd_column}), ?) > 0")
        args.append(flt.dtd.lower())
    if flt.valid is not None:
        where.append("r.valid = ?")
        args.append(1 if flt.valid else 0)
    if flt.changed_since is not None:
        where.append("r.fetched_at >= ?")
        args.append(flt.changed_since)
    return "".join(f" AND {w}" for w in where), args


def _select(conn: sqlite3.Connection, template: str, flt: DocumentFilter,
            dtd_column: str) -> tuple[list[tuple[Any, ...]], int]:
    where, args = _where(flt, dtd_column)
    sql = template.format(where=where, limit="LIMIT ?" if flt.limit else "")
    rows = conn.execute(sql, [*args, flt.limit] if flt.limit else args).fetchall()
    return rows, (rows[0][-1] if rows else 0)


def list_documents(conn: sqlite3.Connection, flt: DocumentFilter) -> tuple[list[DocumentRow], int]:
    """The XML documents matching ``flt`` (DTDs and entities left out), newest change
    first, and how many match in all."""
    rows, total = _select(conn, _DOCUMENTS, flt, "r.dtd_url")
    return [DocumentRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                        None if r[7] is None else bool(r[7]), *r[8:11]) for r in rows], total


def list_entities(conn: sqlite3.Connection, flt: DocumentFilter) -> tuple[list[EntityRow], int]:
    """The DTDs and external entity files matching ``flt``, newest first, and how many match
    in all; ``--dtd`` matches their own URL, and ``--valid``/``--invalid`` none of them."""
    if flt.valid is not None:
        return [], 0
    rows, total = _select(conn, _ENTITIES, flt, "u.url")
    return [EntityRow(*r[:9]) for r in rows], total


def url_versions(conn: sqlite3.Connection, url: str) -> tuple[str, list[VersionRow]] | None:
    """(stored URL, its versions oldest first) for ``url`` as typed or canonicalized; None
    when the database does not know the URL at all."""
    for candidate in dict.fromkeys(u for u in (canonicalize(url), url.strip()) if u):
        # Only a fetched URL has versions, and only that condition uses the hash index.
        row = conn.execute(f"SELECT id, url FROM urls WHERE hash = ? AND url = ? AND {FETCHED}",
                           (url_hash(candidate), candidate)).fetchone()
        if row is None:
            continue
        versions = conn.execute(
            "SELECT fetched_at, size, hex(md5), storage_key, valid, validation_error, dtd_url, "
            "schema_url FROM xml_versions WHERE url_id = ? ORDER BY fetched_at, id",
            (row[0],)).fetchall()
        return row[1], [VersionRow(n, v[0], v[1], v[2], v[3], None if v[4] is None
                                   else bool(v[4]), v[5], v[6], v[7])
                        for n, v in enumerate(versions, start=1)]
    return None


def pick_version(url: str, versions: list[VersionRow], number: int | None) -> VersionRow:
    """Version ``number`` (1 = oldest kept, -1 = latest, None = latest) or a clear error."""
    if not versions:
        raise XyroError(f"{url} is known but has no stored XML version (it was not loaded "
                        "as XML); list stored documents with `xyro documents`")
    n = len(versions)
    if number is None:
        number = -1
    if number == 0 or not -n <= number <= n:
        raise XyroError(f"{url} has no version {number}: it has {n} stored version(s), "
                        f"numbered 1..{n} (or -1..-{n} from the newest); see "
                        f"`xyro documents --versions --host HOST`")
    return versions[number - 1 if number > 0 else n + number]


def read_version_bytes(warehouse_dir: str | Path, version: VersionRow) -> bytes:
    """The decompressed bytes of ``version`` from the warehouse (hash-checked)."""
    try:
        return Warehouse(warehouse_dir).get(version.storage_key)
    except WarehouseError as exc:
        raise XyroError(f"cannot read version {version.number}: {exc}; the warehouse "
                        "(storage.warehouse_dir) does not match the database") from None


def _iso(t: float | None) -> str:
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _valid_word(valid: bool | None) -> str:
    return "-" if valid is None else ("yes" if valid else "no")


def _changed_since(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    parsed = parse_w3c_datetime(value)
    if parsed is None:
        raise click.BadParameter(f"{value!r} is not a date: give YYYY-MM-DD or "
                                 "YYYY-MM-DDThh:mm[:ss]Z (UTC unless a zone is given)")
    return parsed


def _utf8(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A text argument SQLite can bind: bytes that are not UTF-8 (a mistyped shell escape)
    are a usage error, not a traceback."""
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise click.BadParameter(f"{value!r} is not valid UTF-8 text") from None
    return value


@click.command("documents")
@click.option("--host", metavar="HOST", callback=_utf8,
              help="Only this host (HOST or HOST:PORT).")
@click.option("--dtd", metavar="URL-OR-SUBSTRING", callback=_utf8,
              help="Only documents whose latest DTD URL contains this, and DTD/entity files "
                   "whose own URL does (case-insensitive).")
@click.option("--valid/--invalid", "valid", default=None,
              help="Only documents whose latest version passed / failed DTD validation.")
@click.option("--changed-since", "changed_since", metavar="DATE", callback=_changed_since,
              help="Only documents with a version stored at or after DATE "
                   "(YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ).")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True,
              metavar="N",
              help="Show at most N documents and N DTD/entity files (0: all).")
@click.option("--versions", "with_versions", is_flag=True,
              help="Also list every stored version (the numbers `xyro export --version` takes).")
@click.option("--dtds", "dtds_only", is_flag=True,
              help="List only the DTDs and external entity files the loader keeps.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object instead of text (documents and dtds apart).")
@click.pass_context
def documents(ctx: click.Context, host: str | None, dtd: str | None, valid: bool | None,
              changed_since: float | None, limit: int, with_versions: bool, dtds_only: bool,
              as_json: bool) -> None:
    """List the XML documents in the warehouse, newest change first, then the DTDs and
    external entity files kept for them.

    One line per document: LAST CHANGED, when its latest version was fetched (UTC; a read
    that finds it unchanged stores nothing), number of stored versions, size of the latest
    version in bytes, its DTD validation (yes/no/- not validated), URL, then its DTD and
    XML Schema location when it declares them. One line per DTD or entity file: its latest
    version's fetch, versions, size, DOCS (documents whose latest version declares it as
    their DTD; 0 for entities a DTD pulls in), URL.
    """
    flt = DocumentFilter(host, dtd, valid, changed_since, limit or None)
    app = _app_of(ctx)
    with app.open_store(read_only=True) as store:
        conn = store.read_connection()
        try:
            listing = gather(conn, flt, with_versions=with_versions, dtds_only=dtds_only)
        finally:
            conn.close()
    if as_json:
        click.echo(json.dumps(listing_json(listing), sort_keys=True))
    else:
        click.echo(format_listing(listing))


@dataclass(frozen=True, slots=True)
class Listing:
    """What ``xyro documents`` shows: documents (None with ``--dtds``), DTD/entity files,
    the totals before ``--limit``, and the versions of each URL (None without
    ``--versions``)."""

    documents: list[DocumentRow] | None
    total: int
    entities: list[EntityRow]
    entities_total: int
    versions: dict[str, list[VersionRow]] | None


def gather(conn: sqlite3.Connection, flt: DocumentFilter, *, with_versions: bool = False,
           dtds_only: bool = False) -> Listing:
    """Run the listing queries of ``xyro documents`` on one read connection."""
    docs, total = (None, 0) if dtds_only else list_documents(conn, flt)
    entities, entities_total = list_entities(conn, flt)
    versions = None
    if with_versions:
        urls = [r.url for r in docs or []] + [e.url for e in entities]
        versions = {u: (url_versions(conn, u) or (u, []))[1] for u in urls}
    return Listing(docs, total, entities, entities_total, versions)


def _row_json(row: DocumentRow | EntityRow,
              versions: dict[str, list[VersionRow]] | None) -> dict[str, Any]:
    out = asdict(row)
    out["first_fetched"], out["last_fetched"] = _iso(row.first_fetched), _iso(row.last_fetched)
    out["last_fetched_s"] = row.last_fetched
    if versions is not None:
        out["version_list"] = [{**asdict(v), "fetched": _iso(v.fetched_at)}
                               for v in versions.get(row.url, [])]
    return out


def listing_json(listing: Listing) -> dict[str, Any]:
    """``--json``: ``documents`` (with ``total``/``shown``, left out with ``--dtds``) and
    ``dtds`` (with ``dtds_total``/``dtds_shown``), each row with ISO times."""
    out: dict[str, Any] = {
        "dtds_total": listing.entities_total, "dtds_shown": len(listing.entities),
        "dtds": [_row_json(e, listing.versions) for e in listing.entities]}
    if listing.documents is not None:
        out.update({"total": listing.total, "shown": len(listing.documents),
                    "documents": [_row_json(d, listing.versions) for d in listing.documents]})
    return out


def format_listing(listing: Listing) -> str:
    """The text of ``xyro documents``: the documents, then the DTD and entity files."""
    versions = listing.versions or {}
    parts = []
    if listing.documents is not None:
        parts.append(format_documents(listing.documents, listing.total, versions))
    if listing.entities or listing.documents is None:
        parts.append(format_entities(listing.entities, listing.entities_total, versions))
    return "\n\n".join(parts)


def _shown(shown: int, total: int, noun: str) -> str:
    """The closing count of a listing, with a hint when ``--limit`` cut it."""
    if total > shown:
        return f"{shown} of {total} {noun} (raise --limit to see more)"
    return f"{total} {noun}"


def format_documents(rows: list[DocumentRow], total: int,
                     versions: dict[str, list[VersionRow]]) -> str:
    """The text listing of ``xyro documents`` (docstring of the command)."""
    if not rows:
        return "no XML documents match"
    size_w = max(4, *(len(str(r.size)) for r in rows))
    lines = [f"{'LAST CHANGED':<20}  {'VERS':>4}  {'SIZE':>{size_w}}  VALID  URL"]
    for r in rows:
        lines.append(f"{_iso(r.last_fetched):<20}  {r.versions:>4}  {r.size:>{size_w}}  "
                     f"{_valid_word(r.valid):<5}  {r.url}")
        extra = [f"dtd: {r.dtd_url}" if r.dtd_url else "",
                 f"schema: {r.schema_url}" if r.schema_url else "",
                 f"error: {r.validation_error}" if r.valid is False and r.validation_error
                 else ""]
        if any(extra):
            lines.append(" " * (37 + size_w) + "  ".join(e for e in extra if e))
        for v in versions.get(r.url, []):
            lines.append(f"{_iso(v.fetched_at):<20}  {'#' + str(v.number):>4}  "
                         f"{v.size:>{size_w}}  {_valid_word(v.valid):<5}  "
                         f"md5 {v.md5.lower()}")
    lines.append(_shown(len(rows), total, "document(s)"))
    return "\n".join(lines)


def format_entities(rows: list[EntityRow], total: int,
                    versions: dict[str, list[VersionRow]]) -> str:
    """The DTD and entity section of ``xyro documents`` (docstring of the command)."""
    if not rows:
        return "no DTDs or external entity files match"
    size_w = max(4, *(len(str(r.size)) for r in rows))
    lines = [f"DTDs and entities ({total}):",
             f"{'LAST CHANGED':<20}  {'VERS':>4}  {'SIZE':>{size_w}}  {'DOCS':>5}  URL"]
    for r in rows:
        lines.append(f"{_iso(r.last_fetched):<20}  {r.versions:>4}  {r.size:>{size_w}}  "
                     f"{r.used_by:>5}  {r.url}")
        for v in versions.get(r.url, []):
            lines.append(f"{_iso(v.fetched_at):<20}  {'#' + str(v.number):>4}  "
                         f"{v.size:>{size_w}}  {'':>5}  md5 {v.md5.lower()}")
    lines.append(_shown(len(rows), total, "DTD/entity file(s)"))
    return "\n".join(lines)


@click.command("export")
@click.argument("url", callback=_utf8)
@click.option("--version", "number", type=int, default=None, metavar="N",
              help="Version number: 1 = oldest kept, -1 = latest [default: latest].")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to FILE instead of standard output.")
@click.pass_context
def export(ctx: click.Context, url: str, number: int | None, output: Path | None) -> None:
    """Write one stored version of the XML document at URL, decompressed, byte for byte.

    DTD and entity files listed by `xyro documents --dtds` export the same way. The
    inspection views (hosts, errors, change rates...) are written by `xyro views NAME
    --format csv|json|jsonl`.
    """
    from xyro.cli.context import checked_output

    app = _app_of(ctx)
    output = checked_output(app, output)
    with app.open_store(read_only=True) as store:
        conn = store.read_connection()
        try:
            found = url_versions(conn, url)
        finally:
            conn.close()
    if found is None:
        raise XyroError(f"no XML document with URL {url} in {app.database_path}; list them "
                        "with `xyro documents`")
    stored_url, versions = found
    version = pick_version(stored_url, versions, number)
    body = read_version_bytes(app.config.storage.warehouse_dir, version)
    if output is None:
        stream = sys.stdout.buffer
        sys.stdout.flush()
        stream.write(body)
        stream.flush()
        return
    try:
        output.write_bytes(body)
    except OSError as exc:
        # Permissions, a read-only or full disk: the environment's, as exit 2 says.
        raise AccessError(f"cannot write {output}: {exc.strerror or exc}; choose a "
                          "writable path with -o, or free space") from None
    click.echo(f"wrote {len(body)} bytes of {stored_url} version {version.number} of "
               f"{len(versions)} (fetched {_iso(version.fetched_at)}) to {output}", err=True)


def _app_of(ctx: click.Context) -> App:
    from xyro.cli.context import app_of as _app

    return _app(ctx)


def register(cli: click.Group) -> None:
    """Add ``documents`` and ``export`` to the main ``xyro`` group."""
    cli.add_command(documents)
    cli.add_command(export)
