"""An XML document that another document pulls in as an external entity is a warehouse
document all the same (paper 003 §4: the loader keeps XML documents; DTDs and entities are
kept apart only to serve loads): fetched first as the entity, it is loaded as a document
too, not only cached. Real HTTP server on 127.0.0.1, real SQLite, real lxml."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from xyro.service.crawl_run import run_crawl

PAGES = {
    "/index.html": ("text/html", b'<html><a href="book.xml">book</a> <a href="ch1.xml">1</a>'),
    "/book.xml": ("application/xml", b'<?xml version="1.0"?>\n<!DOCTYPE book [\n'
                                     b'<!ENTITY ch1 SYSTEM "ch1.xml">]>\n<book>&ch1;</book>\n'),
    "/ch1.xml": ("application/xml", b"<chapter>one</chapter>\n"),   # no declaration: an entity
}


def test_a_document_used_as_an_entity_is_stored_as_a_document(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    site = routed_site(lambda path: (200, {"Content-Type": PAGES[path][0]}, PAGES[path][1]))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/index.html'])}")
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        documents = {url for (url,) in conn.execute("SELECT url FROM v_xml_documents")}
        types = dict(conn.execute("SELECT url, type FROM urls"))
    finally:
        conn.close()
    assert documents == {site.base + "/book.xml", site.base + "/ch1.xml"}, (documents, types)
    assert site.requests.count("/ch1.xml") == 1   # one fetch served both
