"""The warehouse: content-addressed, compressed, atomic, pruned by reference."""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path

import pytest

from metadata import FetchRecord, MetadataStore, PageType, XmlVersion
from metadata.versions import latest_version, referenced_keys
from xyro.app import prune_warehouse
from xyro.loader.warehouse import Warehouse, WarehouseError


def test_put_get_dedupes_and_compresses(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    body = b"<doc>" + b"<item>same words again</item>" * 2000 + b"</doc>"
    key = wh.put(body)
    assert wh.put(body) == key and key in wh
    path = wh.path_of(key)
    assert path.parent.parent.parent == tmp_path / "wh" and len(path.name) == 66
    assert path.stat().st_size < len(body) / 10
    assert wh.get(key) == body
    assert list(wh.keys()) == [key]
    assert not list((tmp_path / "wh").glob("**/.tmp-*"))


def test_corrupt_missing_and_foreign_keys_are_clear_errors(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    key = wh.put(b"<a/>")
    wh.path_of(key).write_bytes(zlib.compress(b"<b/>"))
    with pytest.raises(WarehouseError, match="does not match"):
        wh.get(key)
    wh.path_of(key).write_bytes(b"garbage")
    with pytest.raises(WarehouseError, match="corrupt"):
        wh.get(key)
    wh.path_of(key).unlink()
    with pytest.raises(WarehouseError, match="missing"):
        wh.get(key)
    with pytest.raises(WarehouseError, match="not a warehouse key"):
        wh.path_of("../../etc/passwd")


def test_sweep_removes_tmp_and_unreferenced_only(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    keep, drop = wh.put(b"<keep/>"), wh.put(b"<drop/>")
    (wh.path_of(keep).parent / ".tmp-crashed").write_bytes(b"partial")
    assert wh.sweep({keep}) == 2
    assert keep in wh and drop not in wh


def test_versions_pruned_per_url_shared_blobs_kept(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    with MetadataStore.open(tmp_path / "m.db") as store:
        writer = store.writer()
        shared = wh.put(b"<shared/>")
        keys = []
        for i in range(5):
            key = wh.put(f"<v n='{i}'/>".encode())
            keys.append(key)
            for url in ("http://a.test/x.xml",):
                writer.submit(FetchRecord(url, float(i), PageType.XML, 200, bytes(16)))
                writer.submit(XmlVersion(url, bytes(16), bytes([i]) * 16, float(i), 10, key, True))
        writer.submit(XmlVersion("http://a.test/x.xml", bytes(16), b"s" * 16, 9.0, 9, shared,
                                 None))
        writer.submit(XmlVersion("http://b.test/y.xml", bytes(16), b"s" * 16, 1.0, 9, shared,
                                 None))
        writer.close()
        deleted = prune_warehouse(store, wh, keep=2)
        conn = store.read_connection()
        live = referenced_keys(conn)
        assert live == {keys[4], shared}
        assert deleted == 4 and shared in wh and keys[4] in wh
        assert not any(k in wh for k in keys[:4])
        assert latest_version(conn, "http://a.test/x.xml")[2] == shared
        assert latest_version(conn, "http://nowhere.test/") is None
        conn.close()


def test_the_prune_deletes_blobs_only_after_its_rows_are_gone_for_good(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wh = Warehouse(tmp_path / "wh")
    with MetadataStore.open(tmp_path / "m.db") as store:
        writer = store.writer()
        for i in range(3):
            writer.submit(FetchRecord("http://a.test/x.xml", float(i), PageType.XML, 200,
                                      bytes(16)))
            writer.submit(XmlVersion("http://a.test/x.xml", bytes(16), bytes([i]) * 16,
                                     float(i), 10, wh.put(b"<v n='%d'/>" % i), True))
        writer.close()
        events: list[str] = []
        with store.atomic() as conn:   # the thread's connection, which the prune uses too
            conn.set_trace_callback(events.append)
        real_unlink = os.unlink
        monkeypatch.setattr(os, "unlink", lambda path, *a, **k: (events.append("unlink"),
                                                                 real_unlink(path, *a, **k)))
        assert prune_warehouse(store, wh, keep=1) == 2
        # The deleting commit is synced (synchronous FULL) before the first blob goes: a
        # power loss cannot bring back a version row whose blob is deleted.
        full = events.index("PRAGMA synchronous = FULL")
        commit = events.index("COMMIT", full)
        assert any("DELETE FROM xml_versions" in e for e in events[full:commit])
        assert "unlink" not in events[:commit] and events.count("unlink") >= 2


def test_a_prune_while_crawling_keeps_blobs_written_lately(tmp_path: Path) -> None:
    # The daemon prunes while its workers write: a pruned version's bytes may be the ones a
    # worker just stored again (a document changed back), whose row is not committed yet.
    # put() touches such a blob, and a prune with a grace period leaves it.
    wh = Warehouse(tmp_path / "wh")
    with MetadataStore.open(tmp_path / "m.db") as store:
        writer = store.writer()
        keys = [wh.put(f"<v n='{i}'/>".encode()) for i in range(4)]
        for i, key in enumerate(keys):
            writer.submit(FetchRecord("http://a.test/x.xml", float(i), PageType.XML, 200,
                                      bytes(16)))
            writer.submit(XmlVersion("http://a.test/x.xml", bytes(16), bytes([i]) * 16,
                                     float(i), 10, key, True))
        writer.close()
        for key in keys:   # written an hour ago
            os.utime(wh.path_of(key), (time.time() - 3600, time.time() - 3600))
        assert wh.put(b"<v n='0'/>") == keys[0]   # stored again now, its row to come
        assert prune_warehouse(store, wh, keep=1, grace_s=600) == 2
    assert keys[0] in wh and keys[3] in wh and keys[1] not in wh and keys[2] not in wh


@pytest.mark.parametrize("when", ["before the look", "between the look and the deletion"])
def test_a_put_racing_the_prune_keeps_its_blob(when: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A loader worker stores the bytes of a version the daemon's prune is dropping, at the
    # worst moments: put() returned the key, so the blob must be there after the prune.
    wh = Warehouse(tmp_path / "wh")
    body = b"<doc>the bytes of a pruned version, stored again</doc>"
    key = wh.put(body)
    os.utime(wh.path_of(key), (time.time() - 3600, time.time() - 3600))
    rename = os.rename

    def racing_rename(src: object, dst: object) -> None:
        if when == "before the look":
            assert wh.put(body) == key
        rename(src, dst)   # type: ignore[arg-type]
        if when != "before the look":
            assert wh.put(body) == key
    monkeypatch.setattr(os, "rename", racing_rename)
    wh.delete_unreferenced([key], set(), written_before=time.time() - 600)
    monkeypatch.setattr(os, "rename", rename)
    assert wh.get(key) == body
    assert not list(wh.root.glob("??/??/.tmp-*"))


def test_a_durable_put_syncs_the_blob_then_every_folder_entry_it_changed(
        tmp_path: Path, fsync_log: list[str]) -> None:
    root = tmp_path / "wh"
    root.mkdir()
    wh = Warehouse(root)
    synced = fsync_log
    key = wh.put(b"<first/>")
    ab, cd = root / key[:2], root / key[:5]
    # The bytes (under their temporary name), the rename into ab/cd, then ab/cd's entry in
    # ab and ab's in the root: after a power loss the row's blob is there, whole.
    assert len(synced) == 4 and Path(synced[0]).parent == cd
    assert Path(synced[0]).name.startswith(".tmp-")
    assert synced[1:] == [str(cd), str(ab), str(root)]

    synced.clear()
    assert wh.put(b"<first/>") == key and synced == []   # stored already: nothing to sync
    twin = next(b for b in (b"<x%d/>" % i for i in range(100_000))
                if Warehouse.key_of(b)[:5] == key[:5])   # a blob for the same folder
    wh.put(twin)
    assert len(synced) == 2 and synced[1] == str(cd)    # its bytes, its name; no folder made


def test_a_put_that_need_not_be_durable_syncs_nothing(tmp_path: Path,
                                                      fsync_log: list[str]) -> None:
    wh = Warehouse(tmp_path / "wh", durable=False)
    assert wh.get(wh.put(b"<fast/>")) == b"<fast/>" and fsync_log == []
