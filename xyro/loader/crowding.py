"""Elements too crowded to canonicalize (DESIGN.md §7: a document that breaks a parser is an
ERROR record, and no document may hold a fetch worker for minutes).

libxml2 parses a crowded element in linear time, but two things done after the parse are not
linear, and C code cannot be interrupted, not even by SIGTERM:

- lxml reads an attribute's value by looking its name up from the start of the element's
  attribute list, so reading every value (``el.items()``; the C14N 2.0 writer does it for
  every element) costs n²/2 steps on an element of n attributes: a 9.9 MB root of 10^6
  attributes held a worker about 40 minutes at 2.3 GB;
- lxml's C14N 2.0 writer resolves each element and attribute name by a linear scan of the
  namespace declarations in scope and of the namespaces it has written in scope, so a chain of
  elements declaring a few namespaces each makes every name below them cost their sum.

:func:`crowded` checks both in one linear pass before the canonical form is computed:
``len(el.attrib)`` counts the attribute list without reading a value, and the namespace
declarations in scope are counted from the start-ns/end-ns events of the walk C14N itself
uses. Measured on 10 MiB documents (config/xyro.yaml, loader section): the densest ordinary
document (empty elements) loads in about 25 s; 512 attributes on every element cost about
11 s (no more than 256 do: below 512 the per-attribute cost dominates, at 1000 the square
shows: 16 s); 128 namespace declarations in scope of every name cost about 32 s, 256 cost 57 s.
"""

from __future__ import annotations

from lxml import etree

_TAG_SHOWN = 80  # characters of a tag name quoted in a message (names may be 50,000 long)


def crowded(root: etree._Element, max_attributes: int, max_namespaces: int) -> str | None:
    """Why the tree under ``root`` is too crowded to canonicalize, or None when it is not.

    The first element with more than ``max_attributes`` attributes, or in the scope of more
    than ``max_namespaces`` namespace declarations (its own and its ancestors'), is named
    with its line, the limit and the config key that sets it.
    """
    in_scope = 0
    for event, item in etree.iterwalk(root, events=("start", "start-ns", "end-ns")):
        if event == "start-ns":
            in_scope += 1
        elif event == "end-ns":
            in_scope -= 1
        elif in_scope > max_namespaces:
            return (f"element {_shown(item)} is in the scope of {in_scope} namespace "
                    f"declarations (its own and its ancestors'), more than "
                    f"loader.max_namespaces_in_scope ({max_namespaces}), and canonicalizing "
                    f"scans them for every name")
        else:
            count = len(item.attrib)  # walks the attribute list once, reads no value
            if count > max_attributes:
                return (f"element {_shown(item)} has {count} attributes, more than "
                        f"loader.max_attributes_per_element ({max_attributes}), and "
                        f"canonicalizing costs their square")
    return None


def _shown(el: etree._Element) -> str:
    """``<name> at line N``, the name cut short: enough to find the element in the source."""
    tag = el.tag if isinstance(el.tag, str) else "?"
    if len(tag) > _TAG_SHOWN:
        tag = tag[:_TAG_SHOWN] + "..."
    return f"<{tag}> at line {el.sourceline}"
