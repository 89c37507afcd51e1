"""Page signatures for change detection (paper 003 §3: the MD5 of each fetched page).

The crawler compares the signature of a fresh fetch with the stored one: equal means "no
change" for the change-rate estimators (DESIGN.md §6). This is the signature of the raw body
bytes as received (after transfer decoding); the XML loader adds a canonical signature of its
own, so formatting-only changes of XML can be told apart later.
"""

from __future__ import annotations

import hashlib

MD5_BYTES = 16


def md5_signature(body: bytes) -> bytes:
    """The 16-byte MD5 digest of the raw body (not a security hash: a change detector)."""
    return hashlib.md5(body, usedforsecurity=False).digest()


def signature_changed(body: bytes, stored: bytes | None) -> bool:
    """True when the body differs from the page whose signature was stored.

    A page never seen before (``stored`` is None) counts as changed: it is new content.
    """
    return stored is None or md5_signature(body) != stored
