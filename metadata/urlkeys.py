"""Keys derived from a canonical URL: its 64-bit look-up hash and its host.

``urls.url`` is not indexed: a unique index on the text would store every URL twice and
grow the b-tree by ~80 bytes per entry. Instead ``urls.hash`` (indexed, 8 bytes) holds a
stable 64-bit BLAKE2b digest of the URL and a look-up compares the text of every row with
that hash, so a collision costs one extra row read, never a wrong id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

HashFn = Callable[[str], int]

_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


def url_hash(url: str) -> int:
    """Signed 64-bit BLAKE2b hash of ``url`` (fits SQLite's INTEGER); stable across runs."""
    return _from_bytes(_blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                       "little", signed=True)


def host_of(url: str) -> str:
    """Lowercase host[:port] of an absolute URL; ``""`` when it has none (e.g. ``urn:``)."""
    _, sep, rest = url.partition("://")
    if not sep:
        return ""
    end = len(rest)
    for stop in "/?#":
        i = rest.find(stop, 0, end)
        if i >= 0:
            end = i
    netloc = rest[:end]
    at = netloc.rfind("@")
    if at >= 0:
        netloc = netloc[at + 1:]
    return netloc.lower()
