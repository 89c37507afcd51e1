"""``xyro views``: the inspection views as CSV, JSON and JSON lines, read-only.

The store is a real SQLite file written by the project's own writer (fetches, an XML
version, errors, job runs); every exported view is compared with what ``sqlite3`` itself
returns for ``SELECT * FROM view``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from metadata import FetchRecord, JobRun, MetadataStore, PageType, XmlVersion
from metadata.views import VIEWS
from xyro.cli import views as cli_views
from xyro.cli import cli
from xyro.errors import XyroError

if "views" not in cli.commands:
    cli_views.register(cli)

DAY = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOME, CAT = "http://shop.example/", "http://shop.example/catalog.xml"
FEED, DOC = "http://news.example/feed.xml", "http://shop.example/doc.html"


def _md5(text: str) -> bytes:
    return hashlib.md5(text.encode()).digest()


def fill(db: Path, extra_hosts: int = 0) -> None:
    """Two hosts, an HTML page, an XML document with one version, a 503 and a timeout, two
    job runs; ``extra_hosts`` more hosts with one page each."""
    with MetadataStore.open(db) as store, store.writer() as w:
        w.submit(FetchRecord(HOME, DAY + 60, PageType.HTML, 200, _md5("home"),
                             children=(CAT, DOC, FEED)))
        w.submit(FetchRecord(CAT, DAY + 120, PageType.XML, 200, _md5("<c/>"), size=2048,
                             content_type="application/xml"))
        w.submit(XmlVersion(CAT, _md5("<c/>"), _md5("c14n"), DAY + 120, 2048, "ab/abcdef",
                            True, dtd_url="http://shop.example/catalog.dtd"))
        w.submit(FetchRecord(FEED, DAY + 180, PageType.ERROR, 503, error_kind="http",
                             error_detail="503 Service Unavailable"))
        w.submit(FetchRecord(DOC, DAY + 240, PageType.ERROR, None, error_kind="timeout",
                             error_detail="read deadline 30 s exceeded"))
        w.submit(JobRun("rank", DAY + 300, DAY + 302.5, "ok", "direct+inverse, 31 iter"))
        w.submit(JobRun("plan", DAY + 400, DAY + 400.25, "ok", "K=0.81, 2 pages due"))
        for i in range(extra_hosts):
            w.submit(FetchRecord(f"http://host{i}.example/", DAY + 500 + i, PageType.HTML, 200,
                                 _md5(str(i))))


@pytest.fixture
def site(tmp_path: Path) -> dict[str, Path]:
    db = tmp_path / "var" / "xyro.db"
    db.parent.mkdir()
    fill(db)
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {tmp_path / 'w'}\n")
    return {"config": config, "db": db}


def run(site: dict[str, Path], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"XYRO_CONFIG": str(site["config"])},
                              catch_exceptions=False)


def sqlite_rows(db: Path, view: str) -> tuple[list[str], list[tuple[object, ...]]]:
    conn = sqlite3.connect(db)
    try:
        cur = conn.execute(f"SELECT * FROM {view}")
        return [d[0] for d in cur.description], cur.fetchall()
    finally:
        conn.close()


def test_listing_names_every_documented_view(site: dict[str, Path]) -> None:
    result = run(site, "views")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{len(VIEWS)} views in {site['db']}")
    assert sorted(line.split()[0] for line in lines[1:]) == sorted(VIEWS)
    assert any(line.split() == ["v_hosts", "host,", "urls,", "fetches,", "errors,",
                                "last_fetch"] for line in lines)
    listing = json.loads(run(site, "views", "--format", "json").stdout)
    assert set(listing["views"]) == set(VIEWS)
    assert listing["views"]["v_hosts"] == sqlite_rows(site["db"], "v_hosts")[0]


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_csv_equals_what_sqlite_returns(site: dict[str, Path], view: str) -> None:
    result = run(site, "views", view)
    assert result.exit_code == 0, result.output
    columns, rows = sqlite_rows(site["db"], view)
    got = list(csv.reader(io.StringIO(result.stdout)))
    assert got[0] == columns  # a header even for an empty view
    assert got[1:] == [["" if v is None else str(v) for v in row] for row in rows]


def test_csv_of_hosts_and_errors(site: dict[str, Path]) -> None:
    hosts = list(csv.DictReader(io.StringIO(run(site, "views", "v_hosts").stdout)))
    assert {h["host"]: (h["urls"], h["errors"]) for h in hosts} == {
        "shop.example": ("3", "1"), "news.example": ("1", "1")}
    errors = list(csv.DictReader(io.StringIO(run(site, "views", "v_recent_errors").stdout)))
    assert [(e["kind"], e["last_url"], e["last_detail"]) for e in errors] == [
        ("timeout", DOC, "read deadline 30 s exceeded"),
        ("http", FEED, "503 Service Unavailable")]


@pytest.mark.parametrize("view", ["v_recent_errors", "v_xml_documents", "v_job_runs"])
def test_json_equals_what_sqlite_returns(site: dict[str, Path], view: str) -> None:
    result = run(site, "views", view, "--format", "json")
    assert result.exit_code == 0, result.output
    columns, rows = sqlite_rows(site["db"], view)
    assert json.loads(result.stdout) == [dict(zip(columns, row)) for row in rows]


def test_json_of_an_empty_view_is_an_empty_array(site: dict[str, Path]) -> None:
    assert json.loads(run(site, "views", "v_frontier", "--format", "json").stdout) == []
    assert run(site, "views", "v_frontier", "--format", "jsonl").stdout == ""


def test_jsonl_and_limit(site: dict[str, Path]) -> None:
    lines = run(site, "views", "v_job_runs", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["plan", "rank"]  # newest first
    assert json.loads(lines[1])["seconds"] == 2.5
    limited = run(site, "views", "v_job_runs", "--format", "jsonl", "--limit", "1").stdout
    assert limited.splitlines() == lines[:1]
    assert len(list(csv.reader(io.StringIO(run(site, "views", "v_hosts", "--limit", "1")
                                            .stdout)))) == 2  # header + 1 row


def test_unknown_view_is_a_usage_error_naming_the_views(site: dict[str, Path]) -> None:
    result = run(site, "views", "v_nope")
    assert result.exit_code == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "unknown view 'v_nope'" in result.stderr
    assert all(name in result.stderr for name in VIEWS)
    assert run(site, "views", "urls").exit_code == 2  # a table is not a view
    result = run(site, "views", "v_hosts", "--format", "xml")
    assert result.exit_code == 2 and "'xml' is not one of" in result.stderr


def test_output_file(site: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "hosts.json"
    result = run(site, "views", "v_hosts", "--format", "json", "-o", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    assert f"wrote 2 row(s) of v_hosts as json to {target}" in result.stderr
    assert [h["host"] for h in json.loads(target.read_text())] == ["shop.example",
                                                                    "news.example"]
    result = run(site, "views", "v_hosts", "-o", str(tmp_path / "missing" / "x.csv"))
    assert result.exit_code == 1
    assert "cannot write" in result.stderr and "No such file or directory" in result.stderr


def test_read_only_database(site: dict[str, Path]) -> None:
    """A file the user may only read: exported all the same, and left byte for byte."""
    db = site["db"]
    before = db.read_bytes()
    db.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    if os.geteuid() != 0:  # root may write anyway: then the SQLite-level check below counts
        db.parent.chmod(0o555)  # no -shm can be made: the immutable fallback is taken
    try:
        result = run(site, "views", "v_hosts", "--format", "jsonl")
        assert result.exit_code == 0, result.output
        assert len(result.stdout.splitlines()) == 2
        db_handle = cli_views.open_read_only(db)
        try:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                db_handle.execute("CREATE TABLE t (x)")
        finally:
            db_handle.close()
    finally:
        db.parent.chmod(0o755)
        db.chmod(0o644)
    assert db.read_bytes() == before


def test_missing_or_foreign_database(tmp_path: Path) -> None:
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {tmp_path / 'none.db'}\n")
    result = run({"config": config}, "views", "v_hosts")
    assert result.exit_code == 2 and "run `xyro init` first" in result.stderr
    (tmp_path / "none.db").write_text("not a database, just text " * 100)
    result = run({"config": config}, "views")
    assert result.exit_code == 2 and "is not a usable metadata database" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_newer_or_foreign_sqlite_file_is_refused_as_the_other_commands_do(
        tmp_path: Path, site: dict[str, Path]) -> None:
    conn = sqlite3.connect(site["db"])
    with conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    result = run(site, "views", "v_hosts")
    assert result.exit_code == 2 and "newer than this Xyro supports" in result.stderr
    foreign = tmp_path / "shop.db"
    conn = sqlite3.connect(foreign)
    with conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.close()
    config = tmp_path / "foreign.yaml"
    config.write_text(f"storage:\n  database: {foreign}\n")
    result = run({"config": config}, "views")
    assert result.exit_code == 2 and "run `xyro init` to create them" not in result.stderr
    assert "Xyro" in result.stderr and "Traceback" not in result.stderr


def test_real_process_and_a_closed_pipe(tmp_path: Path) -> None:
    """Through a real interpreter; a reader that stops early (``| head``) ends it quietly."""
    db = tmp_path / "x.db"
    fill(db, extra_hosts=3000)  # more than a pipe buffer of CSV
    env = {**os.environ, "XYRO_CONFIG": "/dev/null", "XYRO_STORAGE__DATABASE": str(db)}
    done = subprocess.run([sys.executable, "-m", "xyro", "views", "v_hosts", "--limit", "2"],
                          capture_output=True, env=env, timeout=60, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "host,urls,fetches,errors,last_fetch"
    proc = subprocess.Popen([sys.executable, "-m", "xyro", "views", "v_hosts"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"host,urls,fetches,errors,last_fetch\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "Broken" not in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a full disk)")
@pytest.mark.parametrize("args", [("views", "v_hosts"), ("status", "--json")])
def test_a_full_disk_on_standard_output_is_one_line_and_exit_2(tmp_path: Path,
                                                               args: tuple[str, ...]) -> None:
    db = tmp_path / "x.db"
    fill(db, extra_hosts=3000)
    env = {**os.environ, "XYRO_CONFIG": "/dev/null", "XYRO_STORAGE__DATABASE": str(db)}
    with open("/dev/full", "wb") as full:
        done = subprocess.run([sys.executable, "-m", "xyro", *args], stdout=full,
                              stderr=subprocess.PIPE, env=env, timeout=60, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: cannot write the output: No space left on device; free space, then try again"]


def test_output_is_never_the_database(site: dict[str, Path]) -> None:
    db = site["db"]
    before = db.read_bytes()
    for args in (("views",), ("views", "v_hosts")):
        result = run(site, *args, "-o", str(db))
        assert result.exit_code == 2 and "is the metadata database" in result.stderr
    assert db.read_bytes() == before
