"""Links of an XML page fetched for its links alone (``xyro.loader.outside``): the links of
elements and attributes, nothing loaded (no DTD, no external entity: no local file read and
no request made, so nothing they hold shows up), no entity expanded, and a hostile body ends
in a bounded result."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

import psutil
import pytest
from lxml import etree

from xyro.content.parse_guard import PARSES
from xyro.loader import parser as parser_module
from xyro.loader.outside import outside_links
from xyro.loader.settings import LoaderSettings

URL = "http://127.0.0.1:9/feeds/news.xml"


def _urls(body: bytes) -> list[str]:
    return [link.url for link in outside_links(body, URL)]


def test_links_of_feeds_and_xlink_resolve_against_the_page() -> None:
    body = b"""<?xml version="1.0"?>
<?xml-stylesheet type="text/xsl" href="/style/feed.xsl"?>
<rss version="2.0" xmlns:xlink="http://www.w3.org/1999/xlink"
     xmlns:atom="http://www.w3.org/2005/Atom">
  <channel>
    <link>http://127.0.0.1:9/index.html</link>
    <atom:link href="other.xml" rel="self"/>
    <item><link>../p/1.html</link><enclosure url="/a.mp3"/></item>
    <note xlink:href="p/2.xml#top"/>
  </channel>
</rss>"""
    links = outside_links(body, URL)
    assert [link.url for link in links] == [
        "http://127.0.0.1:9/style/feed.xsl", "http://127.0.0.1:9/index.html",
        "http://127.0.0.1:9/feeds/other.xml", "http://127.0.0.1:9/p/1.html",
        "http://127.0.0.1:9/a.mp3", "http://127.0.0.1:9/feeds/p/2.xml"]
    assert [link.kind for link in links] == ["stylesheet", "rss", "atom", "rss", "rss", "xlink"]


@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """A real server on 127.0.0.1 whose DTD and entity would add a link if ever read."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            asked.append(self.path)
            body = (b'<!ATTLIST x xmlns:xlink CDATA #FIXED "http://www.w3.org/1999/xlink" '
                    b'xlink:href CDATA "http://dtd-default.example/">')
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_no_dtd_or_external_entity_is_read(tmp_path: Path,
                                           counting_server: tuple[str, list[str]]) -> None:
    """If the local entity, the local DTD or the served DTD were read, a link from them
    would appear (an entity holding an element, DTDs defaulting xlink:href)."""
    leak = tmp_path / "leak.xml"
    leak.write_text('<a xmlns:xlink="http://www.w3.org/1999/xlink" '
                    'xlink:href="http://file-entity.example/"/>')
    local_dtd = tmp_path / "x.dtd"
    local_dtd.write_text('<!ATTLIST x xlink:href CDATA "http://local-dtd.example/">')
    base, asked = counting_server
    for doctype in (f'<!DOCTYPE x SYSTEM "{local_dtd.as_uri()}" [<!ENTITY e SYSTEM '
                    f'"{leak.as_uri()}">]>',
                    f'<!DOCTYPE x SYSTEM "{base}/x.dtd" [<!ENTITY e SYSTEM "{base}/e.xml">]>',
                    f'<!DOCTYPE x [<!ENTITY % p SYSTEM "{base}/p.ent"> %p;'
                    f'<!ENTITY e SYSTEM "{leak.as_uri()}">]>'):
        body = (f'<?xml version="1.0"?>{doctype}<x><y href="/kept.html"/>&e;</x>').encode()
        assert _urls(body) == ["http://127.0.0.1:9/kept.html"], doctype
    assert asked == []


def test_internal_entities_do_not_hide_the_links() -> None:
    body = b'<!DOCTYPE x [<!ENTITY n "news">]><x><a href="/&#97;.html">&n;</a>&n;</x>'
    assert _urls(body) == ["http://127.0.0.1:9/a.html"]


def test_an_entity_bomb_ends_at_once_with_no_links() -> None:
    """libxml2 checks each entity's content once, unexpanded, and its amplification bound
    refuses the bomb before any expansion: no links, no time, no memory."""
    decls = "".join(f'<!ENTITY l{i} "{("&l%d;" % (i - 1)) * 10 if i else "lol"}">'
                    for i in range(10))
    body = (f'<?xml version="1.0"?><!DOCTYPE z [{decls}]><z><a href="/a.html">&l9;&l9;</a>'
            f'</z>').encode()
    before, started = psutil.Process().memory_info().rss, time.process_time()
    assert _urls(body) == []
    assert time.process_time() - started < 2.0
    assert psutil.Process().memory_info().rss - before < 50 * 2**20


@pytest.mark.parametrize("body", [
    b"", b"<a><b></a>", b"\x00\xff\xfe binary", b"<html><body>not xml<br></body></html>",
    b"<a>" * 300 + b"</a>" * 300,  # deeper than libxml2's 256 levels
    b'<!DOCTYPE a [<!ENTITY x "&y;"><!ENTITY y "&x;">]><a href="/l.html">&x;</a>',
])
def test_a_body_that_does_not_parse_has_no_links(body: bytes) -> None:
    assert _urls(body) == []


def test_a_page_the_loader_would_refuse_as_too_crowded_or_large_has_no_links() -> None:
    # Reading the attributes of an element costs their square (xyro/loader/crowding.py): 20,000
    # of them held the whole process about 2 s, 80,000 about 40 s, and these pages come from
    # any host. The loader's own limits apply, as to a document it loads.
    attrs = " ".join(f'a{i}="v"' for i in range(20_000))
    assert _urls(f'<x href="/a.html" {attrs}/>'.encode()) == []
    few = " ".join(f'a{i}="v"' for i in range(511))   # 512 with the href
    assert _urls(f'<x href="/a.html" {few}/>'.encode()) == ["http://127.0.0.1:9/a.html"]
    small = LoaderSettings(max_document_bytes=100)
    page = b'<x><a href="/a.html"/>' + b"<p/>" * 30 + b"</x>"
    assert outside_links(page, URL, settings=small) == ()
    assert [link.url for link in outside_links(b'<x><a href="/a.html"/></x>', URL,
                                               settings=small)] == ["http://127.0.0.1:9/a.html"]


HIDDEN_LOADS = [
    b'<!DOCTYPE r SYSTEM "http://e.test/x.dtd"><r><a href="/x.html"/></r>',
    b'<!DOCTYPE r [<!ENTITY % x SYSTEM "http://e.test/p.ent"> %x;]><r><a href="/x.html"/></r>',
    b'<!DOCTYPE r [<!ENTITY x SYSTEM "http://e.test/g.ent">]><r><a href="/x.html"/>&x;</r>',
]


def _resolvers_asked(parse: Callable[[], object]) -> list[str]:
    """The URLs any lxml resolver is asked for during ``parse()`` (seen by a profile hook on
    this thread, whichever resolver the parser holds)."""
    asked: list[str] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        if (event == "call" and frame.f_code.co_name == "resolve"
                and isinstance(frame.f_locals.get("self"), etree.Resolver)):
            asked.append(frame.f_locals.get("system_url") or frame.f_locals.get("url"))

    sys.setprofile(hook)
    try:
        parse()
    finally:
        sys.setprofile(None)
    return asked


@pytest.mark.parametrize("body", HIDDEN_LOADS)
def test_no_loader_is_even_asked(body: bytes) -> None:
    """libxml2 asks no loader for the external subset or an external parameter entity (lxml's
    collect_ids=False used to make it ask): when another thread's parse has put libxml2's own
    loader back, whatever is asked is read by it, local files and FIFOs included."""
    found: list[list[str]] = []
    assert _resolvers_asked(lambda: found.append(_urls(body))) == []
    assert found == [["http://127.0.0.1:9/x.html"]]
    loading = etree.XMLParser(load_dtd=True, no_network=True)  # the hook sees what is asked
    loading.resolvers.add(parser_module.NoExternals())
    assert _resolvers_asked(lambda: etree.fromstring(HIDDEN_LOADS[0], loading)) == [
        "http://e.test/x.dtd"]


def test_a_page_with_a_doctype_is_read_under_the_exclusive_guard() -> None:
    """As the loader reads it (DESIGN.md §7): a DOCTYPE page waits for the shared parses of
    other threads to end; a page without one parses beside them."""
    entered, release = threading.Event(), threading.Event()

    def shared_parse() -> None:
        with PARSES.shared():
            entered.set()
            release.wait(10)

    holder = threading.Thread(target=shared_parse, daemon=True)
    holder.start()
    try:
        assert entered.wait(10)
        assert _urls(b'<r><a href="/plain.html"/></r>') == ["http://127.0.0.1:9/plain.html"]
        found: list[list[str]] = []
        reader = threading.Thread(target=lambda: found.append(_urls(HIDDEN_LOADS[0])),
                                  daemon=True)
        reader.start()
        reader.join(0.3)
        assert reader.is_alive() and found == []  # waiting for the exclusive guard
    finally:
        release.set()
    reader.join(10)
    holder.join(10)
    assert found == [["http://127.0.0.1:9/x.html"]]
