"""Real XML from Debian packages served on 127.0.0.1: DocBook XSL stylesheets
(xsl:import/include discovered and fetched), documents with the DocBook 4.5 and XHTML 1.0
DTDs (loaded, validated, every DTD/entity file fetched once and politely)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from xyro.loader import EntityCache, load_document
from xyro.service.crawl_run import run_crawl

DOCBOOK_XSL = Path("/usr/share/xml/docbook/stylesheet/docbook-xsl")
DOCBOOK_DTD = Path("/usr/share/xml/docbook/schema/dtd/4.5")
XHTML_DTD = Path("/usr/share/xml/w3c-sgml-lib/schema/dtd/REC-xhtml1-20020801")
DELAY_S = 0.1
XSL = "{http://www.w3.org/1999/XSL/Transform}"


def _need(path: Path, package: str) -> None:
    if not path.is_dir():
        pytest.skip(f"{path} is absent: install the Debian package {package} (.ci/run does)")


def _gaps_ok(site, delay_s: float) -> bool:  # type: ignore[no-untyped-def]
    """Requests reached the server at least ``delay_s`` apart (kernel arrival stamps, within
    their measured error bounds: no slack for handler-thread lag)."""
    starts = sorted(t for _, t, _ in site.log)
    slack = 2 * site.arrival_error + 1e-6
    return all(b - a >= delay_s - slack for a, b in zip(starts, starts[1:]))


def test_docbook_xsl_imports_and_includes_are_discovered_and_fetched(
        tmp_path: Path, site_factory, make_app, db_rows) -> None:
    _need(DOCBOOK_XSL, "docbook-xsl")
    site = site_factory(root=DOCBOOK_XSL, prefix="/xsl/")
    start = DOCBOOK_XSL / "html" / "docbook.xsl"
    refs = etree.parse(str(start)).getroot()
    expected = {f"{site.url}/xsl/html/{el.get('href')}".replace("/html/../", "/")
                for el in refs.iter(f"{XSL}import", f"{XSL}include")}
    assert len(expected) > 20
    # Served as application/xslt+xml: accepted by the default list's */*+xml.
    app = make_app(tmp_path, [f"{site.url}/xsl/html/docbook.xsl"], delay_s=DELAY_S)
    run_crawl(app, max_pages=len(expected) + 40, max_seconds=50)
    db = tmp_path / "xyro.db"
    fetched = {u for (u,) in db_rows(db, "SELECT url FROM urls WHERE type = 'xml'")}
    assert expected <= fetched, sorted(expected - fetched)[:5]
    (kinds,), = db_rows(db, "SELECT count(*) FROM xml_versions WHERE c14n_signature IS NOT NULL")
    assert kinds >= len(expected)
    assert _gaps_ok(site, DELAY_S)


def _serve_dtd_doc(site_factory, root: Path, doc_path: str, doc: str):  # type: ignore[no-untyped-def]
    """Serve ``root`` at /dtd/ (or /usr/share/xml/ at the same path: Debian's DocBook
    modules name the ISO entity sets by absolute paths, which resolve on the same host)."""
    if root == DOCBOOK_DTD:
        site = site_factory(root=Path("/usr/share/xml"), prefix="/usr/share/xml/")
        doc = doc.replace("@@/dtd/", "@@/usr/share/xml/docbook/schema/dtd/4.5/")
    else:
        site = site_factory(root=root, prefix="/dtd/")
    site.files[doc_path] = doc.replace("@@", site.url).encode()
    return site


DOCBOOK_DOC = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE book PUBLIC "-//OASIS//DTD DocBook XML V4.5//EN" "@@/dtd/docbookx.dtd">
<book lang="en"><title>Warehouse &amp; crawler</title>
<chapter id="c1"><title>Loader</title><para>Caf&eacute; &mdash; &copy; Xyleme,
<ulink url="@@/other.xml">more</ulink>.</para></chapter></book>
"""


def test_docbook_45_document_loads_validates_and_fetches_each_file_once(
        tmp_path: Path, site_factory, make_app, db_rows) -> None:
    _need(DOCBOOK_DTD, "docbook-xml")
    site = _serve_dtd_doc(site_factory, DOCBOOK_DTD, "/book.xml", DOCBOOK_DOC)
    site.files["/bad.xml"] = site.files["/book.xml"].replace(b"<chapter id", b"<chapter idx")
    # Catalogs off: the DTD and its modules come over HTTP (with them on, see
    # test_xml_catalogs.py, nothing is fetched).
    app = make_app(tmp_path, [f"{site.url}/book.xml", f"{site.url}/bad.xml"], delay_s=DELAY_S,
                   extra=("loader.catalogs=[]",))
    run_crawl(app, max_pages=80, max_seconds=50)
    db = tmp_path / "xyro.db"
    rows = dict(db_rows(db, "SELECT u.url, v.valid FROM xml_versions v JOIN urls u "
                            "ON u.id = v.url_id WHERE v.c14n_signature IS NOT NULL"))
    assert rows == {f"{site.url}/book.xml": 1, f"{site.url}/bad.xml": 0}, (
        db_rows(db, "SELECT url, type FROM urls WHERE url LIKE '%.xml'"),
        db_rows(db, "SELECT validation_error FROM xml_versions WHERE validation_error IS NOT NULL"), db_rows(db, "SELECT detail FROM errors"))
    dtd_paths = [p for p, _, _ in site.log if p.startswith("/usr/share/xml/")]
    assert len(dtd_paths) > 10, "DocBook pulls in its modules and ISO entity sets"
    assert len(dtd_paths) == len(set(dtd_paths)), "a DTD/entity fetched twice"
    assert _gaps_ok(site, DELAY_S)
    (error,), = db_rows(db, "SELECT validation_error FROM xml_versions v JOIN urls u "
                            "ON u.id = v.url_id WHERE u.url LIKE '%/bad.xml'")
    assert "idx" in error
    links = db_rows(db, "SELECT count(*) FROM urls WHERE url = ?", f"{site.url}/other.xml")
    assert links == [(1,)]


XHTML_DOC = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "@@/dtd/xhtml1-strict.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en"><head><title>T&eacute;st</title>
</head><body><p>&nbsp;<a href="feed.xml">feed</a></p></body></html>
"""


def test_xhtml_10_strict_document_loads_and_validates() -> None:
    """The loader on XHTML 1.0 Strict, its DTD and entity sets fed round by round from the
    package (the crawl engine classifies XHTML as HTML, so this drives the loader alone)."""
    _need(XHTML_DTD, "w3c-sgml-lib")
    base = "http://w3c.test/dtd/"
    body = XHTML_DOC.replace("@@/dtd/", base).encode()
    cache, rounds = EntityCache(), []
    while (res := load_document(body, "http://w3c.test/page.xhtml", cache)).status == "pending":
        rounds.append(res.needs)
        for need in res.needs:
            name = need[len(base):]
            path = XHTML_DTD / name
            if not path.exists():  # Debian ships the entity sets with the modularization
                path = XHTML_DTD.parent / "REC-xhtml-modularization-20100729" / name
            cache.put(need, path.read_bytes())
    assert rounds == [(f"{base}xhtml1-strict.dtd",),
                      tuple(f"{base}xhtml-{n}.ent" for n in ("lat1", "symbol", "special"))]
    assert res.status == "loaded" and res.valid is True
    assert [l.url for l in res.links] == ["http://w3c.test/feed.xml"]
    bad = body.replace(b"<p>", b"<blink>").replace(b"</p>", b"</blink>")
    assert load_document(bad, "http://w3c.test/page.xhtml", cache).valid is False


SVG_DIR = XHTML_DTD.parent / "REC-SVG-20010904"
SVG_DOC = """<?xml version="1.0" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.0//EN" "@@/dtd/svg10.dtd">
<svg width="4cm" height="4cm" viewBox="0 0 400 400" xmlns="http://www.w3.org/2000/svg"
     xmlns:xlink="http://www.w3.org/1999/xlink"><title>Xyro</title>
  <a xlink:href="next.svg"><rect x="1" y="1" width="398" height="398" fill="none"/></a>
</svg>
"""


def test_svg_10_document_crawled_loads_validates_dtd_fetched_once(
        tmp_path: Path, site_factory, make_app, db_rows) -> None:
    _need(SVG_DIR, "w3c-sgml-lib")
    # Served as image/svg+xml, an XML type by its +xml suffix (RFC 7303); catalogs off, so
    # the DTD comes over HTTP.
    site = _serve_dtd_doc(site_factory, SVG_DIR, "/pic.svg", SVG_DOC)
    site.files["/next.svg"] = site.files["/pic.svg"].replace(b'width="398"', b'widht="398"')
    app = make_app(tmp_path, [f"{site.url}/pic.svg"], delay_s=DELAY_S,
                   extra=("loader.catalogs=[]",))
    run_crawl(app, max_pages=20, max_seconds=30)
    db = tmp_path / "xyro.db"
    rows = dict(db_rows(db, "SELECT u.url, v.valid FROM xml_versions v JOIN urls u "
                            "ON u.id = v.url_id WHERE v.c14n_signature IS NOT NULL"))
    assert rows == {f"{site.url}/pic.svg": 1, f"{site.url}/next.svg": 0}
    assert site.requests("/dtd/svg10.dtd") == 1
    assert _gaps_ok(site, DELAY_S)


def test_parallel_docbook_loads_never_bypass_the_resolver() -> None:
    """Regression: without exclusive DOCTYPE parses (xyro.content.parse_guard), concurrent
    DocBook loads fell through to libxml2's default loader ("Attempt to load network
    entity") a few times in 80."""
    import threading

    _need(DOCBOOK_DTD, "docbook-xml")
    base = "http://t.test/usr/share/xml/docbook/schema/dtd/4.5/"
    body = DOCBOOK_DOC.replace("@@/dtd/", base).replace("@@", "http://t.test").encode()
    cache = EntityCache()
    while (res := load_document(body, "http://t.test/b.xml", cache)).status == "pending":
        for need in res.needs:
            cache.put(need, Path("/" + need.split("/", 3)[3]).read_bytes())
    bad: list[object] = []

    def work() -> None:
        for _ in range(20):
            res = load_document(body, "http://t.test/b.xml", cache)
            if res.status != "loaded" or res.valid is not True:
                bad.append(res.validation_error or res.error_detail)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
