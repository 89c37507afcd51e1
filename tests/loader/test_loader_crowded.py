"""Crowded elements (xyro/loader/crowding.py, DESIGN.md §7): an element with more attributes
than loader.max_attributes_per_element, or under more namespace declarations than
loader.max_namespaces_in_scope, is an ERROR parse found in linear time, before lxml's C14N
and attribute reading, which cost the square of those counts, could hold the worker."""

from __future__ import annotations

import time

from lxml import etree

from xyro.loader import EntityCache, LoaderSettings, LoadStatus, load_document
from xyro.loader.crowding import crowded

DOC = "http://127.0.0.1:9/docs/d.xml"
LIMIT = LoaderSettings().max_attributes_per_element
NS_LIMIT = LoaderSettings().max_namespaces_in_scope


def _attributes(count: int) -> str:
    return " ".join(f'a{i}="v{i}"' for i in range(count))


def _element_with(count: int) -> bytes:
    """A root whose third-line child has ``count`` attributes, an xlink:href among them."""
    return (f'<r xmlns:xlink="http://www.w3.org/1999/xlink">\n\n'
            f'<e {_attributes(count - 1)} xlink:href="next.xml"/></r>').encode()


def _chain(levels: int, per_level: int, leaves: int) -> bytes:
    """``levels`` nested elements each declaring ``per_level`` namespaces, then ``leaves``
    empty elements named in the outermost namespace (each name scans the whole scope)."""
    opened = "".join(
        "<e " + " ".join(f'xmlns:p{level}x{i}="urn:{level}:{i}"' for i in range(per_level))
        + ">" for level in range(levels))
    return (opened + "<p0x0:a/>" * leaves + "</e>" * levels).encode()


def test_one_attribute_over_the_limit_is_a_parse_error_naming_line_limit_and_key() -> None:
    res = load_document(_element_with(LIMIT + 1), DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert res.error_detail.startswith(f"{DOC}: element <e> at line 3 has {LIMIT + 1} attributes")
    assert f"loader.max_attributes_per_element ({LIMIT})" in res.error_detail


def test_exactly_the_limit_loads_with_its_links_and_signature() -> None:
    res = load_document(_element_with(LIMIT), DOC, EntityCache())
    assert res.status is LoadStatus.LOADED, res.error_detail
    assert res.signature is not None
    assert [link.url for link in res.links] == ["http://127.0.0.1:9/docs/next.xml"]


def test_the_limit_is_the_setting() -> None:
    settings = LoaderSettings(max_attributes_per_element=3)
    assert load_document(b'<r a="1" b="2" c="3"/>', DOC, EntityCache(),
                         settings).status is LoadStatus.LOADED
    res = load_document(b'<r><s a="1" b="2" c="3" d="4"/></r>', DOC, EntityCache(), settings)
    assert res.status is LoadStatus.ERROR and "(3)" in res.error_detail


def test_a_root_of_100000_attributes_is_refused_in_well_under_a_second() -> None:
    body = f"<r {_attributes(100_000)}/>".encode()  # 1.3 MB; the old loader took ~90 s
    start = time.process_time()
    res = load_document(body, DOC, EntityCache())
    elapsed = time.process_time() - start
    assert res.status is LoadStatus.ERROR and "100000 attributes" in res.error_detail
    assert elapsed < 5.0, f"{elapsed:.1f} s"


def test_namespace_declarations_over_the_limit_in_scope_are_a_parse_error() -> None:
    # Neither element declares more than NS_LIMIT // 2 + 1, but the inner one is under
    # NS_LIMIT + 2.
    body = _chain(levels=2, per_level=NS_LIMIT // 2 + 1, leaves=1)
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.ERROR and res.error_kind == "parse"
    assert (f"element <e> at line 1 is in the scope of {NS_LIMIT + 2} namespace declarations"
            in res.error_detail)
    assert f"loader.max_namespaces_in_scope ({NS_LIMIT})" in res.error_detail


def test_exactly_the_namespace_limit_in_scope_loads() -> None:
    body = _chain(levels=2, per_level=NS_LIMIT // 2, leaves=3)
    res = load_document(body, DOC, EntityCache())
    assert res.status is LoadStatus.LOADED, res.error_detail


def test_a_namespace_chain_over_many_names_is_refused_fast() -> None:
    # 2000 declarations in scope of 200,000 names (1.4 MB): the old loader took ~30 s.
    body = _chain(levels=200, per_level=10, leaves=200_000)
    start = time.process_time()
    res = load_document(body, DOC, EntityCache())
    elapsed = time.process_time() - start
    assert res.status is LoadStatus.ERROR and "max_namespaces_in_scope" in res.error_detail
    assert elapsed < 5.0, f"{elapsed:.1f} s"


def test_counting_is_linear_in_the_attributes() -> None:
    # 40,000 attributes cost the old C14N and link pass 14 s; counting them must not.
    root = etree.fromstring(f"<r {_attributes(40_000)}/>".encode())
    start = time.process_time()
    problem = crowded(root, 512, 128)
    assert problem is not None and "40000 attributes" in problem
    assert time.process_time() - start < 0.5


def test_an_ordinary_document_is_not_crowded() -> None:
    root = etree.fromstring(b'<r xmlns="urn:a" xmlns:x="urn:x" x:y="1"><s a="1">t</s>'
                            b'<!-- c --><?p i?><s xmlns="urn:b"/></r>')
    assert crowded(root, 1, 3) is None  # 3 in scope at the second <s>
