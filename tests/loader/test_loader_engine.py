"""The loader inside the crawl engine: documents wait for their DTDs
fetched at priority 0 through the polite crawler, resume, fail on timeout, and their
versions, links and canonical signatures reach the store and the warehouse."""

from __future__ import annotations

from pathlib import Path

from xyro.clock import WallClock
from xyro.crawl.frontier import REFRESH
from xyro.loader.warehouse import Warehouse
from xyro.service.crawl_run import run_crawl
from xyro.service.demo import audit
from xyro.synthweb.spec import WebSpec
from xyro.synthweb.web import SyntheticWeb

DTD = b'<!ENTITY % c SYSTEM "common.ent"> %c; <!ELEMENT doc (#PCDATA)>'
ENT = b'<!ENTITY who "the warehouse">'


def _doc(text: str = "hello &who;") -> bytes:
    return (f'<?xml version="1.0"?>\n<!DOCTYPE doc SYSTEM "/dtd/doc.dtd">\n'
            f"<doc>{text}</doc>\n").encode()


def test_synthetic_web_documents_validate_and_each_dtd_is_fetched_once(tmp_path: Path, make_app, db_rows) -> None:
    # No Crawl-delay: a host asking 2 s between requests would make this a 25 s test.
    spec = WebSpec(seed=5, n_hosts=3, n_pages=90, xml_share=0.6, hostile=frozenset(),
                   crawl_delay_share=0.0)
    with SyntheticWeb(spec, WallClock()) as web:
        app = make_app(tmp_path, web.seeds, delay_s=0.05, workers=6)
        run_crawl(app, max_pages=400, max_seconds=60)
        db = tmp_path / "xyro.db"
        versions = db_rows(db, "SELECT u.url, v.valid, v.dtd_url, v.validation_error "
                               "FROM xml_versions v JOIN urls u ON u.id = v.url_id "
                               "WHERE v.c14n_signature IS NOT NULL")
        with_dtd = [v for v in versions if v[2] is not None]
        assert len(with_dtd) >= 5, "the web must have documents declaring the DTD"
        assert all(v[1] == 1 for v in with_dtd), [v for v in with_dtd if v[1] != 1][:3]
        assert all(v[2].endswith("/dtd/catalog.dtd") for v in with_dtd)
        for path in ("/dtd/catalog.dtd", "/dtd/common.ent"):
            for host in {(r.host, r.port) for r in web.log.requests(path=path)}:
                assert len(web.log.requests(host=host[0], path=path)) == 1
        # Gaps between the requests' kernel arrival times, with no slack beyond their
        # measured error (xyro.synthweb.server): what the server really saw.
        assert audit(web, 0.05).politeness_violations == ()
        pending = db_rows(db, "SELECT count(*) FROM pending")[0][0]
        assert pending == 0
        types = dict(db_rows(db, "SELECT url, type FROM urls WHERE url LIKE '%/dtd/%'"))
        assert set(types.values()) == {"dtd"}
        # XML links (xlink:href, the stylesheet PI) reached Link-Data and the frontier.
        xsl = db_rows(db, "SELECT accesses FROM urls WHERE url LIKE '%/style/catalog.xsl'")
        assert xsl and all(a >= 1 for (a,) in xsl)


def test_document_waits_resumes_and_is_stored(tmp_path: Path, site_factory, make_app, db_rows) -> None:
    site = site_factory(files={"/d/a.xml": _doc(), "/dtd/doc.dtd": DTD, "/dtd/common.ent": ENT,
                               "/d/b.xml": _doc("plain")})
    app = make_app(tmp_path, [f"{site.url}/d/a.xml", f"{site.url}/d/b.xml"])
    run_crawl(app, max_seconds=30)
    db = tmp_path / "xyro.db"
    rows = db_rows(db, "SELECT u.url, v.valid, v.storage_key, v.size FROM xml_versions v "
                       "JOIN urls u ON u.id = v.url_id WHERE v.c14n_signature IS NOT NULL "
                       "ORDER BY u.url")
    assert [(r[0].rsplit("/", 1)[1], r[1]) for r in rows] == [("a.xml", 1), ("b.xml", 1)]
    wh = Warehouse(tmp_path / "warehouse")
    assert wh.get(rows[0][2]) == _doc()
    assert site.requests("/dtd/doc.dtd") == 1 and site.requests("/dtd/common.ent") == 1
    assert db_rows(db, "SELECT count(*) FROM pending")[0][0] == 0
    # A fresh run (new process state) finds the DTDs in the warehouse, not on the server.
    site.files["/d/c.xml"] = _doc("third")
    app2 = make_app(tmp_path, [f"{site.url}/d/c.xml"])
    run_crawl(app2, max_seconds=30)
    assert site.requests("/d/c.xml") == 1 and site.requests("/dtd/doc.dtd") == 1


def test_silent_dtd_ends_in_error_after_the_timeout(tmp_path: Path, site_factory, make_app, db_rows) -> None:
    site = site_factory(files={"/d/a.xml": _doc()}, silent=("/dtd/",))
    app = make_app(tmp_path, [f"{site.url}/d/a.xml"], extra=(
        "loader.dtd_timeout_s=0.5", "crawler.limits.read_timeout_s=2",
        "crawler.limits.connect_timeout_s=1", "crawler.limits.dns_timeout_s=1",
        "crawler.limits.deadline_s=3"))
    summary = run_crawl(app, max_seconds=20)
    assert summary is not None
    db = tmp_path / "xyro.db"
    (kind, detail), = db_rows(db, "SELECT e.kind, e.detail FROM errors e JOIN urls u "
                                  "ON u.id = e.url_id WHERE u.url LIKE '%/d/a.xml'")
    assert kind == "timeout" and "loader.dtd_timeout_s" in detail
    assert db_rows(db, "SELECT type FROM urls WHERE url LIKE '%/d/a.xml'") == [("error",)]
    assert db_rows(db, "SELECT count(*) FROM pending")[0][0] == 0


def test_missing_dtd_fails_the_document_with_the_reason(tmp_path: Path, site_factory, make_app, db_rows) -> None:
    site = site_factory(files={"/d/a.xml": _doc()})
    app = make_app(tmp_path, [f"{site.url}/d/a.xml"])
    run_crawl(app, max_seconds=20)
    (kind, detail), = db_rows(tmp_path / "xyro.db", "SELECT e.kind, e.detail FROM errors e "
                              "JOIN urls u ON u.id = e.url_id WHERE u.url LIKE '%/d/a.xml'")
    assert kind == "entity" and "/dtd/doc.dtd" in detail and "404" in detail


def test_reserialized_document_is_not_a_change(tmp_path: Path, site_factory, make_app, db_rows) -> None:
    site = site_factory(files={"/x.xml": b'<r a="1" b="2"><i>text</i></r>'})
    url = f"{site.url}/x.xml"
    db = tmp_path / "xyro.db"

    def refetch(body: bytes) -> tuple[int, int]:
        site.files["/x.xml"] = body
        app = make_app(tmp_path, [url])
        run_crawl(app, max_seconds=20,
                  customize=lambda parts: parts.crawler.frontier.push(url, REFRESH))
        (changes,), = db_rows(db, "SELECT changes FROM urls WHERE url = ?", url)
        (versions,), = db_rows(db, "SELECT count(*) FROM xml_versions")
        return changes, versions

    assert refetch(b'<r a="1" b="2"><i>text</i></r>') == (0, 1)
    assert refetch(b"<?xml version='1.0'?>\n<!-- re-exported -->\n<r b='2' a='1'>\n  "
                   b"<i>text</i>\n</r>\n") == (0, 1)
    assert refetch(b'<r a="1" b="2"><i>texT</i></r>') == (1, 2)


def test_xxe_through_the_engine_reads_no_file_and_other_host_is_polite(
        tmp_path: Path, site_factory, make_app, db_rows) -> None:
    other = site_factory(files={"/ent.txt": b"public entity text"})
    site = site_factory(files={
        "/file.xml": b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>',
        "/http.xml": f'<!DOCTYPE x [<!ENTITY e SYSTEM "{other.url}/ent.txt">]><x>&e;</x>'.encode(),
    })
    app = make_app(tmp_path, [f"{site.url}/file.xml", f"{site.url}/http.xml"],
                   extra=(f'scope.allowed_domains=["127.0.0.1"]',))
    run_crawl(app, max_seconds=30)
    db = tmp_path / "xyro.db"
    kinds = dict(db_rows(db, "SELECT u.url, e.kind FROM errors e JOIN urls u ON u.id = e.url_id"))
    assert kinds.get(f"{site.url}/file.xml") == "entity_refused"
    assert [p for p, _, _ in other.log] == ["/robots.txt", "/ent.txt"]
    assert all(ua.startswith("Xyro") for _, _, ua in other.log)
    (valid,), = db_rows(db, "SELECT count(*) FROM xml_versions v JOIN urls u ON u.id = v.url_id "
                            "WHERE u.url = ?", f"{site.url}/http.xml")
    assert valid == 1
    secret = Path("/etc/passwd").read_bytes().splitlines()[0]
    stored = db.read_bytes() + b"".join(p.read_bytes() for p in (tmp_path / "warehouse").rglob("*")
                                        if p.is_file())
    assert secret not in stored
