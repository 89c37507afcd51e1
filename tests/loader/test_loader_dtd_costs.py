"""What a DTD and the entities a document draws may cost (DESIGN.md §7, untrusted input).

- Attribute lists: lxml's DTD objects (``docinfo.internalDTD``/``externalDTD``) copy the DTD
  in time quadratic in the attributes declared on one element, in C code holding the GIL, so
  building one froze every thread of the daemon (20,000 attributes: 24 s). The loader never
  builds one: it validates with a validating parse and judges from the bytes whether an
  internal subset is a grammar.
- Entities: libxml2's amplification limit counts the bytes of external entities as input, so
  each one served lets the tree grow several times its size; what one document draws from
  the DTD/entity cache is bounded by ``loader.max_document_bytes`` (catalog files exempt).
- The cache itself is bounded in total bytes (``loader.max_cache_bytes``), least recently
  used out first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from xyro.loader import EntityCache, LoaderSettings, LoadStatus, load_document
from xyro.loader.catalogs import Catalogs
from xyro.loader.stage import LoaderStage
from xyro.loader.warehouse import Warehouse

DOC = "http://h.example/d.xml"
DTD_URL = "http://h.example/a.dtd"
ATTRIBUTES = 15_000  # on one element: lxml's DTD copy froze every other thread 17-28 s


def _attlist(count: int) -> str:
    return ("<!ELEMENT r (a*)><!ELEMENT a EMPTY><!ATTLIST a "
            + " ".join(f"x{i} CDATA #IMPLIED" for i in range(count)) + ">")


@contextmanager
def _longest_freeze() -> Iterator[list[float]]:
    """The longest gap between the 10 ms ticks of another thread while the block runs."""
    gap, stop = [0.0], threading.Event()

    def tick() -> None:
        last = time.monotonic()
        while not stop.is_set():
            time.sleep(0.01)
            now = time.monotonic()
            gap[0], last = max(gap[0], now - last), now
    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        yield gap
    finally:
        stop.set()
        ticker.join()


@pytest.mark.parametrize("where", ["external", "internal"])
def test_a_dtd_crowding_one_element_freezes_no_thread(where: str) -> None:
    cache = EntityCache()
    if where == "external":
        cache.put(DTD_URL, _attlist(ATTRIBUTES).encode())
        body = f'<!DOCTYPE r SYSTEM "{DTD_URL}"><r><a x1="v"/></r>'.encode()
    else:
        body = f"<!DOCTYPE r [{_attlist(ATTRIBUTES)}]><r><a x1='v'/></r>".encode()
    cpu = time.process_time()
    with _longest_freeze() as gap:
        res = load_document(body, DOC, cache)
    cpu = time.process_time() - cpu
    assert res.status is LoadStatus.LOADED and (res.valid, res.validation_error) == (True, None)
    assert gap[0] < 2.0 and cpu < 1.0, (gap, cpu)
    bad = body.replace(b"<a x1", b"<a y")
    assert load_document(bad, DOC, cache).valid is False


@pytest.mark.parametrize(("subset", "judged"), [
    ('<!ENTITY nbsp "&#160;">', None),              # entities only (XSLT, SVG): no grammar
    ("<!ELEMENT r (#PCDATA)>", True),
    ("<!ELEMENT r EMPTY>", False),
    ('<!ENTITY % decls SYSTEM "http://h.example/decls.ent">%decls;', True),
    ('<!ENTITY % ents SYSTEM "http://h.example/ents.ent">%ents;', None),
])
def test_an_internal_subset_is_judged_only_when_it_declares_elements(
        subset: str, judged: bool | None) -> None:
    cache = EntityCache()
    cache.put("http://h.example/decls.ent", b"<!ELEMENT r (#PCDATA)>")
    cache.put("http://h.example/ents.ent", b'<!ENTITY who "Xyleme">')
    for encoding in ("utf-8", "utf-16"):
        body = f'<?xml version="1.0" encoding="{encoding}"?><!DOCTYPE r [{subset}]><r>x</r>'
        res = load_document(body.encode(encoding), DOC, cache)
        assert res.status is LoadStatus.LOADED, res.error_detail
        assert res.valid is judged and (res.validation_error is None) == (judged is not False)


def _entities(cache: EntityCache, count: int, size: int) -> bytes:
    """A small document referencing ``count`` cached external entities of ``size`` bytes."""
    decls, refs = "", ""
    for i in range(count):
        cache.put(f"http://h.example/e{i}.ent", b"<a/>" * (size // 4))
        decls += f'<!ENTITY e{i} SYSTEM "http://h.example/e{i}.ent">'
        refs += f"&e{i};"
    return f"<!DOCTYPE r [{decls}]><r>{refs}</r>".encode()


def test_entities_drawn_from_the_cache_count_toward_max_document_bytes() -> None:
    settings = LoaderSettings(max_document_bytes=64 * 1024)
    cache = EntityCache()
    body = _entities(cache, 3, 20 * 1024)
    assert load_document(body, DOC, cache, settings).status is LoadStatus.LOADED
    body = _entities(cache, 4, 20 * 1024)
    res = load_document(body, DOC, cache, settings)
    assert (res.status, res.error_kind) == (LoadStatus.ERROR, "too_large")
    assert res.error_detail.startswith(f"{DOC}: with http://h.example/e3.ent (20480 bytes)")
    assert f"would pass {64 * 1024 - len(body)} bytes" in res.error_detail
    assert "loader.max_document_bytes" in res.error_detail


def test_many_small_entities_repeated_are_refused_at_the_bound() -> None:
    """Each entity small, each repeated four times (within libxml2's amplification limit):
    refused once they pass the bound, before the tree holds them all (the whole took about
    190 MB and 7 s before, only to fail the loader's own expansion check)."""
    settings = LoaderSettings(max_document_bytes=512 * 1024)
    cache = EntityCache()
    decls, refs = "", ""
    for i in range(16):
        cache.put(f"http://h.example/e{i}.ent", b"<a/>" * (64 * 1024 // 4))
        decls += f'<!ENTITY e{i} SYSTEM "http://h.example/e{i}.ent">'
        refs += f"&e{i};" * 4
    body = f"<!DOCTYPE r [{decls}]><r>{refs}</r>".encode()
    cpu = time.process_time()
    res = load_document(body, DOC, cache, settings)
    assert (res.status, res.error_kind) == (LoadStatus.ERROR, "too_large")
    # e0 to e6 fit beside the body's own bytes; e7 would make 512 KiB of entities.
    assert "with http://h.example/e7.ent (65536 bytes)" in res.error_detail
    assert time.process_time() - cpu < 2.0


def test_catalog_files_do_not_count(tmp_path: Path) -> None:
    dtd = tmp_path / "big.dtd"
    dtd.write_bytes(b"<!ELEMENT r (#PCDATA)>" + b"<!-- padding -->" * 8192)  # 128 KiB
    catalog = tmp_path / "catalog.xml"
    catalog.write_text('<?xml version="1.0"?><catalog xmlns="urn:oasis:names:tc:entity:xmlns:'
                       'xml:catalog"><system systemId="http://h.example/big.dtd" '
                       'uri="big.dtd"/></catalog>')
    body = b'<!DOCTYPE r SYSTEM "http://h.example/big.dtd"><r>x</r>'
    settings = LoaderSettings(max_document_bytes=64 * 1024)
    res = load_document(body, DOC, EntityCache(), settings, catalogs=Catalogs((str(catalog),)))
    assert (res.status, res.valid, res.from_catalog) == (LoadStatus.LOADED, True, 1)
    cache = EntityCache()
    cache.put("http://h.example/big.dtd", dtd.read_bytes())
    assert load_document(body, DOC, cache, settings).error_kind == "too_large"


def test_the_cache_is_bounded_in_bytes_least_recently_used_out_first() -> None:
    cache = EntityCache(max_bytes=3000)
    for name in "abc":
        assert cache.put(f"http://h.example/{name}", bytes(1000)) is None
    assert cache.get("http://h.example/a") is not None   # used: b is now the oldest
    cache.put("http://h.example/d", bytes(1000))
    assert [u in cache for u in ("http://h.example/a", "http://h.example/b",
                                 "http://h.example/c", "http://h.example/d")] == [
        True, False, True, True]
    cache.put("http://h.example/c", bytes(2500))   # replaced: its old size no longer counts
    assert [name for name in "abcd" if f"http://h.example/{name}" in cache] == ["c"]
    cache.put("http://h.example/e", bytes(4000))   # alone past the bound: kept, a load waits
    assert len(cache) == 1 and "http://h.example/e" in cache


def test_the_default_cache_holds_256_mib(tmp_path: Path) -> None:
    """The loader stage's cache, built from the settings (1000 entries of 2 MiB allowed
    about 2 GiB before)."""
    settings = LoaderSettings()
    stage = LoaderStage(settings, Warehouse(tmp_path / "wh"), lambda url: None)
    assert stage.cache.max_bytes == settings.max_cache_bytes == 256 * 2**20
    for i in range(200):
        assert stage.cache.put(f"http://h{i}.example/e.dtd",
                               bytes(settings.max_entity_bytes)) is None
    assert len(stage.cache) == 128


def test_the_stage_cache_takes_max_cache_bytes(tmp_path: Path) -> None:
    stage = LoaderStage(LoaderSettings(max_cache_bytes=5000), Warehouse(tmp_path / "wh"),
                        lambda url: None)
    for i in range(4):
        stage.cache.put(f"http://h.example/{i}", bytes(2000))
    assert len(stage.cache) == 2
