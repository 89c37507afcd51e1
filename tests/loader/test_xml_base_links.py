"""xml:base in XML links (xyro/loader/links.py): found by walking the elements in document
order, where an XPath over every node of the document fails beyond 10 million nodes
(libxml2's node-set limit); links outside every xml:base keep the document URL."""

from __future__ import annotations

from lxml import etree

from xyro.loader import extract_xml_links

DOC = "http://h.test/dir/doc.xml"
XLINK = 'xmlns:xlink="http://www.w3.org/1999/xlink"'


def _links(body: str) -> list[tuple[str, str]]:
    tree = etree.fromstring(body.encode(), base_url=DOC).getroottree()
    return [(link.url, link.kind) for link in extract_xml_links(tree, DOC)]


def test_xml_base_on_a_deep_element_applies_to_its_subtree_only() -> None:
    body = (f'<r {XLINK}><a xlink:href="before.xml"/><b><c><d>'
            '<e xml:base="http://other.test/base/"><f xlink:href="in.xml"/></e>'
            '<g xlink:href="sibling.xml"/></d></c></b><h xlink:href="after.xml"/></r>')
    assert _links(body) == [
        ("http://h.test/dir/before.xml", "xlink"), ("http://other.test/base/in.xml", "xlink"),
        ("http://h.test/dir/sibling.xml", "xlink"), ("http://h.test/dir/after.xml", "xlink")]


def test_xml_base_after_href_on_the_same_element_still_applies_to_it() -> None:
    body = f'<r {XLINK}><e xlink:href="x.xml" xml:base="sub/"/><f xlink:href="y.xml"/></r>'
    assert _links(body) == [("http://h.test/dir/sub/x.xml", "xlink"),
                            ("http://h.test/dir/y.xml", "xlink")]


def test_relative_xml_bases_chain_and_the_root_one_covers_everything() -> None:
    body = (f'<r {XLINK} xml:base="http://b.test/one/"><e xml:base="two/">'
            '<f xlink:href="../z.xml"/></e><g xlink:href="w.xml"/></r>')
    assert _links(body) == [("http://b.test/one/z.xml", "xlink"),
                            ("http://b.test/one/w.xml", "xlink")]


def test_documents_without_xml_base_resolve_against_their_url() -> None:
    body = (f'<?xml-stylesheet href="s.xsl" type="text/xsl"?><r {XLINK}>'
            '<a xlink:href="a.xml"/><b base="x/" href="../up.xml"/></r>')
    assert _links(body) == [("http://h.test/dir/s.xsl", "stylesheet"),
                            ("http://h.test/dir/a.xml", "xlink"), ("http://h.test/up.xml", "href")]
