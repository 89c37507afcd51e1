"""An XML document that another document pulls in as an external entity is a warehouse
document all the same (paper 003 §4: the loader keeps XML documents; DTDs and entities are
kept apart only to serve loads): fetched first as the entity, it is loaded as a document
too, not only cached, when the scope admits it; one on another host is an entity only, and
one in a denied domain is never fetched. Real HTTP servers on 127.0.0.1 and 127.0.0.2, real
SQLite, real lxml."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

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


def _crawl_with_entity_elsewhere(tmp_path: Path, local_app_for: Any, routed_site: Any,
                                 *settings: str) -> tuple[Any, dict[str, str], set[str]]:
    """book.xml on 127.0.0.1 pulls in an XML document on 127.0.0.2 as an entity."""
    other = routed_site(lambda path: (200, {"Content-Type": "application/xml"},
                                      b"<chapter>elsewhere</chapter>\n"), host="127.0.0.2")
    book = (b'<?xml version="1.0"?>\n<!DOCTYPE book [\n<!ENTITY ch SYSTEM "'
            + other.base.encode() + b'/ch.xml">]>\n<book>&ch;</book>\n')
    site = routed_site(lambda path: (200, {"Content-Type": "application/xml"}, book))
    app = local_app_for(tmp_path, f"seeds={json.dumps([site.base + '/book.xml'])}", *settings)
    assert run_crawl(app, max_seconds=30).stop_reason == "frontier exhausted"
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        types = dict(conn.execute("SELECT url, type FROM urls"))
        documents = {url for (url,) in conn.execute("SELECT url FROM v_xml_documents")}
    finally:
        conn.close()
    return other, types, documents


def test_an_entity_outside_the_scope_is_fetched_as_an_entity_only(
        tmp_path: Path, local_app_for: Any, routed_site: Any) -> None:
    other, types, documents = _crawl_with_entity_elsewhere(tmp_path, local_app_for,
                                                           routed_site)
    assert other.requests == ["/ch.xml"]
    assert types[other.base + "/ch.xml"] == "dtd"      # a part, never a page to refresh
    assert documents == {url for url, t in types.items() if url.startswith("http://127.0.0.1")}
    assert len(documents) == 1


@pytest.mark.parametrize("setting", ['scope.denied_domains=["127.0.0.2"]',
                                     'scope.deny_patterns=["/ch\\\\.xml$"]'])
def test_an_entity_the_scope_denies_is_never_fetched(
        tmp_path: Path, local_app_for: Any, routed_site: Any, setting: str) -> None:
    other, types, documents = _crawl_with_entity_elsewhere(tmp_path, local_app_for,
                                                           routed_site, setting)
    assert other.arrivals == [], "never fetched means never, for a DTD or entity too"
    assert documents == set() and other.base + "/ch.xml" not in types
    book = next(url for url in types if url.endswith("/book.xml"))
    assert types[book] == "error" and "refused: scope: " in _error(tmp_path, book)


def _error(tmp_path: Path, url: str) -> str:
    conn = sqlite3.connect(tmp_path / "xyro.db")
    try:
        return " ".join(d for (d,) in conn.execute(
            "SELECT e.detail FROM errors e JOIN urls u ON u.id = e.url_id WHERE u.url = ?",
            (url,)))
    finally:
        conn.close()
