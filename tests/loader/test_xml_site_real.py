"""A real XML site: Debian's /usr/share/xml (docbook-xml, docbook-xsl, w3c-sgml-lib and what
else the machine has there) served on 127.0.0.1 the way a plain web server serves a folder
(directory listings; Content-Types by suffix, as Debian's /etc/mime.types gives them;
application/octet-stream for the rest: .xsd, .rng, .cat...), crawled to exhaustion with the
default configuration (the system XML catalog on).

What it checks, and what it measured on this machine (the README has the figures):
- every .xml, .xsl, .xsd, .rng and .svg file is reached and stored as an XML document,
  unless it is genuinely broken; each ERROR is checked: a 404 must be a dead link (no such
  file here), anything else a file ``xmllint --noout`` rejects too. Measured: 3 broken XML
  files, all in iso-codes (iso_3166-3.xml is empty; iso_3166-2.xml and its iso_3166_2.xml
  twin hold a bare "&"), 3 copies of DocBook slides' iepngfix.htc (an undeclared namespace
  prefix), 72 files that are not XML at all (RELAX NG compact, SGML declarations and
  catalogs, READMEs served as octet-stream or text/plain), 222 dead links;
- documents with a DOCTYPE validate against their DTDs, which the system XML catalog
  resolves to the local copies: zero fetches (and zero DNS lookups) off the served host;
- DTDs and entity files served by the site itself are stored as DTDs, not refused.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from xyro.service.crawl_run import run_crawl

ROOT = Path("/usr/share/xml")
PACKAGES = {"docbook-xml": ROOT / "docbook/schema/dtd/4.5",
            "docbook-xsl": ROOT / "docbook/stylesheet/docbook-xsl",
            "w3c-sgml-lib": ROOT / "w3c-sgml-lib"}
XML_SUFFIXES = (".xml", ".xsl", ".xsd", ".rng", ".svg")
#: The suffixes a Debian Apache would label (its /etc/mime.types); everything else is
#: application/octet-stream, as Apache's DefaultType and Python's http.server say.
MIME = {".xml": "application/xml", ".xsl": "application/xslt+xml", ".svg": "image/svg+xml",
        ".dtd": "application/xml-dtd", ".mod": "application/xml-dtd",
        ".ent": "application/xml-external-parsed-entity", ".html": "text/html",
        ".htm": "text/html", ".xhtml": "application/xhtml+xml", ".txt": "text/plain",
        ".css": "text/css", ".js": "text/javascript", ".png": "image/png",
        ".gif": "image/gif", ".jpg": "image/jpeg", ".rdf": "application/rdf+xml"}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


class _FolderHandler(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path: str) -> str:  # type: ignore[override]
        # By the table only: http.server would ask the machine's mimetypes database next.
        return MIME.get(os.path.splitext(path)[1].lower(), "application/octet-stream")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def xml_site() -> Iterator[str]:
    handler = functools.partial(_FolderHandler, directory=str(ROOT))
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _fenced_getaddrinfo(asked: list[str]):  # type: ignore[no-untyped-def]
    """The system resolver for 127.0.0.1 only: any other name is recorded and refused."""
    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host != "127.0.0.1":
            asked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, f"fenced: {host} is not 127.0.0.1")
        return socket.getaddrinfo(host, *args, **kwargs)
    return getaddrinfo


def _served_files(suffixes: tuple[str, ...]) -> set[str]:
    """URL paths of the files with ``suffixes`` the listings lead to (symlinks followed, as
    the server follows them; a folder reached again through a link cycle is not re-entered)."""
    out: set[str] = set()
    seen: set[tuple[int, int]] = set()
    for folder, dirs, files in os.walk(ROOT, followlinks=True):
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen and os.path.islink(folder):
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        rel = Path(folder).relative_to(ROOT)
        for name in files:
            if name.lower().endswith(suffixes) and not name.startswith("."):
                out.add("/" + (rel / name).as_posix().lstrip("./"))
    return out


def _local(url: str) -> Path:
    return ROOT / unquote(urlsplit(url).path).lstrip("/")


def _xmllint_accepts(path: Path) -> bool:
    run = subprocess.run(["xmllint", "--noout", "--nonet", str(path)], capture_output=True,
                         timeout=60, env={**os.environ, "XML_CATALOG_FILES": "/etc/xml/catalog"})
    return run.returncode == 0


@pytest.mark.slow
def test_usr_share_xml_crawled_to_exhaustion(tmp_path: Path, xml_site: str, make_app,
                                             db_rows) -> None:
    for package, path in PACKAGES.items():
        if not path.is_dir():
            pytest.skip(f"{path} is absent: install the Debian package {package} (.ci/run does)")
    if shutil.which("xmllint") is None:
        pytest.skip("xmllint is absent: install the Debian package libxml2-utils (.ci/run does)")
    if not Path("/etc/xml/catalog").is_file():
        pytest.skip("/etc/xml/catalog is absent: install xml-core (docbook-xml pulls it in)")
    asked: list[str] = []
    app = make_app(tmp_path, [f"{xml_site}/"], delay_s=0.0, workers=4,
                   extra=("scope.max_depth=40",))
    summary = run_crawl(app, max_pages=20_000, max_seconds=400,
                        getaddrinfo=_fenced_getaddrinfo(asked))
    assert summary.stop_reason == "frontier exhausted", summary.stop_reason
    db = tmp_path / "xyro.db"
    site = xml_site + "/"
    rows = db_rows(db, "SELECT u.url, u.type, e.kind, e.http_status FROM urls u LEFT JOIN "
                       "errors e ON e.url_id = u.id WHERE u.type NOT IN ('unread', 'refused')")
    fetched = {url: (kind, ekind, status) for url, kind, ekind, status in rows}
    off_host = sorted(u for u in fetched if not u.startswith(site))
    assert off_host == [] and asked == [], (off_host[:5], sorted(set(asked))[:5])
    by_type = Counter(kind for kind, _, _ in fetched.values())
    errors = {u: (ekind, status) for u, (kind, ekind, status) in fetched.items()
              if kind == "error"}
    # Dead links (the packages link to files Debian does not ship, or symlinks to nowhere):
    # a 404 for a path that is not a file here.
    dead = {u for u, (ekind, status) in errors.items() if ekind == "http_status"}
    assert all(errors[u][1] == 404 and not _local(u).is_file() for u in dead), sorted(dead)[:5]
    # Every XML file of the tree was reached and is an XML document or a checked error.
    wanted = {site + p.lstrip("/") for p in _served_files(XML_SUFFIXES)}
    missing = sorted(wanted - set(fetched))
    assert not missing, (len(missing), missing[:5])
    not_xml = sorted(u for u in wanted if fetched[u][0] not in ("xml", "error"))
    assert not not_xml, not_xml[:5]
    # Every other ERROR is a file xmllint rejects too (broken XML, or not XML at all).
    wrongly = sorted(u for u in set(errors) - dead if _xmllint_accepts(_local(u)))
    assert not wrongly, [(u, errors[u]) for u in wrongly[:5]]
    broken_xml = sorted(u for u in errors if u in wanted)
    # DTDs: the site's own .dtd/.mod/.ent files are DTD resources.
    dtds = {site + p.lstrip("/") for p in _served_files((".dtd", ".mod", ".ent"))}
    assert {u for u in dtds if fetched.get(u, ("?",))[0] != "dtd"} <= set(errors)
    validated = db_rows(db, "SELECT count(*), sum(v.valid) FROM xml_versions v "
                            "WHERE v.c14n_signature IS NOT NULL AND v.valid IS NOT NULL")
    (checked, valid), = validated
    sources = summary.stats.get("loader_dtd_sources", {})
    print(f"\n/usr/share/xml: {sum(by_type.values())} pages, by type {dict(by_type)}; "
          f"XML files {len(wanted)}, broken {len(broken_xml)}: {broken_xml}; "
          f"errors by kind {dict(Counter(k for k, _ in errors.values()))}, dead links "
          f"{len(dead)}; validated {checked}, valid {valid}; DTD loads {sources}")
    # Measured here: 155 of 155 valid (SVG 1.0/1.1, DocBook 4.4, XML catalogs, DocBook XSL's
    # l10n files); a margin in case another release of a package ships a slip.
    assert checked > 100 and valid >= 0.95 * checked
    assert sources.get("catalog", 0) > 500
