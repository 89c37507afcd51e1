"""Each hostile case does what its ground truth says (never reading a bomb or 50 MB whole)."""

from __future__ import annotations

import codecs
import socket
import threading
import time
import zlib
from urllib.parse import urljoin, urlsplit

import lxml.etree as etree
import lxml.html
import pytest
import requests

from xyro.clock import ManualClock
from xyro.synthweb import CASES, HOSTILE_KINDS, SyntheticWeb
from xyro.synthweb.hostile import build_gzip_bomb

OUTCOMES = {"too_large", "timeout", "redirects", "trap", "dead", "http_status", "connect",
            "robots", "ok"}


def _url(web: SyntheticWeb, name: str) -> str:
    return next(u for u, c in web.hostile_urls().items() if c.name == name)


def _wait_for(predicate: object, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        pause.wait(0.02)
    return False


def test_catalog_is_complete_and_every_entry_is_linked(web: SyntheticWeb) -> None:
    assert set(CASES) == HOSTILE_KINDS
    assert all(c.expected in OUTCOMES for c in CASES.values())
    linked = {u for p in web.model.pages for u in web.out_links(p.id)}
    entries = web.hostile_urls()
    assert set(entries) <= linked
    assert {c.name for c in entries.values()} == {n for n, c in CASES.items() if c.entry}
    assert {c.name for c in web.hostile_hosts().values()} == \
        {"robots_500", "robots_malformed", "throttled_host"}
    for url in entries:  # the pages linking to hostile ones are fetchable and allowed
        src = next(p for p in web.model.pages if url in web.out_links(p.id))
        assert not src.disallowed


def test_gzip_bomb_is_small_on_the_wire_and_huge_inflated(web: SyntheticWeb, raw) -> None:
    head, body = raw.get(_url(web, "gzip_bomb"), cap=64 * 1024)
    assert raw.header(head, "Content-Encoding") == "gzip"
    assert int(raw.header(head, "Content-Length")) < 2 * 2**20
    inflated = zlib.decompressobj(31).decompress(body, 20 * 2**20)
    assert len(inflated) == 20 * 2**20  # 20 MiB from < 64 KiB, and we stopped there


def test_gzip_bomb_builder_is_a_valid_stream() -> None:
    data = build_gzip_bomb(5 * 2**20 + 3)
    assert zlib.decompress(data, 31) == bytes(5 * 2**20 + 3)


def test_big_body_announces_50mb_and_is_streamed(web: SyntheticWeb, raw) -> None:
    url = _url(web, "big_body")
    head, body = raw.get(url, cap=2**20)
    assert int(raw.header(head, "Content-Length")) == 50 * 2**20
    assert len(body) == 2**20 and body.startswith(b"<p>filler")
    path = urlsplit(url).path
    assert _wait_for(lambda: [r for r in web.log.requests(path=path) if r.end is not None])
    (rec,) = web.log.requests(path=path)
    assert rec.status == 200 and rec.bytes < 50 * 2**20  # the server gave up with the client


def test_slow_drip_defeats_a_per_read_timeout(web: SyntheticWeb) -> None:
    u = urlsplit(_url(web, "slow_drip"))
    with socket.create_connection((u.hostname, u.port), timeout=1.0) as s:
        s.sendall(f"GET {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
        s.settimeout(3 * web.spec.drip_interval)  # a read timeout longer than the drip
        data, start = b"", time.monotonic()
        while time.monotonic() - start < 1.0:
            data += s.recv(4096)  # never times out: a byte comes every drip_interval
    body = data.partition(b"\r\n\r\n")[2]
    assert b"200 OK" in data and b"Content-Length: 50" in data
    assert 1 <= len(body) <= 1.0 / web.spec.drip_interval + 2


def _follow(url: str, hops: int) -> list[tuple[int, str]]:
    seen = []
    for _ in range(hops):
        r = requests.get(url, allow_redirects=False, timeout=5)
        seen.append((r.status_code, url))
        if r.status_code not in (301, 302, 307, 308):
            break
        url = urljoin(url, r.headers["Location"])
    return seen


def test_redirect_loop_cycles(web: SyntheticWeb) -> None:
    hops = _follow(_url(web, "redirect_loop"), 6)
    assert all(s == 302 for s, _ in hops) and len({u for _, u in hops}) == 2


def test_redirect_chain_is_longer_than_five(web: SyntheticWeb) -> None:
    hops = _follow(_url(web, "redirect_chain"), 20)
    assert [s for s, _ in hops][-1] == 200
    assert len(hops) - 1 == web.spec.redirect_chain_length > 5


def test_short_redirect_ends_on_the_home_page(web: SyntheticWeb) -> None:
    url = _url(web, "redirect_short")
    hops = _follow(url, 10)
    assert [s for s, _ in hops] == [301, 302, 200]
    assert hops[-1][1] == urljoin(url, "/")


def test_calendar_trap_never_ends(web: SyntheticWeb) -> None:
    url = _url(web, "calendar_trap")
    seen = set()
    for _ in range(40):
        r = requests.get(url, timeout=5)
        assert r.status_code == 200
        seen.add(url)
        doc = lxml.html.document_fromstring(r.content)
        url = urljoin(url, doc.xpath("//a[text()='next month']/@href")[0])
    assert len(seen) == 40 and url.endswith("/calendar/2030/3")


def test_malformed_html_is_recoverable(web: SyntheticWeb) -> None:
    body = requests.get(_url(web, "malformed_html"), timeout=5).content
    assert b"\x00" in body and b"\xff" in body
    links = [l for _, _, l, _ in lxml.html.document_fromstring(body).iterlinks()]
    assert "/" in links and CASES["malformed_html"].expected_type == "html"


def test_broken_encodings(web: SyntheticWeb) -> None:
    r = requests.get(_url(web, "bad_utf8"), timeout=5)
    assert r.headers["Content-Type"].endswith("charset=utf-8")
    with pytest.raises(UnicodeDecodeError):
        r.content.decode("utf-8")
    r = requests.get(_url(web, "bogus_charset"), timeout=5)
    assert "x-no-such-charset" in r.headers["Content-Type"]
    with pytest.raises(LookupError):
        codecs.lookup("x-no-such-charset")


def test_gone_page_404_then_410(web: SyntheticWeb, clock: ManualClock) -> None:
    url = _url(web, "gone")
    assert requests.get(url, timeout=5).status_code == 404
    clock.advance(web.spec.gone_after_seconds)
    assert requests.get(url, timeout=5).status_code == 410


def test_busy_page_503_with_retry_after_then_ok(web: SyntheticWeb, clock: ManualClock) -> None:
    url = _url(web, "busy_503")
    r = requests.get(url, timeout=5)
    assert r.status_code == 503 and int(r.headers["Retry-After"]) == web.spec.busy_seconds
    clock.advance(int(r.headers["Retry-After"]))
    assert requests.get(url, timeout=5).status_code == 200


def test_throttled_host_429_unless_retry_after_is_respected(web: SyntheticWeb,
                                                           clock: ManualClock) -> None:
    host = next(h for h in web.model.normal_hosts if h.throttled)
    a, b = (web.url(p) for p in host.pages[:2])
    assert requests.get(web.url_of(host.index, "/robots.txt"), timeout=5).status_code == 200
    assert requests.get(a, timeout=5).status_code == 200
    r = requests.get(b, timeout=5)
    assert r.status_code == 429
    clock.advance(float(r.headers["Retry-After"]))
    assert requests.get(b, timeout=5).status_code == 200


def test_types_lie(web: SyntheticWeb) -> None:
    r = requests.get(_url(web, "xml_as_text"), timeout=5)
    assert r.headers["Content-Type"].startswith("text/plain")
    assert etree.fromstring(r.content).tag == "catalog"
    r = requests.get(_url(web, "html_as_xml"), timeout=5)
    assert r.headers["Content-Type"] == "application/xml"
    with pytest.raises(etree.XMLSyntaxError):
        etree.fromstring(r.content)
    assert lxml.html.document_fromstring(r.content).find(".//a") is not None


def test_silent_host_accepts_and_never_answers(web: SyntheticWeb) -> None:
    u = urlsplit(_url(web, "silent_host"))
    with socket.create_connection((u.hostname, u.port), timeout=1.0) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(1)


def test_refused_port_refuses(web: SyntheticWeb) -> None:
    u = urlsplit(_url(web, "refused_port"))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((u.hostname, u.port), timeout=1.0)
    assert web.expected_outcome(_url(web, "refused_port")) == "connect"


def test_every_hop_of_a_case_maps_back_to_it(web: SyntheticWeb) -> None:
    cal = _url(web, "calendar_trap")
    later = cal.replace("/calendar/2026/11", "/calendar/2031/4")
    assert web.is_trap(later) and web.expected_outcome(later) == "trap"
    chain = _url(web, "redirect_chain").replace("/h/chain/1", "/h/chain/6")
    assert web.hostile_case(chain).name == "redirect_chain"
    assert web.expected_outcome(web.seeds[0]) in (None, "ok", "robots", "http_status")
    plain = web.url(next(p.id for p in web.model.pages
                         if web.model.hosts[p.host].robots in ("rules", "missing")
                         and not web.model.hosts[p.host].throttled))
    assert web.hostile_case(plain) is None and not web.is_trap(plain)
    throttled = next(h for h in web.model.normal_hosts if h.throttled)
    assert web.expected_outcome(web.url(throttled.pages[1])) == "http_status"
    assert web.hostile_case("http://example.org/") is None
