"""At most MAX_LINKS (65534, the paper's per-page limit) links of an XML document, as of an HTML
page: the first ones in document order, and ``truncated`` says when the cap bound. Without
the cap every link reached the frontier and the OPIC visit while the page's stored links
stopped at the limit (DESIGN.md §4)."""

from __future__ import annotations

from xyro.content.html_links import MAX_LINKS
from xyro.loader.cache import EntityCache
from xyro.loader.document import LoadStatus, load_document
from xyro.loader.outside import outside_links

URL = "http://h.test/d.xml"


def _hrefs(n: int) -> bytes:
    return b"<r>" + b"".join(b'<a href="p%d.xml"/>' % i for i in range(n)) + b"</r>"


def test_a_document_keeps_its_first_max_links_links_and_says_it_was_cut() -> None:
    result = load_document(_hrefs(MAX_LINKS + 5), URL, EntityCache())
    assert result.status is LoadStatus.LOADED
    links = result.links
    assert len(links) == MAX_LINKS and links.truncated
    assert (links[0].url, links[-1].url) == ("http://h.test/p0.xml",
                                             f"http://h.test/p{MAX_LINKS - 1}.xml")


def test_a_document_of_exactly_max_links_links_is_not_cut() -> None:
    links = load_document(_hrefs(MAX_LINKS), URL, EntityCache()).links
    assert len(links) == MAX_LINKS and not links.truncated
    few = load_document(_hrefs(3), URL, EntityCache()).links
    assert [link.url for link in few] == [f"http://h.test/p{i}.xml" for i in range(3)]
    assert not few.truncated and few == tuple(few)


def test_the_cap_holds_inside_one_attribute_of_many_locations() -> None:
    """One xsi:schemaLocation of 70,000 namespace/location pairs: a single attribute."""
    pairs = " ".join(f"urn:n{i} s{i}.xsd" for i in range(MAX_LINKS + 100))
    body = (f'<r xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            f'xsi:schemaLocation="{pairs}"/>').encode()
    links = load_document(body, URL, EntityCache()).links
    assert len(links) == MAX_LINKS and links.truncated
    assert links[-1].url == f"http://h.test/s{MAX_LINKS - 1}.xsd"


def test_pages_read_for_their_links_alone_are_capped_too() -> None:
    links = outside_links(_hrefs(MAX_LINKS + 1), URL)
    assert len(links) == MAX_LINKS and links.truncated
