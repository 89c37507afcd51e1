"""When the loader stores a new version of a document (xyro/loader/stage.py): a new
canonical form, or the same one under another DTD or with another validity (the DOCTYPE is
outside the canonical form, and ``xyro documents --valid/--dtd`` read the newest version);
never the same twice while the writer has not committed the first yet. Real SQLite store,
real warehouse, real lxml; the entity cache holds the DTDs as after their fetch."""

from __future__ import annotations

from pathlib import Path

from metadata import MetadataStore
from metadata.versions import latest_version
from xyro.loader import LoaderSettings, Warehouse
from xyro.loader.cache import EntityCache
from xyro.loader.stage import LoaderStage
from xyro.records import FetchResult

URL = "http://h.test/a.xml"
V1, V2 = "http://h.test/v1.dtd", "http://h.test/v2.dtd"


def _doc(dtd: str) -> bytes:
    return f'<?xml version="1.0"?>\n<!DOCTYPE doc SYSTEM "{dtd}">\n<doc>x</doc>'.encode()


def _stage(tmp_path: Path) -> tuple[LoaderStage, MetadataStore]:
    store = MetadataStore.open(tmp_path / "x.db")
    conn = store.read_connection()
    cache = EntityCache()
    cache.put(V1, b"<!ELEMENT doc (#PCDATA)>")
    cache.put(V2, b"<!ELEMENT doc (item+)><!ELEMENT item (#PCDATA)>")
    stage = LoaderStage(LoaderSettings(validate=True), Warehouse(tmp_path / "wh"),
                        lambda url: latest_version(conn, url), cache=cache)
    return stage, store


def _fetched(body: bytes) -> FetchResult:
    return FetchResult(URL, URL, status=200, body=body, content_type="application/xml")


def test_the_same_document_under_another_dtd_is_a_new_version(tmp_path: Path) -> None:
    stage, store = _stage(tmp_path)
    try:
        first = stage.load(URL, _fetched(_doc("v1.dtd"))).version
        assert first is not None and first.valid and first.dtd_url == V1
        # Not committed yet (the writer's batch): the same bytes again are no new version.
        assert stage.load(URL, _fetched(_doc("v1.dtd"))).version is None
        second = stage.load(URL, _fetched(_doc("v2.dtd"))).version
        assert second is not None and second.c14n_signature == first.c14n_signature
        assert (second.dtd_url, second.valid) == (V2, False)
        assert stage.load(URL, _fetched(_doc("v2.dtd"))).version is None
    finally:
        store.close()
