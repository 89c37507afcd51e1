"""Keys derived from a canonical URL: its 64-bit look-up hash and its host.

``urls.url`` is not indexed: a unique index on the text would store every URL twice and
grow the b-tree by ~80 bytes per entry. Instead ``urls.hash`` (8 bytes) holds a stable
64-bit digest of the URL (the first 8 bytes of its MD5: not for security, just uniform and
the fastest stable digest in hashlib here) and a look-up compares the text of every row
with that hash, so a collision costs one extra row read, never a wrong id. The rows with a
hash are found through ``urls_hash`` for fetched pages (a partial index, see
:mod:`metadata.schema`) and through :class:`metadata.idmap.IdMap` for every URL.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable

HashFn = Callable[[str], int]

_md5 = hashlib.md5
_first_int64 = struct.Struct("<q").unpack_from  # = int.from_bytes(digest[:8], "little",
#                                                 signed=True), without the slice
_NETLOC = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/?#]*)")


def url_hash(url: str) -> int:
    """Signed 64-bit hash of ``url`` (fits SQLite's INTEGER); stable across runs."""
    return _first_int64(_md5(url.encode("utf-8", "surrogatepass"),
                             usedforsecurity=False).digest())[0]


def host_of(url: str) -> str:
    """Lowercase host[:port] of an absolute URL; ``""`` when it has none (e.g. ``urn:``)."""
    match = _NETLOC.match(url)
    if match is None:
        return ""
    netloc = match.group(1)
    if "@" in netloc:
        netloc = netloc.rpartition("@")[2]
    return netloc.lower()
