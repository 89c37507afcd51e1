"""Checks, links and canonical signatures of single documents (paper 003 §3–4)."""

from __future__ import annotations

from xyro.loader import EntityCache, LoadStatus, load_document

BASE = "http://ex.test/docs/a/doc.xml"

DTD = (b'<!ENTITY % common SYSTEM "common.ent"> %common;'
       b"<!ELEMENT note (to, body)><!ELEMENT to (#PCDATA)><!ELEMENT body (#PCDATA)>"
       b"<!ATTLIST note id CDATA #REQUIRED>")


def _cache() -> EntityCache:
    cache = EntityCache()
    cache.put("http://ex.test/dtd/note.dtd", DTD)
    cache.put("http://ex.test/dtd/common.ent", b'<!ENTITY who "Tove">')
    return cache


def test_needs_come_round_by_round_relative_to_the_dtd() -> None:
    body = b'<!DOCTYPE note SYSTEM "../../dtd/note.dtd"><note id="1"><to>&who;</to><body/></note>'
    cache = EntityCache()
    first = load_document(body, BASE, cache)
    assert first.status is LoadStatus.PENDING and first.needs == ("http://ex.test/dtd/note.dtd",)
    cache.put("http://ex.test/dtd/note.dtd", DTD)
    second = load_document(body, BASE, cache)
    assert second.needs == ("http://ex.test/dtd/common.ent",)  # relative to the DTD
    cache.put("http://ex.test/dtd/common.ent", b'<!ENTITY who "Tove">')
    third = load_document(body, BASE, cache)
    assert third.status is LoadStatus.LOADED and third.valid is True
    assert third.dtd_url == "http://ex.test/dtd/note.dtd"


def test_invalid_document_is_loaded_and_flagged() -> None:
    body = (b'<!DOCTYPE note SYSTEM "http://ex.test/dtd/note.dtd">'
            b'<note><body>x</body><to>y</to></note>')
    res = load_document(body, BASE, _cache())
    assert res.status is LoadStatus.LOADED and res.valid is False
    assert "id" in res.validation_error and "line 1" in res.validation_error


def test_internal_subset_validates_with_the_external_one() -> None:
    body = (b'<!DOCTYPE note SYSTEM "http://ex.test/dtd/note.dtd" [<!ENTITY x "X">]>'
            b'<note id="2"><to>&x;&who;</to><body/></note>')
    res = load_document(body, BASE, _cache())
    assert res.valid is True
    body = body.replace(b"<body/>", b"<body/><extra/>")
    assert load_document(body, BASE, _cache()).valid is False


def test_no_doctype_no_validation_and_schema_location_recorded() -> None:
    body = (b'<r xmlns="urn:r" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            b'xsi:schemaLocation="urn:r ../schemas/r.xsd  urn:s s.xsd"/>')
    res = load_document(body, BASE, EntityCache())
    assert res.valid is None and res.dtd_url is None
    assert res.schema_url == "http://ex.test/docs/schemas/r.xsd"
    assert [l.url for l in res.links] == ["http://ex.test/docs/schemas/r.xsd",
                                          "http://ex.test/docs/a/s.xsd"]
    body = (b'<r xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            b'xsi:noNamespaceSchemaLocation="/r.xsd"/>')
    assert load_document(body, BASE, EntityCache()).schema_url == "http://ex.test/r.xsd"


def test_every_kind_of_link_in_document_order() -> None:
    body = b"""<?xml version="1.0"?>
<?xml-stylesheet type="text/xsl" href="style.xsl"?>
<root xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:xi="http://www.w3.org/2001/XInclude"
      xmlns:xsl="http://www.w3.org/1999/XSL/Transform" xmlns:atom="http://www.w3.org/2005/Atom">
  <xsl:import href="common/base.xsl"/>
  <xsl:include href="inc.xsl"/>
  <item xlink:href="other.xml#frag">one</item>
  <xi:include href="part.xml"/>
  <part xml:base="http://elsewhere.test/sub/"><item xlink:href="x.xml"/></part>
  <img src="pic.svg"/>
  <channel><link>http://news.test/item</link><enclosure url="cast.xml"/></channel>
  <atom:link href="feed.atom"/>
  <a href="mailto:me@ex.test"/><a href="javascript:void(0)"/><a href="#top"/>
  <b url="HTTP://EX.TEST:80/up/../page.html"/>
</root>"""
    res = load_document(body, BASE, EntityCache())
    got = [(l.kind, l.url) for l in res.links]
    assert got == [
        ("stylesheet", "http://ex.test/docs/a/style.xsl"),
        ("xsl", "http://ex.test/docs/a/common/base.xsl"),
        ("xsl", "http://ex.test/docs/a/inc.xsl"),
        ("xlink", "http://ex.test/docs/a/other.xml"),
        ("xinclude", "http://ex.test/docs/a/part.xml"),
        ("xlink", "http://elsewhere.test/sub/x.xml"),
        ("href", "http://ex.test/docs/a/pic.svg"),
        ("rss", "http://news.test/item"),
        ("rss", "http://ex.test/docs/a/cast.xml"),
        ("atom", "http://ex.test/docs/a/feed.atom"),
        ("href", "http://ex.test/page.html"),
    ]
    likely = {l.url: l.likely_xml for l in res.links}
    assert likely["http://ex.test/docs/a/style.xsl"] and likely["http://ex.test/docs/a/other.xml"]
    assert not likely["http://news.test/item"]


SIGNED = b"""<?xml version="1.0" encoding="UTF-8"?>
<catalog xmlns:x="urn:x" id="c1" lang="en">
  <title>Rivers</title>
  <item x:kind="a" ref="1">Seine</item>
  <empty></empty>
</catalog>
"""
RESERIALIZED = (b"<?xml version='1.0' encoding='utf-8'?><!-- exported again -->"
                b"<catalog lang='en' id='c1' xmlns:x='urn:x'>\n\n\t<title>Rivers</title>"
                b"<!-- c --><item ref='1' x:kind='a'>Seine</item><empty/></catalog>")


def test_reserialization_is_not_a_change_and_one_character_is() -> None:
    a = load_document(SIGNED, BASE, EntityCache())
    b = load_document(RESERIALIZED, BASE, EntityCache())
    assert a.signature == b.signature and a.signature is not None
    c = load_document(SIGNED.replace(b"Seine", b"Seina"), BASE, EntityCache())
    assert c.signature != a.signature
    d = load_document(SIGNED.replace(b'ref="1"', b'ref="2"'), BASE, EntityCache())
    assert d.signature != a.signature


def test_entity_and_its_text_sign_the_same() -> None:
    with_entity = b'<!DOCTYPE x [<!ENTITY s "Seine">]><x>&s;</x>'
    assert (load_document(with_entity, BASE, EntityCache()).signature
            == load_document(b"<x>Seine</x>", BASE, EntityCache()).signature)


def test_other_encodings_sign_like_utf8() -> None:
    latin = '<?xml version="1.0" encoding="ISO-8859-1"?><x>café</x>'.encode("latin-1")
    utf16 = '<?xml version="1.0" encoding="UTF-16"?><x>café</x>'.encode("utf-16")
    utf8 = "<x>café</x>".encode()
    sigs = {load_document(b, BASE, EntityCache()).signature for b in (latin, utf16, utf8)}
    assert len(sigs) == 1


def test_rdf_resource_is_a_link_and_xslt_value_templates_are_not() -> None:
    from lxml import etree

    from xyro.loader.links import extract_xml_links

    rdf = etree.fromstring(
        b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:d="urn:d">'
        b'<rdf:Description><d:see rdf:resource="other.rdf"/></rdf:Description></rdf:RDF>',
        base_url="http://a.example/x/data.rdf").getroottree()
    assert [(l.url, l.kind) for l in extract_xml_links(rdf, "http://a.example/x/data.rdf")] == [
        ("http://a.example/x/other.rdf", "rdf")]
    xsl = b'''<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
      <xsl:import href="base.xsl"/><xsl:template match="/"><a href="{$filename}">x</a>
      <a href="help.html">h</a></xsl:template></xsl:stylesheet>'''
    tree = etree.fromstring(xsl, base_url="http://a.example/s.xsl").getroottree()
    assert [l.url for l in extract_xml_links(tree, "http://a.example/s.xsl")] == [
        "http://a.example/base.xsl", "http://a.example/help.html"]
    # Outside a stylesheet a brace is just a (badly written) URL.
    doc = etree.fromstring(b'<d><a href="{x}.html"/></d>', base_url="http://a.example/d.xml")
    assert len(extract_xml_links(doc.getroottree(), "http://a.example/d.xml")) == 1
