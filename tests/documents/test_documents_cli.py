"""``xyro documents`` and ``xyro export`` on a real SQLite store and a real warehouse.

Versions are written the way the loader writes them: the bytes through
:class:`xyro.loader.warehouse.Warehouse`, the rows as ``XmlVersion`` ops through the
metadata writer; documents with a C14N signature, the DTD and entity files it keeps for
them without one (``LoaderStage.store_entity``), which ``xyro documents`` lists apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from calendar import timegm
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from metadata import MetadataStore
from metadata.records import FetchRecord, PageType, XmlVersion
from xyro.cli import cli
from xyro.cli.documents import register
from xyro.loader.warehouse import Warehouse

if "documents" not in cli.commands:
    register(cli)

T0 = float(timegm((2024, 5, 1, 12, 0, 0)))
DAY = 86400.0
DOC_A = "http://a.example.com/docs/book.xml"
DOC_B = "http://b.example.com:8080/feed.xml"
DOC_C = "http://a.example.com/docs/bad.xml"
HTML = "http://a.example.com/index.html"
DOCBOOK = "http://www.oasis-open.org/docbook/xml/4.5/docbookx.dtd"
ENTITIES = "http://www.oasis-open.org/docbook/xml/4.5/dbcentx.mod"
DTD_BODY = b'<!ENTITY % dbcent SYSTEM "dbcentx.mod">\n<!ELEMENT doc (#PCDATA)>\n'
ENT_BODY = b'<!ENTITY euro "&#x20AC;">\n'


def body_of(text: str) -> bytes:
    return f'<?xml version="1.0"?>\n<doc>{text}</doc>\n'.encode()


@pytest.fixture
def site(tmp_path: Path) -> dict[str, object]:
    """A database with 3 XML documents (A: 3 versions, B: 1, C: 1 invalid), one HTML page,
    and the DocBook DTD (declared by A) and one of its entity files, fetched for the loader."""
    db, warehouse_dir = tmp_path / "var" / "xyro.db", tmp_path / "var" / "warehouse"
    db.parent.mkdir()
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {db}\n  warehouse_dir: {warehouse_dir}\n")
    warehouse = Warehouse(warehouse_dir)
    bodies: dict[tuple[str, int], bytes] = {}
    specs = [(DOC_A, T0, "v1", True, DOCBOOK, None),
             (DOC_A, T0 + DAY, "v2 " * 500, True, DOCBOOK, None),
             (DOC_A, T0 + 3 * DAY, "v3", True, DOCBOOK, "http://a.example.com/book.xsd"),
             (DOC_B, T0 + 2 * DAY, "feed", None, None, None),
             (DOC_C, T0 + 0.5 * DAY, "broken", False, "http://a.example.com/custom.dtd", None)]
    with MetadataStore.open(db) as store:
        writer = store.writer()
        try:
            writer.submit(FetchRecord(HTML, T0, PageType.HTML, 200, b"\0" * 16))
            for url, at, text, valid, dtd, schema in specs:
                body = body_of(text)
                key = warehouse.put(body)
                bodies[(url, sum(1 for u, _ in bodies if u == url) + 1)] = body
                writer.submit(FetchRecord(url, at, PageType.XML, 200, hashlib.md5(body).digest(),
                                          content_type="application/xml", size=len(body)))
                writer.submit(XmlVersion(
                    url=url, md5=hashlib.md5(body).digest(),
                    c14n_signature=hashlib.md5(b"c14n " + body).digest(),
                    fetched_at=at, size=len(body), storage_key=key, valid=valid,
                    validation_error="element doc: not declared" if valid is False else None,
                    dtd_url=dtd, schema_url=schema))
            for url, at, body, ctype in ((DOCBOOK, T0 - 60, DTD_BODY, "application/xml-dtd"),
                                         (ENTITIES, T0 - 30, ENT_BODY, "text/plain")):
                bodies[(url, 1)] = body
                md5 = hashlib.md5(body).digest()
                writer.submit(FetchRecord(url, at, PageType.DTD, 200, md5, content_type=ctype,
                                          size=len(body)))
                writer.submit(XmlVersion(url=url, md5=md5, c14n_signature=None, fetched_at=at,
                                         size=len(body), storage_key=warehouse.put(body),
                                         valid=None))
        finally:
            writer.close()
    return {"config": config, "bodies": bodies, "warehouse": warehouse_dir, "db": db}


def run(site: dict[str, object], *args: str) -> Result:
    runner = CliRunner()
    return runner.invoke(cli, list(args), env={"XYRO_CONFIG": str(site["config"])},
                         catch_exceptions=False)


def listed(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [d["url"] for d in json.loads(result.stdout)["documents"]]


def test_documents_lists_latest_version_newest_first(site: dict[str, object]) -> None:
    result = run(site, "documents", "--json")
    report = json.loads(result.stdout)
    assert report["total"] == 3 and report["shown"] == 3
    assert report["dtds_total"] == 2 and report["dtds_shown"] == 2
    assert [d["url"] for d in report["documents"]] == [DOC_A, DOC_B, DOC_C]
    a = report["documents"][0]
    bodies = site["bodies"]
    assert a["versions"] == 3 and a["host"] == "a.example.com"
    assert a["size"] == len(bodies[(DOC_A, 3)])  # type: ignore[index]
    assert a["md5"] == hashlib.md5(bodies[(DOC_A, 3)]).hexdigest().upper()  # type: ignore[index]
    assert a["first_fetched"] == "2024-05-01T12:00:00Z"
    assert a["last_fetched"] == "2024-05-04T12:00:00Z" and a["last_fetched_s"] == T0 + 3 * DAY
    assert a["valid"] is True and a["dtd_url"] == DOCBOOK
    assert a["schema_url"] == "http://a.example.com/book.xsd"
    assert report["documents"][1]["valid"] is None
    c = report["documents"][2]
    assert c["valid"] is False and c["validation_error"] == "element doc: not declared"


def test_documents_text_output(site: dict[str, object]) -> None:
    result = run(site, "documents")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["LAST", "CHANGED", "VERS", "SIZE", "VALID", "URL"]
    assert lines[1].split()[:2] == ["2024-05-04T12:00:00Z", "3"] and lines[1].endswith(DOC_A)
    assert lines[2].split() == [f"dtd: {DOCBOOK}".split()[0], DOCBOOK, "schema:",
                                "http://a.example.com/book.xsd"]
    assert any(line.endswith(DOC_B) and " - " in line for line in lines)
    assert "error: element doc: not declared" in result.stdout
    # The documents, then the DTD and entity files apart, each with its own count.
    end = lines.index("3 document(s)")
    assert not any(line.endswith((DOCBOOK, ENTITIES)) for line in lines[:end])
    assert lines[end + 1:end + 3] == ["", "DTDs and entities (2):"]
    assert lines[end + 3].split() == ["LAST", "CHANGED", "VERS", "SIZE", "DOCS", "URL"]
    entity, dtd = lines[end + 4].split(), lines[end + 5].split()
    assert entity == ["2024-05-01T11:59:30Z", "1", str(len(ENT_BODY)), "0", ENTITIES]
    assert dtd == ["2024-05-01T11:59:00Z", "1", str(len(DTD_BODY)), "1", DOCBOOK]
    assert lines[-1] == "2 DTD/entity file(s)"


@pytest.mark.parametrize("args, expected", [
    (("--host", "a.example.com"), [DOC_A, DOC_C]),
    (("--host", "B.EXAMPLE.COM"), [DOC_B]),          # any port, any case
    (("--host", "b.example.com:8080"), [DOC_B]),
    (("--host", "b.example.com:9"), []),
    (("--host", "example.com"), []),                   # not a suffix match
    (("--dtd", "docbook"), [DOC_A]),
    (("--dtd", DOCBOOK), [DOC_A]),
    (("--dtd", "CUSTOM.dtd"), [DOC_C]),
    (("--valid",), [DOC_A]),
    (("--invalid",), [DOC_C]),
    (("--changed-since", "2024-05-03"), [DOC_A, DOC_B]),
    (("--changed-since", "2024-05-03T12:00:00Z"), [DOC_A, DOC_B]),
    (("--changed-since", "2024-05-03T12:00:01Z"), [DOC_A]),
    (("--changed-since", "2030-01-01"), []),
    (("--host", "a.example.com", "--valid", "--dtd", "docbook"), [DOC_A]),
])
def test_documents_filters(site: dict[str, object], args: tuple[str, ...],
                           expected: list[str]) -> None:
    assert listed(run(site, "documents", "--json", *args)) == expected


def test_dtds_and_entities_are_listed_apart(site: dict[str, object]) -> None:
    report = json.loads(run(site, "documents", "--json").stdout)
    assert DOCBOOK not in [d["url"] for d in report["documents"]]
    entity, dtd = report["dtds"]
    assert [entity["url"], dtd["url"]] == [ENTITIES, DOCBOOK]  # newest first
    assert dtd["used_by"] == 1 and entity["used_by"] == 0      # DOC_A declares the DTD
    assert dtd["content_type"] == "application/xml-dtd" and dtd["host"] == "www.oasis-open.org"
    assert dtd["size"] == len(DTD_BODY) and dtd["versions"] == 1
    assert dtd["md5"] == hashlib.md5(DTD_BODY).hexdigest().upper()
    assert dtd["last_fetched"] == "2024-05-01T11:59:00Z" and dtd["last_fetched_s"] == T0 - 60
    assert "valid" not in dtd  # never validated: no such field


def test_dtds_flag_lists_only_them(site: dict[str, object]) -> None:
    report = json.loads(run(site, "documents", "--dtds", "--json").stdout)
    assert set(report) == {"dtds", "dtds_total", "dtds_shown"}
    assert [d["url"] for d in report["dtds"]] == [ENTITIES, DOCBOOK]
    text = run(site, "documents", "--dtds").stdout.splitlines()
    assert text[0] == "DTDs and entities (2):" and text[-1] == "2 DTD/entity file(s)"
    assert not any(DOC_A in line for line in text)
    limited = run(site, "documents", "--dtds", "--limit", "1", "--versions").stdout
    assert "1 of 2 DTD/entity file(s) (raise --limit to see more)" in limited
    assert f"md5 {hashlib.md5(ENT_BODY).hexdigest()}" in limited


@pytest.mark.parametrize("args, docs, dtds", [
    ((), [DOC_A, DOC_B, DOC_C], [ENTITIES, DOCBOOK]),
    (("--host", "www.oasis-open.org"), [], [ENTITIES, DOCBOOK]),
    (("--host", "a.example.com"), [DOC_A, DOC_C], []),
    (("--dtd", "docbookx"), [DOC_A], [DOCBOOK]),         # --dtd matches a DTD's own URL
    (("--valid",), [DOC_A], []),                         # DTDs are never validated
    (("--invalid",), [DOC_C], []),
    (("--changed-since", "2024-05-01T11:59:30Z"), [DOC_A, DOC_B, DOC_C], [ENTITIES]),
    (("--limit", "1"), [DOC_A], [ENTITIES]),             # the limit applies to each list
])
def test_filters_apply_to_both_lists(site: dict[str, object], args: tuple[str, ...],
                                     docs: list[str], dtds: list[str]) -> None:
    report = json.loads(run(site, "documents", "--json", *args).stdout)
    assert [d["url"] for d in report["documents"]] == docs
    assert [d["url"] for d in report["dtds"]] == dtds


def test_export_a_dtd(site: dict[str, object]) -> None:
    assert run(site, "export", DOCBOOK).stdout_bytes == DTD_BODY


def test_documents_limit_and_versions(site: dict[str, object]) -> None:
    report = json.loads(run(site, "documents", "--json", "--limit", "1", "--versions").stdout)
    assert report["total"] == 3 and report["shown"] == 1
    versions = report["documents"][0]["version_list"]
    assert [v["number"] for v in versions] == [1, 2, 3]
    assert [v["fetched"] for v in versions] == ["2024-05-01T12:00:00Z", "2024-05-02T12:00:00Z",
                                                "2024-05-04T12:00:00Z"]
    text = run(site, "documents", "--limit", "2", "--versions").stdout
    assert "#2" in text and "2 of 3 document(s) (raise --limit to see more)" in text
    assert len(listed(run(site, "documents", "--json", "--limit", "0"))) == 3


def test_documents_on_an_empty_database(tmp_path: Path) -> None:
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {tmp_path / 'x.db'}\n"
                      f"  warehouse_dir: {tmp_path / 'w'}\n")
    MetadataStore.open(tmp_path / "x.db").close()
    result = run({"config": config}, "documents")
    assert result.exit_code == 0 and result.stdout.strip() == "no XML documents match"
    assert json.loads(run({"config": config}, "documents", "--json").stdout) == {
        "total": 0, "shown": 0, "documents": [], "dtds_total": 0, "dtds_shown": 0, "dtds": []}
    result = run({"config": config}, "documents", "--dtds")
    assert result.stdout.strip() == "no DTDs or external entity files match"


def test_documents_bad_date_is_a_usage_error(site: dict[str, object]) -> None:
    result = run(site, "documents", "--changed-since", "last tuesday")
    assert result.exit_code == 2
    assert "'last tuesday' is not a date" in result.stderr


def test_export_versions_to_stdout_and_file(site: dict[str, object], tmp_path: Path) -> None:
    bodies = site["bodies"]
    assert run(site, "export", DOC_A).stdout_bytes == bodies[(DOC_A, 3)]  # type: ignore[index]
    for number, expected in (("1", 1), ("2", 2), ("-1", 3), ("-3", 1)):
        out = run(site, "export", DOC_A, "--version", number).stdout_bytes
        assert out == bodies[(DOC_A, expected)], number  # type: ignore[index]
    target = tmp_path / "out.xml"
    result = run(site, "export", "HTTP://A.example.com:80/docs/book.xml", "--version", "2",
                 "-o", str(target))
    assert result.exit_code == 0
    assert target.read_bytes() == bodies[(DOC_A, 2)]  # type: ignore[index]
    assert f"version 2 of 3 (fetched 2024-05-02T12:00:00Z) to {target}" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("http://nowhere.example.com/x.xml",), "no XML document with URL "
                                            "http://nowhere.example.com/x.xml"),
    ((HTML,), f"{HTML} is known but has no stored XML version"),
    ((DOC_A, "--version", "4"), f"{DOC_A} has no version 4: it has 3 stored version(s)"),
    ((DOC_A, "--version", "0"), f"{DOC_A} has no version 0"),
    ((DOC_A, "--version", "-4"), f"{DOC_A} has no version -4"),
    (("not a url",), "no XML document with URL not a url"),
])
def test_export_errors_are_one_line_exit_1(site: dict[str, object], args: tuple[str, ...],
                                            message: str) -> None:
    result = run(site, "export", *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout_bytes == b""


@pytest.mark.parametrize("args", [("export", "http://a.example/\udcff"),
                                  ("documents", "--host", "\udcff"),
                                  ("documents", "--dtd", "x\udcff")])
def test_an_argument_that_is_not_utf8_is_a_usage_error(site: dict[str, object],
                                                       args: tuple[str, ...]) -> None:
    # What a shell passes for a mistyped escape ($'\377'): a surrogate SQLite cannot bind.
    result = run(site, *args)
    assert result.exit_code == 2, result.stderr
    assert "not valid UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_export_to_an_unwritable_path(site: dict[str, object], tmp_path: Path) -> None:
    # The environment's problem (a path, its permissions, a full disk): exit 2.
    result = run(site, "export", DOC_A, "-o", str(tmp_path / "missing-dir" / "x.xml"))
    assert result.exit_code == 2
    assert "cannot write" in result.stderr and "No such file or directory" in result.stderr
    if Path("/dev/full").exists():
        result = run(site, "export", DOC_A, "-o", "/dev/full")
        assert result.exit_code == 2 and "No space left on device" in result.stderr
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        result = run(site, "export", DOC_A, "-o", str(locked / "x.xml"))
        assert result.exit_code == 2 and "Permission denied" in result.stderr


def test_export_with_a_missing_or_corrupt_blob(site: dict[str, object]) -> None:
    warehouse = Warehouse(site["warehouse"])  # type: ignore[arg-type]
    key = Warehouse.key_of(site["bodies"][(DOC_B, 1)])  # type: ignore[index]
    warehouse.path_of(key).write_bytes(b"not zlib")
    result = run(site, "export", DOC_B)
    assert result.exit_code == 1 and "is corrupt" in result.stderr
    warehouse.path_of(key).unlink()
    result = run(site, "export", DOC_B)
    assert result.exit_code == 1 and "is missing" in result.stderr
    assert "storage.warehouse_dir" in result.stderr


def test_no_database_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "xyro.yaml"
    config.write_text(f"storage:\n  database: {tmp_path / 'none.db'}\n")
    for args in (("documents",), ("export", DOC_A)):
        result = run({"config": config}, *args)
        assert result.exit_code == 2 and "run `xyro init` first" in result.stderr


def test_help_texts() -> None:
    runner = CliRunner()
    for command, needle in (("documents", "--changed-since"), ("documents", "--dtds"),
                            ("export", "--version N")):
        result = runner.invoke(cli, [command, "--help"])
        assert result.exit_code == 0 and needle in result.output


def test_real_process_exports_bytes(site: dict[str, object], tmp_path: Path) -> None:
    """The commands through a real interpreter (registered the way xyro/cli/__init__.py does)."""
    script = ("import sys\nfrom xyro.cli import cli, main\nfrom xyro.cli.documents import "
              "register\nif 'export' not in cli.commands:\n    register(cli)\nmain(sys.argv[1:])\n")
    env = {**os.environ, "XYRO_CONFIG": str(site["config"])}
    done = subprocess.run([sys.executable, "-c", script, "export", DOC_A, "--version", "1"],
                          capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == site["bodies"][(DOC_A, 1)]  # type: ignore[index]
    done = subprocess.run([sys.executable, "-c", script, "export", "http://x.example/none"],
                          capture_output=True, env=env, timeout=60)
    assert done.returncode == 1 and done.stderr.decode().startswith("error: no XML document")


def test_export_never_overwrites_the_database_or_the_warehouse(site: dict[str, object],
                                                              tmp_path: Path) -> None:
    db, warehouse = Path(str(site["db"])), Path(str(site["warehouse"]))
    before = db.read_bytes()
    blob = next(p for p in warehouse.rglob("*") if p.is_file())
    alias = tmp_path / "alias.db"
    alias.hardlink_to(db)
    for target in (db, Path(f"{db}-wal"), alias, blob, warehouse / "new.xml"):
        result = run(site, "export", DOC_A, "-o", str(target))
        assert result.exit_code == 2, (target, result.stderr)
        assert "would destroy stored data" in result.stderr and "Traceback" not in result.stderr
    assert db.read_bytes() == before
    bodies = site["bodies"]
    assert run(site, "export", DOC_A).stdout_bytes == bodies[(DOC_A, 3)]  # type: ignore[index]
