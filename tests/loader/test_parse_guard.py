"""The parse guard (xyro.content.parse_guard): a parse that may load external DTDs or
entities runs exclusive of every other lxml parse in the process, since lxml swaps
libxml2's process-global entity loader in and out around each parse; other parses run side
by side. Deterministic: each waits on events, never on timing, except the bounded joins that
show a parse is still held back."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from xyro.content.html_links import extract_links
from xyro.content.parse_guard import ParseGuard, PARSES
from xyro.loader.cache import EntityCache
from xyro.loader.document import load_document
from xyro.loader.parser import may_load_externals

HTML = b"<html><body><a href='/x'>x</a></body></html>"
HELD_S = 0.3  # how long a parse that must wait is seen still waiting


def _start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _hold(guard: Callable[[], object], entered: threading.Event,
          release: threading.Event) -> threading.Thread:
    def run() -> None:
        with guard():  # type: ignore[attr-defined]
            entered.set()
            release.wait(10)
    return _start(run)


def test_product_parses_wait_for_an_exclusive_parse() -> None:
    """An HTML page, a feed-less XML document: each waits while a DOCTYPE parse holds the
    guard, and runs as soon as it ends."""
    entered, release = threading.Event(), threading.Event()
    holder = _hold(PARSES.exclusive, entered, release)
    assert entered.wait(10)
    done: list[object] = []
    html = _start(lambda: done.append(extract_links(HTML, "http://g.test/").links[0].url))
    xml = _start(lambda: done.append(load_document(b"<doc/>", "http://g.test/d.xml",
                                                   EntityCache()).status))
    html.join(HELD_S)
    xml.join(HELD_S)
    assert html.is_alive() and xml.is_alive() and done == []
    release.set()
    for thread in (holder, html, xml):
        thread.join(10)
    assert sorted(map(str, done)) == ["http://g.test/x", "loaded"]


def test_shared_parses_run_side_by_side_and_an_exclusive_one_waits_for_them() -> None:
    guard = ParseGuard()
    first, second, release = threading.Event(), threading.Event(), threading.Event()
    a = _hold(guard.shared, first, release)
    b = _hold(guard.shared, second, release)
    assert first.wait(10) and second.wait(10)  # both inside at once
    exclusive_in, release_exclusive = threading.Event(), threading.Event()
    c = _hold(guard.exclusive, exclusive_in, release_exclusive)
    assert not exclusive_in.wait(HELD_S)
    release.set()
    assert exclusive_in.wait(10)
    release_exclusive.set()
    for thread in (a, b, c):
        thread.join(10)
        assert not thread.is_alive()


def test_a_waiting_exclusive_parse_goes_before_new_shared_ones() -> None:
    guard = ParseGuard()
    shared_in, release_shared = threading.Event(), threading.Event()
    _hold(guard.shared, shared_in, release_shared)
    assert shared_in.wait(10)
    exclusive_in, release_exclusive = threading.Event(), threading.Event()
    _hold(guard.exclusive, exclusive_in, release_exclusive)
    while not guard._waiting:  # the exclusive parse is queued (a state, not a delay)
        threading.Event().wait(0.001)
    late_in = threading.Event()
    _hold(guard.shared, late_in, threading.Event())
    release_shared.set()
    assert exclusive_in.wait(10)
    assert not late_in.is_set()  # the newcomer waited behind the exclusive parse
    release_exclusive.set()
    assert late_in.wait(10)


def test_the_exclusive_thread_may_parse_again_inside() -> None:
    """An XML catalog read while the resolver answers a load: no self-deadlock."""
    guard = ParseGuard()
    inner: list[str] = []

    def run() -> None:
        with guard.exclusive():
            with guard.shared():
                inner.append("shared")
            with guard.exclusive():
                inner.append("exclusive")

    thread = _start(run)
    thread.join(10)
    assert not thread.is_alive() and inner == ["shared", "exclusive"]
    with guard.exclusive():  # released: usable again
        pass


@pytest.mark.parametrize("body, exclusive", [
    (b'<?xml version="1.0" encoding="UTF-7"?>\n+ADwAIQ-DOCTYPE r SYSTEM "file:///etc/x">', True),
    (b"<?xml version='1.0' encoding='ebcdic-cp-us'?><r/>", True),
    (b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-7"?><r/>', True),
    (b"\xff\xfe<\x00r\x00/\x00>\x00", True),
    (b'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE r><r/>', True),
    (b'<?xml version="1.0" encoding="ISO-8859-1"?><r/>', False),
    (b"<?xml version='1.0' encoding='windows-1252'?><r/>", False),
    (b'<?xml version="1.0"?><r>&lt;!DOCTYPE in text is escaped</r>', False),
    (b"<r/>", False),
    # libxml2 takes any whitespace inside the declaration: it is read to its "?>".
    (b'<?xml version="1.0"' + b" " * 300 + b'encoding="UTF-7"?>+ADwAIQ-DOCTYPE r>', True),
    (b'<?xml version="1.0"' + b"\n" * 300 + b"encoding='ISO-8859-1'?><r/>", False),
    (b'<?xml version="1.0"' + b" " * 2000 + b'encoding="UTF-8"?><r/>', True),  # no end in sight
    (b'<?xml version="1.0" encoding="UTF-8" ?? ?><r/>', True),  # does not parse
    (b'<?xml version="1.0" encoding="UTF-8" encoding="UTF-7"?><r/>', True),
    (b'<?xml-stylesheet href="s.xsl"?><r/>', False),  # a PI, not a declaration
    ('<?xml version="1.0" encoding="IBM037"?><r/>'.encode("cp037"), True),  # EBCDIC
])
def test_only_bodies_that_certainly_have_no_doctype_parse_shared(body: bytes,
                                                                  exclusive: bool) -> None:
    """libxml2 reads a UTF-7 DOCTYPE ("+ADwAIQ-DOCTYPE") and loads its externals: such a
    parse must hold the exclusive lock, or a concurrent HTML parse can put libxml2's own
    entity loader back mid-parse and a file: entity is read from disk."""
    assert may_load_externals(body) is exclusive
