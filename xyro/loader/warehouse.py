"""The warehouse: every distinct version of every XML document, content-addressed and
compressed (paper 003 §2: HTML is never stored, only its metadata).

Layout under ``storage.warehouse_dir``::

    ab/cd/<sha256 of the bytes>.z     one zlib blob per distinct byte content

The key is the SHA-256 of the raw bytes (``ab/cd/<sha256>.z``), so two URLs or two versions
with the same bytes share one blob, and a blob's name proves its content (checked on read).
Two levels of 256-way fan-out keep directories small (65,536 folders for ~10^8 blobs).

Compression: zlib level 6. XML compresses 5–10x with it at ~50–100 MB/s per core, while
lzma gains ~20–30 % more but costs ~10x the CPU, and blobs are written by the fetch workers
during the crawl; zlib also needs no extra dependency to read a blob from a shell
(``python -c 'import zlib,sys; …'`` or ``pigz -dz``).

Writes are atomic: a temporary file in the blob's folder, flushed, then ``os.replace``. A
crash leaves at worst a ``.tmp`` file, removed by :meth:`Warehouse.sweep`. When ``durable``
(the default), a new blob's bytes, its name and any folder made for it are on disk
(``fsync`` of the file, then of each folder changed) before :meth:`Warehouse.put` returns,
so before the version row that references it can commit: after a power loss a committed row
never points at an empty or missing blob. A process crash (``kill -9``) is safe either way;
the page cache outlives the process. Blobs are deleted only by :meth:`Warehouse.delete_unreferenced`,
given the keys the metadata still references (a blob shared by another version or URL is
never deleted while referenced).
"""

from __future__ import annotations

import hashlib
import os
import uuid
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

_SUFFIX = ".z"
_TMP = ".tmp-"


class WarehouseError(Exception):
    """A blob is missing or corrupt."""


class WarehouseWriteError(OSError):
    """A blob cannot be written (a full disk, a read-only or missing folder): no document
    can be stored until the operator acts, so the crawl stops rather than record it."""


class Warehouse:
    """Content-addressed, zlib-compressed blob store with atomic writes."""

    def __init__(self, root: str | Path, *, level: int = 6, durable: bool = True) -> None:
        self.root = Path(root)
        self.level = level
        self.durable = durable

    @staticmethod
    def key_of(body: bytes) -> str:
        digest = hashlib.sha256(body).hexdigest()
        return f"{digest[:2]}/{digest[2:4]}/{digest}{_SUFFIX}"

    def path_of(self, key: str) -> Path:
        if not _valid_key(key):
            raise WarehouseError(f"{key!r} is not a warehouse key (ab/cd/<sha256>{_SUFFIX})")
        return self.root / key

    def put(self, body: bytes) -> str:
        """Store ``body`` (once per distinct content); returns its key."""
        key = self.key_of(body)
        path = self.root / key
        try:
            # Stored already: touched, so a prune running meanwhile keeps it for the row
            # about to reference it (:meth:`delete_unreferenced`'s ``written_before``).
            os.utime(path)
            return key
        except FileNotFoundError:
            pass
        except OSError:
            if path.exists():
                return key
        tmp = path.with_name(f"{_TMP}{uuid.uuid4().hex}")
        try:
            made: list[Path] = []
            try:
                f = open(tmp, "wb")
            except FileNotFoundError:  # first blob of its folder (mkdir only then: it is hot)
                made = self._make_folders(path.parent)
                f = open(tmp, "wb")
            with f:
                f.write(zlib.compress(body, self.level))
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
            os.replace(tmp, path)
            if self.durable:
                # The rename, then each new folder's entry in its parent, deepest first.
                for folder in (path.parent, *(m.parent for m in made)):
                    _fsync_folder(folder)
        except OSError as exc:
            _remove(tmp)
            raise WarehouseWriteError(exc.errno, f"cannot write a document to the "
                                      f"warehouse {self.root}: {exc.strerror or exc}") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return key

    def _make_folders(self, folder: Path) -> list[Path]:
        """Create ``folder`` and its missing parents up to the root; the ones made, deepest
        first (their entries in their parents are what a durable put must sync too)."""
        missing = []
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        for m in reversed(missing):
            m.mkdir(exist_ok=True)
        return missing

    def get(self, key: str) -> bytes:
        """The bytes stored under ``key``, checked against the key's hash."""
        path = self.path_of(key)
        try:
            body = zlib.decompress(path.read_bytes())
        except FileNotFoundError:
            raise WarehouseError(f"blob {key} is missing from {self.root}") from None
        except zlib.error as exc:
            raise WarehouseError(f"blob {key} in {self.root} is corrupt: {exc}") from None
        if self.key_of(body) != key:
            raise WarehouseError(f"blob {key} in {self.root} does not match its hash")
        return body

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _valid_key(key) and (self.root / key).exists()

    def keys(self) -> Iterator[str]:
        if not self.root.exists():
            return
        for path in self.root.glob(f"??/??/*{_SUFFIX}"):
            key = path.relative_to(self.root).as_posix()
            if _valid_key(key):
                yield key

    def delete_unreferenced(self, candidates: Iterable[str], referenced: set[str],
                            written_before: float | None = None) -> int:
        """Delete the candidate blobs that no version references any more; with
        ``written_before`` (POSIX seconds), only those last written or touched earlier: a
        newer one may be the blob of a version whose row is not committed yet."""
        removed = 0
        for key in candidates:
            if key in referenced or not _valid_key(key):
                continue
            try:
                if written_before is None:
                    (self.root / key).unlink()
                elif not self._unlink_if_older(self.root / key, written_before):
                    continue
                removed += 1
            except FileNotFoundError:
                pass
        return removed

    @staticmethod
    def _unlink_if_older(path: Path, written_before: float) -> bool:
        """Delete ``path`` unless written or touched since ``written_before``, with no gap
        for :meth:`put` to touch it between the look and the deletion: it is moved aside
        first (a put() then finds no blob and writes it again), and moved back when fresh
        (same name, same bytes: whatever put() wrote meanwhile is the same blob)."""
        aside = path.with_name(f"{_TMP}pruned-{uuid.uuid4().hex}")
        os.rename(path, aside)
        if aside.stat().st_mtime >= written_before:
            os.replace(aside, path)
            return False
        aside.unlink()
        return True

    def sweep(self, referenced: set[str]) -> int:
        """Remove leftover temporary files and blobs no version references.

        Call it only while nothing writes versions (after the crawl writer is closed):
        a blob written by a worker is referenced only once the writer commits its row.
        """
        removed = 0
        if self.root.exists():
            for tmp in self.root.glob(f"??/??/{_TMP}*"):
                tmp.unlink(missing_ok=True)
                removed += 1
        return removed + self.delete_unreferenced(list(self.keys()), referenced)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    """Delete ``path`` if it can be (after a failed write its folder may be the problem)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _valid_key(key: str) -> bool:
    parts = key.split("/")
    if len(parts) != 3 or not parts[2].endswith(_SUFFIX):
        return False
    digest = parts[2][:-len(_SUFFIX)]
    return (len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
            and parts[0] == digest[:2] and parts[1] == digest[2:4])
