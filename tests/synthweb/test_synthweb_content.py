"""Page bodies: an independent extractor (lxml) finds exactly the ground-truth links."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urljoin

import lxml.etree as etree
import lxml.html
import requests

from xyro.synthweb import SyntheticWeb

XLINK = "{http://www.w3.org/1999/xlink}href"
ATOM = "{http://www.w3.org/2005/Atom}"


def _html_links(body: bytes, url: str) -> list[str]:
    doc = lxml.html.document_fromstring(body, base_url=url)
    doc.make_links_absolute(url, handle_failures="discard")
    return [link for el, attr, link, _ in doc.iterlinks() if el.tag != "base"]


def _xml_links(body: bytes, url: str, kind: str) -> list[str]:
    root = etree.fromstring(body, etree.XMLParser(resolve_entities=False, no_network=True,
                                                  load_dtd=False))
    if kind == "xml":
        return [urljoin(url, e.get(XLINK)) for e in root.iter() if e.get(XLINK)]
    if kind == "rss":
        return [e.text for e in root.iter("link")]
    return [e.get("href") for e in root.iter(f"{ATOM}link")]


def test_extracted_links_equal_ground_truth_in_order(web: SyntheticWeb) -> None:
    session = requests.Session()
    kinds, bases = set(), 0
    for page in web.model.pages:
        if web.model.hosts[page.host].throttled:
            continue
        url = web.url(page.id)
        r = session.get(url, timeout=5)
        assert r.status_code == 200, url
        if page.kind == "html":
            found = _html_links(r.content, url)
            bases += page.base_dir is not None
        else:
            found = _xml_links(r.content, url, page.kind)
        assert found == web.out_links(page.id), url
        kinds.add(page.kind)
    assert kinds == {"html", "xml", "rss", "atom"} and bases > 0


def test_nofollow_is_marked(web: SyntheticWeb) -> None:
    page = next(p for p in web.model.pages if any(l.nofollow for l in p.links)
                and not web.model.hosts[p.host].throttled)
    doc = lxml.html.document_fromstring(requests.get(web.url(page.id), timeout=5).content)
    rels = [a.get("rel") for a in doc.iter("a")]
    assert rels.count("nofollow") == sum(l.nofollow for l in page.links)


def test_xml_with_doctype_is_valid_against_the_served_dtd(web: SyntheticWeb,
                                                          tmp_path: Path) -> None:
    host = web.model.hosts[0]
    for name in ("catalog.dtd", "common.ent"):
        r = requests.get(web.url_of(host.index, f"/dtd/{name}"), timeout=5)
        assert r.status_code == 200
        (tmp_path / name).write_bytes(r.content)
    dtd = etree.DTD(str(tmp_path / "catalog.dtd"))
    docs = [p for p in web.model.pages if p.kind == "xml" and p.doctype
            and not web.model.hosts[p.host].throttled]
    assert docs and any(p.stylesheet for p in web.model.pages)
    for page in docs:
        body = requests.get(web.url(page.id), timeout=5).content
        assert b"<!DOCTYPE catalog SYSTEM" in body
        root = etree.fromstring(body, etree.XMLParser(no_network=True, load_dtd=False))
        assert dtd.validate(root), dtd.error_log.filter_from_errors()
    xsl = requests.get(web.url_of(0, "/style/catalog.xsl"), timeout=5)
    assert xsl.status_code == 200 and etree.fromstring(xsl.content) is not None


def test_content_types(web: SyntheticWeb) -> None:
    expected = {"html": "text/html", "xml": "application/xml", "rss": "application/rss+xml",
                "atom": "application/atom+xml"}
    for kind, ctype in expected.items():
        page = next(p for p in web.model.pages if p.kind == kind
                    and not web.model.hosts[p.host].throttled)
        r = requests.get(web.url(page.id), timeout=5)
        assert r.headers["Content-Type"].startswith(ctype)
        assert int(r.headers["Content-Length"]) == len(r.content)
