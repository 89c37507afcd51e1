"""The change signature of an XML document: MD5 of its C14N 2.0 form (paper 003 §6).

C14N 2.0 (https://www.w3.org/TR/xml-c14n2/) fixes attribute order, quoting, namespace
declarations, empty-element syntax and character references; ``with_comments=False`` drops
comments and ``strip_text=True`` trims whitespace at the edges of text nodes (indentation
between elements). The DOCTYPE and the XML declaration are not part of the canonical form.
So a re-serialized document keeps its signature, while a one-character text change does not.
Entities are expanded by the parser first (``resolve_entities=True`` in the safe parser), so
``&site;`` and its replacement text give the same signature.
"""

from __future__ import annotations

import hashlib

from lxml import etree


def canonical_form(tree: etree._ElementTree) -> bytes:
    """The C14N 2.0 serialization (comments out, text stripped) as UTF-8 bytes."""
    return etree.canonicalize(tree, with_comments=False, strip_text=True).encode("utf-8")


def canonical_signature(tree: etree._ElementTree) -> bytes:
    """16-byte MD5 of :func:`canonical_form` (a change detector, not a security hash)."""
    return hashlib.md5(canonical_form(tree), usedforsecurity=False).digest()
