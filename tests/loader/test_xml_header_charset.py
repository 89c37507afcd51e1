"""The charset parameter of the Content-Type decides how an XML body is read (RFC 7303 §3.2,
§8), unless a byte order mark says otherwise (RFC 7303 §4.2, XML 1.0 Appendix F); a charset
libxml2 does not know, or bytes invalid in it, leave the document to its own declaration.
The canonical form is UTF-8 whatever the body's encoding; the warehouse keeps the bytes
as fetched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from xyro.loader.cache import EntityCache
from xyro.loader.document import load_document
from xyro.loader.parser import may_load_externals
from xyro.loader.warehouse import Warehouse
from xyro.service.crawl_run import run_crawl

URL = "http://site.test/a.xml"
TEXT = "Caf\xe9 cr\xe8me"
LATIN1 = f'<?xml version="1.0"?><catalog><item>{TEXT}</item></catalog>'.encode("latin-1")
DECLARED = (f'<?xml version="1.0" encoding="ISO-8859-1"?><catalog><item>{TEXT}</item>'
            "</catalog>").encode("latin-1")
BOM_UTF8 = b"\xef\xbb\xbf" + f"<catalog><item>{TEXT}</item></catalog>".encode()
#: MD5 of the C14N 2.0 form all of the above must have: UTF-8, the text read right.
SIGNATURE = hashlib.md5(f"<catalog><item>{TEXT}</item></catalog>".encode()).digest()


@pytest.mark.parametrize("charset", ["iso-8859-1", "ISO-8859-1", "latin1", "windows-1252"])
def test_header_charset_reads_an_undeclared_latin1_document(charset: str) -> None:
    res = load_document(LATIN1, URL, EntityCache(), charset=charset)
    assert (res.status, res.error_detail) == ("loaded", None)
    assert res.signature == SIGNATURE


def test_byte_order_mark_wins_over_a_wrong_header_charset() -> None:
    for charset in ("iso-8859-1", "utf-16", "koi8-r"):
        res = load_document(BOM_UTF8, URL, EntityCache(), charset=charset)
        assert (res.status, res.signature) == ("loaded", SIGNATURE), charset
    utf16 = "\ufeff<catalog><item>Caf\xe9 cr\xe8me</item></catalog>".encode("utf-16-le")
    res = load_document(utf16, URL, EntityCache(), charset="iso-8859-1")
    assert (res.status, res.signature) == ("loaded", SIGNATURE)


@pytest.mark.parametrize("charset", ["bogus", "x-user-defined", "utf-8\x00", "a" * 300, " "])
def test_unknown_charset_falls_back_to_the_declaration(charset: str) -> None:
    res = load_document(DECLARED, URL, EntityCache(), charset=charset)
    assert (res.status, res.signature) == ("loaded", SIGNATURE)
    utf8 = f"<catalog><item>{TEXT}</item></catalog>".encode()   # no declaration: UTF-8
    assert load_document(utf8, URL, EntityCache(), charset=charset).signature == SIGNATURE


def test_bytes_invalid_in_the_header_charset() -> None:
    # A site-wide charset=utf-8 over a Latin-1 file that declares it: read by the declaration.
    res = load_document(DECLARED, URL, EntityCache(), charset="utf-8")
    assert (res.status, res.signature) == ("loaded", SIGNATURE)
    # Nothing to fall back to: the error says which charset the bytes were read in.
    res = load_document(LATIN1, URL, EntityCache(), charset="utf-8")
    assert res.status == "error" and res.error_kind == "parse"
    assert "read as utf-8, the charset of its Content-Type" in (res.error_detail or "")


def test_header_charset_with_external_and_internal_dtd_subsets() -> None:
    """The header's charset reaches the validating parse (internal subset present); the DTD,
    UTF-8 without a declaration, is still read as UTF-8."""
    cache = EntityCache()
    cache.put("http://site.test/c.dtd", '<!ELEMENT catalog (item)><!ENTITY e "cr\xe8me">'.encode())
    body = ('<!DOCTYPE catalog SYSTEM "c.dtd" [<!ELEMENT item (#PCDATA)>]>'
            "<catalog><item>Caf\xe9 &e;</item></catalog>").encode("latin-1")
    res = load_document(body, URL, cache, charset="iso-8859-1")
    assert (res.status, res.valid, res.validation_error) == ("loaded", True, None)
    assert res.signature == SIGNATURE


def test_non_ascii_header_charset_takes_the_exclusive_parse_guard() -> None:
    utf7 = b"+ADw-!DOCTYPE a SYSTEM +ACI-http://x.test/a.dtd+ACI-+AD4-+ADw-a/+AD4-"
    assert may_load_externals(utf7) is False       # no declaration: looks DOCTYPE-free
    assert may_load_externals(utf7, "utf-7") is True
    assert may_load_externals(LATIN1, "iso-8859-1") is False
    res = load_document(utf7, URL, EntityCache(), charset="utf-7")
    assert (res.status, res.needs) == ("pending", ("http://x.test/a.dtd",))


def test_crawled_documents_are_read_in_their_header_charset(tmp_path: Path, site_factory,
                                                            make_app, db_rows) -> None:
    files = {"/a.xml": (LATIN1, "text/xml; charset=ISO-8859-1"),
             "/b.xml": (LATIN1, "application/xml; charset=iso-8859-1"),
             "/c.xml": (BOM_UTF8, "application/xml; charset=iso-8859-1"),
             "/d.xml": (DECLARED, "application/xml; charset=bogus-charset")}
    site = site_factory(files={p: body for p, (body, _) in files.items()},
                        types={p: ctype for p, (_, ctype) in files.items()})
    app = make_app(tmp_path, [site.url + p for p in files])
    run_crawl(app, max_seconds=20)
    rows = db_rows(tmp_path / "xyro.db",
                   "SELECT u.url, u.type, v.c14n_signature, v.storage_key FROM urls u "
                   "LEFT JOIN xml_versions v ON v.url_id = u.id WHERE u.url LIKE '%.xml' "
                   "ORDER BY u.url")
    assert [(r[0][len(site.url):], r[1], r[2]) for r in rows] == [
        (p, "xml", SIGNATURE) for p in files]
    warehouse = Warehouse(tmp_path / "warehouse")
    assert [warehouse.get(r[3]) for r in rows] == [body for body, _ in files.values()]
