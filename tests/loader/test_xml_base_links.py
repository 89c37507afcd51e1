"""xml:base in XML links (xyro/loader/links.py): found by walking the elements in document
order, where an XPath over every node of the document fails beyond 10 million nodes
(libxml2's node-set limit); links outside every xml:base keep the document URL."""

from __future__ import annotations

from lxml import etree

from xyro.content.html_links import resolve_href
from xyro.loader import extract_xml_links
from xyro.net.urls import canonicalize

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


def test_the_xml_base_chain_matches_lxml_on_random_documents() -> None:
    # The walk keeps the chain as a stack (lxml's el.base walks every ancestor for every
    # link: minutes for a document of deeply nested xml:base); both must agree.
    import random

    rng = random.Random(7)
    # Not "" (below): libxml2 then drops the parent's base, against RFC 3986 §5.2.
    values = ["a/", "../", "/root/", "http://x.test/p/", "q?x=1", "b/c/", "d/#frag"]
    for _ in range(200):
        parts, depth = ["<r>"], 1
        for _ in range(rng.randint(1, 40)):
            move = rng.random()
            if move < 0.4:
                base = f' xml:base="{rng.choice(values)}"' if rng.random() < 0.6 else ""
                parts.append(f"<e{base}>")
                depth += 1
            elif move < 0.6 and depth > 1:
                parts.append("</e>")
                depth -= 1
            else:
                parts.append(f'<l href="t{rng.randint(0, 9)}.xml"/>')
        parts.append("</e>" * (depth - 1) + "</r>")
        tree = etree.fromstring("".join(parts).encode(), base_url=DOC).getroottree()
        expected = [resolve_href(el.base or DOC, el.get("href"))
                    for el in tree.iter("l")]
        got = [link.url for link in extract_xml_links(tree, DOC)]
        assert got == [canonicalize(u) for u in expected if u], "".join(parts)


def test_an_empty_xml_base_keeps_the_parent_base() -> None:
    # XML Base §4.3 and RFC 3986 §5.2.2: "" resolves to the base it is resolved against.
    body = '<r><e xml:base="b/c/"><e xml:base=""><l href="t.xml"/></e></e></r>'
    assert _links(body) == [("http://h.test/dir/b/c/t.xml", "href")]


def test_deeply_nested_xml_bases_resolve_along_the_whole_chain() -> None:
    depth = 250   # libxml2's own nesting limit is 256
    body = ('<r>' + '<d xml:base="a/">' * depth + '<l href="x.xml"/>' * 3 + '</d>' * depth
            + '<l href="y.xml"/></r>')
    deep = "http://h.test/dir/" + "a/" * depth + "x.xml"
    assert _links(body) == [(deep, "href")] * 3 + [("http://h.test/dir/y.xml", "href")]


def test_an_xml_base_of_a_scheme_the_crawl_does_not_follow_keeps_its_subtree_out() -> None:
    # A file: base is what XInclude processing leaves in published documents; the links
    # under it are file links, not pages of the document's own site.
    for base in ("file:/etc/", "ftp://f.test/dir/", "urn:x:y", "mailto:a@b.test"):
        body = (f'<r><e xml:base="{base}"><l href="f.xml"/>'
                '<l href="http://h.test/abs.xml"/></e><l href="after.xml"/></r>')
        assert _links(body) == [("http://h.test/abs.xml", "href"),
                                ("http://h.test/dir/after.xml", "href")], base
