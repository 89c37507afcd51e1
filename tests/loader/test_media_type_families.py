"""Every XML media type family (RFC 7303), crawled: XSLT, RDF, SVG, Atom, RSS and MathML
documents served with their registered types are stored as XML with their links followed;
an external parsed entity is a resource the loader uses; XML served as
application/octet-stream or text/plain is sniffed and kept; a binary body is not."""

from __future__ import annotations

import array
import http.server
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from xyro.app import App
from xyro.clock import WallClock
from xyro.config_load import load_config
from xyro.content.classify import classify
from xyro.media_types import DEFAULT_ACCEPT_CONTENT_TYPES, accepted, family
from xyro.net.filters import mime_type
from xyro.records import FetchResult
from xyro.service.crawl_run import run_crawl

XSL = "http://www.w3.org/1999/XSL/Transform"
# path: (Content-Type, body, the links it must lead to)
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "/style.xsl": ("application/xslt+xml",
                   f'<xsl:stylesheet version="1.0" xmlns:xsl="{XSL}"><xsl:import href="base.xsl"/>'
                   '<xsl:include href="parts.xsl"/></xsl:stylesheet>', ("/base.xsl", "/parts.xsl")),
    "/base.xsl": ("application/xslt+xml", f'<xsl:stylesheet version="1.0" xmlns:xsl="{XSL}"/>', ()),
    "/parts.xsl": ("application/xslt+xml", f'<xsl:stylesheet version="1.0" xmlns:xsl="{XSL}"/>',
                   ()),
    "/data.rdf": ("application/rdf+xml",
                  '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
                  'xmlns:dc="http://purl.org/dc/elements/1.1/"><rdf:Description rdf:about="">'
                  '<dc:relation rdf:resource="more.rdf"/></rdf:Description></rdf:RDF>',
                  ("/more.rdf",)),
    "/more.rdf": ("application/rdf+xml",
                  '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>', ()),
    "/pic.svg": ("image/svg+xml",
                 '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
                 '<a xlink:href="next.svg"><rect width="1" height="1"/></a></svg>', ("/next.svg",)),
    "/next.svg": ("image/svg+xml", '<svg xmlns="http://www.w3.org/2000/svg"/>', ()),
    "/feed.atom": ("application/atom+xml",
                   '<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
                   '<entry><link href="entry1.xml"/></entry></feed>', ("/entry1.xml",)),
    "/entry1.xml": ("application/xml", "<entry/>", ()),
    "/feed.rss": ("application/rss+xml",
                  '<rss version="2.0"><channel><title>t</title><link>http://@@/chan.xml</link>'
                  '<item><link>http://@@/item1.xml</link></item></channel></rss>',
                  ("/chan.xml", "/item1.xml")),
    "/chan.xml": ("text/xml", "<channel/>", ()),
    "/item1.xml": ("text/xml", "<item/>", ()),
    "/eq.mml": ("application/mathml+xml",
                '<math xmlns="http://www.w3.org/1998/Math/MathML" '
                'xmlns:xlink="http://www.w3.org/1999/xlink"><mi xlink:href="def.mml">x</mi></math>',
                ("/def.mml",)),
    "/def.mml": ("application/mathml+xml", '<math xmlns="http://www.w3.org/1998/Math/MathML"/>', ()),
    "/book.xml": ("application/xml",
                  '<?xml version="1.0"?>\n<!DOCTYPE book [\n<!ELEMENT book ANY>\n'
                  '<!ENTITY chapter SYSTEM "chapter.ent">\n]>\n<book>&chapter;</book>', ()),
    "/chapter.ent": ("application/xml-external-parsed-entity",
                     '<?xml version="1.0" encoding="UTF-8"?><para>From an entity</para>', ()),
    "/schema.xsd": ("application/octet-stream",
                    '<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">'
                    '<xs:include schemaLocation="types.xsd"/></xs:schema>', ("/types.xsd",)),
    "/types.xsd": ("application/octet-stream",
                   '<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"/>', ()),
    "/catalog.xml": ("text/plain", '<?xml version="1.0"?><catalog xmlns="urn:oasis:names:tc:'
                     'entity:xmlns:xml:catalog"/>', ()),
    "/blob.dat": ("application/octet-stream", "\x00\x01PK binary", ()),
}
INDEX = "<html><body>" + "".join(
    f'<a href="{p.lstrip("/")}">{p}</a>' for p in
    ("/style.xsl", "/data.rdf", "/pic.svg", "/feed.atom", "/feed.rss", "/eq.mml", "/book.xml",
     "/schema.xsd", "/catalog.xml", "/blob.dat")) + "</body></html>"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    files: dict[str, tuple[str, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802
        ctype, body = self.files.get(self.path, ("text/plain", b""))
        self.send_response(200 if self.path in self.files else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def _children(db: Path) -> set[tuple[str, str]]:
    """(source, destination) URL pairs of the stored links (children are int32 ids)."""
    conn = sqlite3.connect(db)
    try:
        urls = dict(conn.execute("SELECT id, url FROM urls"))
        return {(urls[src], urls[dst]) for src, blob in
                conn.execute("SELECT src, children FROM links")
                for dst in array.array("i", blob)}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One crawl of a site holding every family: (types, links, error kinds) by path."""
    server = _Server(("127.0.0.1", 0), type("H", (_Handler,), {"files": {}}))
    site = f"http://127.0.0.1:{server.server_address[1]}"
    host = site.split("//", 1)[1]
    files = server.RequestHandlerClass.files  # type: ignore[attr-defined]
    files.update({path: (ctype, body.replace("@@", host).encode())
                  for path, (ctype, body, _links) in FAMILIES.items()})
    files["/"] = ("text/html", INDEX.encode())
    files["/robots.txt"] = ("text/plain", b"User-agent: *\nDisallow:\n")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = tmp_path_factory.mktemp("families")
    overrides = [f"seeds={json.dumps([site + '/'])}", "scope.allow_private_addresses=true",
                 "crawler.politeness.delay_s=0", "crawler.workers=4", "loader.catalogs=[]",
                 f"storage.database={tmp / 'xyro.db'}",
                 f"storage.warehouse_dir={tmp / 'warehouse'}"]
    app = App(load_config(None, {}, overrides), WallClock())
    with app.open_store(create=True):
        pass
    try:
        run_crawl(app, max_pages=100, max_seconds=60)
    finally:
        server.shutdown()
        server.server_close()
    conn = sqlite3.connect(tmp / "xyro.db")
    try:
        types = {u[len(site):]: t for u, t in conn.execute("SELECT url, type FROM urls")}
        errors = {u[len(site):]: k for u, k in conn.execute(
            "SELECT u.url, e.kind FROM errors e JOIN urls u ON u.id = e.url_id")}
    finally:
        conn.close()
    links = {(a[len(site):], b[len(site):]) for a, b in _children(tmp / "xyro.db")}
    return types, links, errors


@pytest.mark.parametrize("path", ["/style.xsl", "/data.rdf", "/pic.svg", "/feed.atom",
                                  "/feed.rss", "/eq.mml", "/schema.xsd"])
def test_xml_family_stored_as_xml_with_links_followed(crawled, path: str) -> None:  # type: ignore[no-untyped-def]
    types, links, errors = crawled
    assert types[path] == "xml", (path, types[path], errors.get(path))
    for target in FAMILIES[path][2]:
        assert (path, target) in links, (path, target)
        assert types[target] == "xml", (target, types[target], errors.get(target))


def test_external_parsed_entity_is_used_by_the_loader(crawled) -> None:  # type: ignore[no-untyped-def]
    types, _links, errors = crawled
    assert types["/book.xml"] == "xml", errors.get("/book.xml")
    assert types["/chapter.ent"] == "dtd"


def test_sniffed_types_keep_xml_and_refuse_binary(crawled) -> None:  # type: ignore[no-untyped-def]
    types, _links, errors = crawled
    assert types["/catalog.xml"] == "xml"          # text/plain, XML by its bytes
    assert types["/types.xsd"] == "xml"            # application/octet-stream, likewise
    assert types["/blob.dat"] == "error" and errors["/blob.dat"] == "content_type"


@pytest.mark.parametrize("mime, expected", [
    ("application/xml", "xml"), ("text/xml", "xml"), ("application/xslt+xml", "xml"),
    ("application/rdf+xml", "xml"), ("image/svg+xml", "xml"), ("application/atom+xml", "xml"),
    ("application/rss+xml", "xml"), ("application/mathml+xml", "xml"),
    ("application/vnd.google-earth.kml+xml", "xml"), ("text/html", "html"),
    ("application/xhtml+xml", "html"), ("application/xml-dtd", "dtd"),
    ("application/xml-external-parsed-entity", "dtd"), ("text/xml-external-parsed-entity", "dtd"),
    ("text/plain", "sniff"), ("application/octet-stream", "sniff"), (None, "sniff"),
    ("application/json", "sniff"), ("+xml", "sniff"),
])
def test_family_of_each_media_type(mime: str | None, expected: str) -> None:
    assert family(mime) == expected


@pytest.mark.parametrize("mime", ["application/xslt+xml", "image/svg+xml", "application/rdf+xml",
                                  "application/mathml+xml", "application/xml-external-parsed-entity",
                                  "application/octet-stream", "text/plain", None])
def test_default_accept_list_takes_every_family(mime: str | None) -> None:
    assert accepted(mime, DEFAULT_ACCEPT_CONTENT_TYPES)


@pytest.mark.parametrize("mime", ["image/png", "application/json", "application/pdf", "text/css"])
def test_default_accept_list_refuses_the_rest(mime: str) -> None:
    assert not accepted(mime, DEFAULT_ACCEPT_CONTENT_TYPES)


def test_every_accepted_type_reaches_a_reading() -> None:
    """The accept list and the classifier agree: a type an operator adds is sniffed, so an
    XML body behind it is kept rather than dropped as 'neither HTML nor XML'."""
    body = b"<?xml version='1.0'?><doc/>"
    for mime in ("application/json", "application/x-custom", "application/xslt+xml"):
        result = FetchResult(url="http://a.org/d", final_url="http://a.org/d", status=200,
                             headers={"content-type": mime}, body=body,
                             content_type=mime_type(mime))
        assert classify(result) == "xml", mime


def test_shipped_yaml_lists_are_the_code_defaults() -> None:
    """One list, one home: config/xyro.yaml says what xyro/media_types.py does."""
    from xyro.config_load import load_config
    from xyro.media_types import DEFAULT_SKIP_SUFFIXES

    shipped = Path(__file__).resolve().parents[2] / "config" / "xyro.yaml"
    cfg = load_config(str(shipped), {}, [])
    assert cfg.crawler.accept_content_types == DEFAULT_ACCEPT_CONTENT_TYPES
    assert cfg.crawler.skip_suffixes == DEFAULT_SKIP_SUFFIXES
    assert ".svg" not in DEFAULT_SKIP_SUFFIXES and ".gz" not in DEFAULT_SKIP_SUFFIXES
