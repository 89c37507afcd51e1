"""OASIS XML catalogs (xyro/loader/catalogs.py): resolution rules on catalogs written here,
their use by the loader, and what a hostile or broken catalog can and cannot do."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from xyro.loader import EntityCache, load_document
from xyro.loader.catalogs import Catalogs, unwrap_urn

NS = 'xmlns="urn:oasis:names:tc:entity:xmlns:xml:catalog"'
DTD = b'<!ELEMENT doc (#PCDATA)>\n<!ENTITY who "Xyleme">\n'
DOC = (b'<?xml version="1.0"?>\n<!DOCTYPE doc PUBLIC "-//X//DTD Doc//EN" '
       b'"http://dtd.example/doc.dtd">\n<doc>&who;</doc>\n')


def _catalog(path: Path, entries: str, attrs: str = "") -> Path:
    path.write_text(f'<?xml version="1.0"?>\n<catalog {NS} {attrs}>\n{entries}\n</catalog>\n')
    return path


@pytest.fixture
def dtd(tmp_path: Path) -> Path:
    (tmp_path / "dtds").mkdir()
    path = tmp_path / "dtds" / "doc.dtd"
    path.write_bytes(DTD)
    return path


def _path(catalogs: Catalogs, system: str | None, public: str | None) -> str | None:
    found = catalogs.resolve(system, public)
    return None if found is None else (found.path or found.url)


def test_public_and_system_entries(tmp_path: Path, dtd: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", '<public publicId="-//X//DTD  Doc//EN" uri="dtds/doc.dtd"/>'
                   '<system systemId="http://dtd.example/s.dtd" uri="dtds/doc.dtd"/>')
    catalogs = Catalogs((str(cat),))
    assert _path(catalogs, None, " -//X//DTD Doc//EN ") == str(dtd)   # whitespace-normalized
    assert _path(catalogs, "http://dtd.example/s.dtd", None) == str(dtd)
    assert catalogs.resolve("http://dtd.example/s.dtd", None).body == DTD
    assert _path(catalogs, "http://dtd.example/other.dtd", None) is None
    assert _path(catalogs, None, "-//X//DTD Other//EN") is None


def test_prefer_system_ignores_public_entries_when_a_system_id_is_given(
        tmp_path: Path, dtd: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", '<group prefer="system"><public publicId="-//X//P//EN" '
                   f'uri="{dtd.as_uri()}"/></group>')
    catalogs = Catalogs((str(cat),))
    assert _path(catalogs, "http://a.example/x.dtd", "-//X//P//EN") is None
    assert _path(catalogs, None, "-//X//P//EN") == str(dtd)


def test_rewrite_system_longest_prefix_and_system_suffix(tmp_path: Path, dtd: Path) -> None:
    (tmp_path / "mirror" / "deep").mkdir(parents=True)
    (tmp_path / "mirror" / "deep" / "a.dtd").write_bytes(DTD)
    cat = _catalog(tmp_path / "c.xml", (
        '<rewriteSystem systemIdStartString="http://w3.example/" rewritePrefix="nowhere/"/>'
        '<rewriteSystem systemIdStartString="http://w3.example/TR/" rewritePrefix="mirror/"/>'
        '<systemSuffix systemIdSuffix="/doc.dtd" uri="dtds/doc.dtd"/>'))
    catalogs = Catalogs((str(cat),))
    assert _path(catalogs, "http://w3.example/TR/deep/a.dtd", None) == str(
        tmp_path / "mirror" / "deep" / "a.dtd")
    assert _path(catalogs, "http://anywhere.example/v1/doc.dtd", None) == str(dtd)


@pytest.mark.parametrize("climb", ["../secret.txt", "%2e%2e/secret.txt", "deep/%2E%2E/%2e%2e/"
                                   "secret.txt", "deep/../../secret.txt", "./%2e%2e/secret.txt"])
def test_a_rewritten_system_id_never_climbs_out_of_the_rewrite_folder(
        tmp_path: Path, climb: str) -> None:
    """Only files a catalog names, or files below a folder it names, are ever opened: a web
    document's entity must not reach /etc or a secret through a rewriteSystem prefix."""
    (tmp_path / "mirror" / "deep").mkdir(parents=True)
    (tmp_path / "mirror" / "deep" / "a.dtd").write_bytes(DTD)
    (tmp_path / "secret.txt").write_text("s3cr3t")
    cat = _catalog(tmp_path / "c.xml", (
        '<rewriteSystem systemIdStartString="http://w3.example/TR/" rewritePrefix="mirror/"/>'))
    catalogs = Catalogs((str(cat),))
    assert catalogs.resolve("http://w3.example/TR/" + climb, None) is None
    assert _path(catalogs, "http://w3.example/TR/deep/a.dtd", None) == str(
        tmp_path / "mirror" / "deep" / "a.dtd")


def test_delegation_consults_only_the_delegated_catalogs(tmp_path: Path, dtd: Path) -> None:
    _catalog(tmp_path / "long.xml", f'<public publicId="-//X//DTD Doc//EN" uri="{dtd.as_uri()}"/>')
    _catalog(tmp_path / "short.xml", "")
    root = _catalog(tmp_path / "root.xml", (
        '<delegatePublic publicIdStartString="-//X//" catalog="short.xml"/>'
        '<delegatePublic publicIdStartString="-//X//DTD" catalog="long.xml"/>'
        '<public publicId="-//Y//DTD Doc//EN" uri="never.dtd"/>'
        '<delegatePublic publicIdStartString="-//Y//" catalog="short.xml"/>'
        '<nextCatalog catalog="short.xml"/>'))
    catalogs = Catalogs((str(root),))
    assert _path(catalogs, None, "-//X//DTD Doc//EN") == str(dtd)
    # A public entry of the catalog itself wins over its delegations (never.dtd is named, but
    # missing: a warning and no resolution).
    assert _path(catalogs, None, "-//Y//DTD Doc//EN") is None
    # Failed delegation ends the resolution: later catalogs in the list are not consulted.
    fallback = _catalog(tmp_path / "fallback.xml",
                        f'<public publicId="-//X//DTD Else//EN" uri="{dtd.as_uri()}"/>')
    assert _path(Catalogs((str(root), str(fallback))), None, "-//X//DTD Else//EN") is None
    assert _path(Catalogs((str(fallback), str(root))), None, "-//X//DTD Else//EN") == str(dtd)


def test_next_catalog_chains_and_loops_end(tmp_path: Path, dtd: Path) -> None:
    _catalog(tmp_path / "b.xml", '<nextCatalog catalog="a.xml"/>'
             f'<system systemId="http://s.example/d.dtd" uri="{dtd.as_uri()}"/>')
    a = _catalog(tmp_path / "a.xml", '<nextCatalog catalog="b.xml"/>')
    catalogs = Catalogs((str(a),))
    assert _path(catalogs, "http://s.example/d.dtd", None) == str(dtd)
    assert _path(catalogs, "http://s.example/none.dtd", None) is None   # a→b→a ends


def test_urn_publicid_is_unwrapped() -> None:
    assert unwrap_urn("urn:publicid:-:OASIS:DTD+DocBook+XML+V4.5:EN") == (
        "-//OASIS//DTD DocBook XML V4.5//EN")
    assert unwrap_urn("http://x/") is None


def test_urn_system_id_resolves_as_a_public_id(tmp_path: Path, dtd: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", f'<public publicId="-//X//DTD Doc//EN" uri="{dtd.as_uri()}"/>')
    assert _path(Catalogs((str(cat),)), "urn:publicid:-:X:DTD+Doc:EN", None) == str(dtd)


def test_a_mirror_url_target_is_returned_as_a_url(tmp_path: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", '<system systemId="http://old.example/d.dtd" '
                   'uri="http://mirror.example/d.dtd"/>')
    assert Catalogs((str(cat),)).resolve("http://old.example/d.dtd", None).url == (
        "http://mirror.example/d.dtd")


def test_missing_and_broken_catalogs_are_warnings(tmp_path: Path, dtd: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text("<catalog><unclosed></catalog>")
    good = _catalog(tmp_path / "c.xml", f'<public publicId="-//X//DTD Doc//EN" uri="{dtd.as_uri()}"/>')
    catalogs = Catalogs((str(tmp_path / "missing.xml"), str(broken), str(good)))
    with caplog.at_level(logging.WARNING, "xyro.loader.catalogs"):
        problems = catalogs.preload()
        assert _path(catalogs, None, "-//X//DTD Doc//EN") == str(dtd)
    assert len(problems) == 2
    assert "missing.xml cannot be opened" in problems[0] and "loader.catalogs" in problems[0]
    assert "not well-formed" in problems[1]
    assert len([r for r in caplog.records if "missing.xml" in r.getMessage()]) == 1


def test_a_catalog_naming_a_missing_file_leaves_the_id_to_the_web(tmp_path: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", '<public publicId="-//X//DTD Doc//EN" uri="gone.dtd"/>')
    catalogs = Catalogs((str(cat),))
    assert catalogs.resolve(None, "-//X//DTD Doc//EN") is None
    res = load_document(DOC, "http://site.example/d.xml", EntityCache(), catalogs=catalogs)
    assert res.status == "pending" and res.needs == ("http://dtd.example/doc.dtd",)


def test_targets_must_be_small_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.dtd"
    os.mkfifo(fifo)
    big = tmp_path / "big.dtd"
    big.write_bytes(b" " * 5000)
    cat = _catalog(tmp_path / "c.xml", '<public publicId="-//X//FIFO//EN" uri="pipe.dtd"/>'
                   '<public publicId="-//X//BIG//EN" uri="big.dtd"/>'
                   '<public publicId="-//X//DIR//EN" uri="."/>')
    catalogs = Catalogs((str(cat),), max_entity_bytes=4096)
    for public in ("-//X//FIFO//EN", "-//X//BIG//EN", "-//X//DIR//EN"):   # no hang on the FIFO
        assert catalogs.resolve(None, public) is None


def test_the_loader_uses_the_catalog_and_asks_nothing(tmp_path: Path, dtd: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", '<public publicId="-//X//DTD Doc//EN" uri="dtds/doc.dtd"/>')
    res = load_document(DOC, "http://site.example/d.xml", EntityCache(),
                        catalogs=Catalogs((str(cat),)))
    assert res.status == "loaded" and res.needs == () and res.valid is True
    assert res.from_catalog >= 1 and res.dtd_url == "http://dtd.example/doc.dtd"
    bad = DOC.replace(b"<doc>&who;</doc>", b"<doc><x/></doc>")
    assert load_document(bad, "http://site.example/d.xml", EntityCache(),
                         catalogs=Catalogs((str(cat),))).valid is False


SECRET = "root:x:0:0:SECRET-7f3a:/root:/bin/bash\n<secret-tag attr='SECRET-7f3a'>\n"


@pytest.mark.parametrize("doctype", [
    '<!DOCTYPE doc PUBLIC "-//X//DTD Secret//EN" "http://dtd.example/s.dtd">',
    '<!DOCTYPE doc [<!ENTITY % s PUBLIC "-//X//DTD Secret//EN" "http://dtd.example/s.ent"> %s;]>',
    '<!DOCTYPE doc [<!ENTITY s PUBLIC "-//X//DTD Secret//EN" "http://dtd.example/s.ent">]>',
])
def test_a_catalog_naming_a_private_file_never_shows_it(tmp_path: Path, doctype: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    cat = _catalog(tmp_path / "c.xml",
                   f'<public publicId="-//X//DTD Secret//EN" uri="{secret.as_uri()}"/>')
    body = f'<?xml version="1.0"?>\n{doctype}\n<doc>{"&s;" if "ENTITY s " in doctype else ""}</doc>'
    res = load_document(body.encode(), "http://site.example/d.xml", EntityCache(),
                        catalogs=Catalogs((str(cat),)))
    assert res.status == "error" and res.error_kind == "parse", res
    assert "SECRET" not in repr(res) and "secret-tag" not in repr(res)
    assert str(secret) in res.error_detail and "withheld" in res.error_detail


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="no /etc/passwd on this system")
def test_a_catalog_naming_etc_passwd_for_a_dtd(tmp_path: Path) -> None:
    cat = _catalog(tmp_path / "c.xml", '<public publicId="-//X//DTD P//EN" uri="file:///etc/passwd"/>')
    body = b'<!DOCTYPE doc PUBLIC "-//X//DTD P//EN" "http://dtd.example/p.dtd"><doc/>'
    res = load_document(body, "http://site.example/d.xml", EntityCache(),
                        catalogs=Catalogs((str(cat),)))
    assert res.status == "error" and "/etc/passwd" in res.error_detail
    first_line = Path("/etc/passwd").read_text().splitlines()[0]
    assert first_line.split(":")[0] + ":" not in res.error_detail.replace("/etc/passwd", "")


def test_a_document_cannot_name_a_local_file_itself(tmp_path: Path, dtd: Path) -> None:
    """Only what a catalog names is read: a document's own file: system id stays refused."""
    cat = _catalog(tmp_path / "c.xml", "")
    body = f'<!DOCTYPE doc SYSTEM "{dtd.as_uri()}"><doc>&who;</doc>'.encode()
    res = load_document(body, "http://site.example/d.xml", EntityCache(),
                        catalogs=Catalogs((str(cat),)))
    assert res.status == "error" and res.error_kind == "entity_refused"
