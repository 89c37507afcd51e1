"""The parse guard against hostile documents (DESIGN.md §7; xyro.content.parse_guard): a body
that hides its DOCTYPE (UTF-7 declared after 300 spaces inside the XML declaration) once
parsed under the shared guard, where a nested shared hold could deadlock the process and a
concurrent parse could let libxml2's own loader read a local file into a stored document.

Deterministic: threads wait on events and on the guard's state, never on timing, except the
bounded joins and waits that show a thread is still held back (or hung, on the old code:
those fail, they never hang the run)."""

from __future__ import annotations

import base64
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lxml import etree

from xyro.content import parse_guard
from xyro.content.html_links import extract_links
from xyro.content.parse_guard import ParseGuard
from xyro.loader import document
from xyro.loader.cache import EntityCache
from xyro.loader.catalogs import Catalogs
from xyro.loader.document import load_document
from xyro.loader.parser import may_load_externals, safe_parser
from xyro.loader.resolver import CacheResolver

HELD_S = 0.3  # how long a thread that must wait is seen still waiting
HUNG_S = 10   # a join this long that does not end: the thread is deadlocked


def _utf7(text: str) -> bytes:
    """``text`` in UTF-7 with every character base64-shifted: no "<" byte in it."""
    return b"+" + base64.b64encode(text.encode("utf-16-be")).rstrip(b"=") + b"-"


def _padded_utf7(text: str) -> bytes:
    """A document whose encoding is declared past the first 200 bytes (libxml2 accepts any
    whitespace in the declaration), the rest in UTF-7: no "<!DOCTYPE" bytes anywhere."""
    return b'<?xml version="1.0"' + b" " * 300 + b'encoding="UTF-7"?>' + _utf7(text)


def _start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _until(condition: Callable[[], bool]) -> None:
    """Wait for a state of the guard (bounded: a state never reached fails the test)."""
    reached = threading.Event()
    for _ in range(10_000):
        if condition():
            return
        reached.wait(0.001)
    raise AssertionError("the guard never reached the expected state")


@pytest.fixture
def private_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[ParseGuard]:
    """A fresh guard in place of the process's one in every module using it, so that a
    deadlock on the old code hangs only the test's own daemon threads, not later tests."""
    guard, process_guard = ParseGuard(), parse_guard.PARSES
    for module in list(sys.modules.values()):
        if getattr(module, "PARSES", None) is process_guard:
            monkeypatch.setattr(module, "PARSES", guard)
    yield guard


def test_a_nested_shared_hold_does_not_queue_behind_a_waiting_exclusive_one() -> None:
    """A catalog read inside a shared parse: the exclusive parse waiting meanwhile must not
    make it wait for ever (the outer hold would then never end)."""
    guard = ParseGuard()
    entered, go = threading.Event(), threading.Event()
    inner: list[str] = []

    def shared_parse() -> None:
        with guard.shared():
            entered.set()
            go.wait(HUNG_S)
            with guard.shared():
                inner.append("catalog read")

    outer = _start(shared_parse)
    assert entered.wait(HUNG_S)
    exclusive_in = threading.Event()

    def exclusive_parse() -> None:
        with guard.exclusive():
            exclusive_in.set()

    writer = _start(exclusive_parse)
    _until(lambda: guard._waiting == 1)
    go.set()
    outer.join(HUNG_S)
    assert not outer.is_alive() and inner == ["catalog read"]
    assert exclusive_in.wait(HUNG_S)  # and the exclusive parse ran after it
    writer.join(HUNG_S)


def test_an_exclusive_hold_inside_a_shared_one_is_refused_not_waited_for() -> None:
    guard = ParseGuard()
    raised: list[BaseException] = []

    def run() -> None:
        with guard.shared():
            try:
                with guard.exclusive():
                    pass
            except RuntimeError as exc:
                raised.append(exc)

    thread = _start(run)
    thread.join(HUNG_S)
    assert not thread.is_alive()
    assert len(raised) == 1 and "inside a shared one" in str(raised[0])
    with guard.exclusive():  # nothing left held
        pass


def _catalogs(tmp_path: Path) -> Catalogs:
    """A root catalog delegating http://deleg.test/ to a second one, read only when first
    needed: the read that takes a shared hold inside the parse."""
    (tmp_path / "z.ent").write_text("z")
    (tmp_path / "deleg.xml").write_text(
        '<catalog xmlns="urn:oasis:names:tc:entity:xmlns:xml:catalog">'
        '<system systemId="http://deleg.test/z.ent" uri="z.ent"/></catalog>')
    root = tmp_path / "root.xml"
    root.write_text(
        '<catalog xmlns="urn:oasis:names:tc:entity:xmlns:xml:catalog">'
        '<delegateSystem systemIdStartString="http://deleg.test/" catalog="deleg.xml"/>'
        "</catalog>")
    catalogs = Catalogs((str(root),))
    assert catalogs.preload() == []
    return catalogs


def test_a_hidden_doctype_with_a_catalog_and_a_waiting_doctype_parse_all_end(
        tmp_path: Path, private_guard: ParseGuard) -> None:
    """The reviewer's deadlock: the hidden-DOCTYPE document pauses in a load (the warehouse
    lookup of its entity cache), a plain DOCTYPE document queues for the exclusive guard, then
    the first one reaches its delegated catalog. Every parse must end, and the HTML page
    that comes after them too."""
    body = _padded_utf7('<!DOCTYPE r [<!ENTITY y SYSTEM "http://evil.test/y.ent">'
                        '<!ENTITY z SYSTEM "http://deleg.test/z.ent">]><r>&y;&z;</r>')
    paused, go = threading.Event(), threading.Event()

    def warehouse_lookup(url: str) -> tuple[bytes, float]:
        paused.set()
        go.wait(HUNG_S)
        return b"y", 0.0

    results: dict[str, object] = {}
    hidden = _start(lambda: results.__setitem__("hidden", load_document(
        body, "http://evil.test/d.xml", EntityCache(fallback=warehouse_lookup),
        catalogs=_catalogs(tmp_path)).status))
    assert paused.wait(HUNG_S)
    plain = _start(lambda: results.__setitem__("plain", load_document(
        b"<!DOCTYPE r [<!ELEMENT r (#PCDATA)>]><r/>", "http://ok.test/p.xml",
        EntityCache()).status))
    _until(lambda: private_guard._waiting == 1)
    go.set()
    html = _start(lambda: results.__setitem__("html", extract_links(
        b"<html><a href='/x'>x</a></html>", "http://h.test/").urls))
    for thread in (hidden, plain, html):
        thread.join(HUNG_S)
    assert [t.is_alive() for t in (hidden, plain, html)] == [False, False, False]
    assert results == {"hidden": "loaded", "plain": "loaded", "html": ["http://h.test/x"]}
    assert (private_guard._shared, private_guard._waiting) == (0, 0)


def test_an_interleaved_parse_never_lets_libxml2_read_a_local_file(tmp_path: Path) -> None:
    """Two hidden-DOCTYPE documents declaring a file: entity, interleaved as the reviewer
    forced them: B starts, A starts, B ends while A is inside its parse. Under a shared guard
    B's end put libxml2's default loader back and A's file: entity was read from disk into
    its links; now each runs alone and Xyro's resolver refuses the file."""
    secret = tmp_path / "secret.txt"
    secret.write_text("http://exfil.test/SECRET-42")

    def doc(name: str) -> bytes:
        return _padded_utf7(
            f'<!DOCTYPE rss [<!ENTITY y SYSTEM "http://evil.test/{name}.ent">'
            f'<!ENTITY x SYSTEM "{secret.as_uri()}">]>'
            "<rss><channel><title>&y;</title><link>&x;</link></channel></rss>")

    b_in, a_in, b_done = threading.Event(), threading.Event(), threading.Event()

    def lookup_b(url: str) -> tuple[bytes, float]:
        b_in.set()
        a_in.wait(HELD_S)  # A is inside its parse now, unless the guard holds it back
        return b"t", 0.0

    def lookup_a(url: str) -> tuple[bytes, float]:
        a_in.set()
        b_done.wait(HUNG_S)  # B has ended (and restored whichever loader it found)
        return b"t", 0.0

    out: dict[str, document.LoadResult] = {}

    def run_b() -> None:
        out["B"] = load_document(doc("b"), "http://evil.test/b.xml",
                                 EntityCache(fallback=lookup_b))
        b_done.set()

    def run_a() -> None:
        b_in.wait(HUNG_S)
        out["A"] = load_document(doc("a"), "http://evil.test/a.xml",
                                 EntityCache(fallback=lookup_a))

    threads = [_start(run_b), _start(run_a)]
    for thread in threads:
        thread.join(HUNG_S)
    assert not any(thread.is_alive() for thread in threads)
    for name in "AB":
        result = out[name]
        assert "SECRET" not in repr(result), name
        assert (result.status, result.error_kind) == ("error", "entity_refused"), name
    assert may_load_externals(doc("a")) is True


def test_a_parser_built_outside_an_exclusive_hold_loads_nothing_external() -> None:
    """Defence in depth: should a body with a DOCTYPE still be parsed shared, its external
    entity is neither read (not even from the cache) nor silently dropped: the parse fails,
    and a validation, which loads the DTD, is refused."""
    cache = EntityCache()
    cache.put("http://e.test/y.ent", b"<b>y</b>")
    body = b'<!DOCTYPE r [<!ENTITY i "in"><!ENTITY y SYSTEM "http://e.test/y.ent">]><r>&i;&y;</r>'
    with parse_guard.PARSES.shared():
        resolver = CacheResolver(cache)
        with pytest.raises(etree.XMLSyntaxError, match="Entity 'y' not defined"):
            etree.fromstring(body, safe_parser(resolver), base_url="http://e.test/d.xml")
        assert resolver.served == []
        inside = b'<!DOCTYPE r [<!ENTITY i "in">]><r>&i;</r>'   # internal entities still expand
        assert etree.fromstring(inside, safe_parser(resolver)).text == "in"
        with pytest.raises(ValueError, match="shared parse guard"):
            safe_parser(resolver, validate=True)
    with parse_guard.PARSES.exclusive():
        root = etree.fromstring(body, safe_parser(CacheResolver(cache)),
                                base_url="http://e.test/d.xml")
    assert root.text == "in" and root[0].tag == "b"


def test_a_document_the_doctype_check_misses_fails_instead_of_loading_externals(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A miss of may_load_externals (simulated) ends the document in a parse error, with no
    external load made under the shared guard."""
    asked: list[str] = []
    cache = EntityCache(fallback=lambda url: asked.append(url))
    cache.put("http://e.test/y.ent", b"<b>y</b>")
    monkeypatch.setattr(document, "may_load_externals", lambda body, encoding=None: False)
    body = b'<!DOCTYPE r [<!ENTITY y SYSTEM "http://e.test/y.ent">]><r>&y;</r>'
    result = load_document(body, "http://e.test/d.xml", cache)
    assert (result.status, result.error_kind) == ("error", "parse")
    assert "Entity 'y' not defined" in (result.error_detail or "")
    assert asked == [] and result.from_cache == 0
