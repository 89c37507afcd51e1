"""Hosts of canonical URLs as browsers read them (xyro/net/urls.py; DESIGN.md §2, §7).

An internationalized host is encoded as browsers and requests encode it (UTS #46,
non-transitional, IDNA2008), not by w3lib's IDNA2003 codec, which names another registered
domain for ß, ς and joiners; an IPv4 address written another way (``127.1``, ``0x7f.0.0.1``)
is its dotted quad, as the WHATWG URL Standard reads it, so one server is one host key, one
politeness slot and one robots.txt."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xyro.net import urls
from xyro.net.urls import (Scope, _already_canonical, _canonicalize_w3lib, canonicalize,
                           host_key, robots_origin)


@pytest.mark.parametrize("raw, expected", [
    ("http://faß.de/", "http://xn--fa-hia.de/"),                 # IDNA2003: fass.de
    ("http://straße.de/a", "http://xn--strae-oqa.de/a"),         # IDNA2003: strasse.de
    ("http://βόλος.com/", "http://xn--nxasmm1c.com/"),           # IDNA2003: xn--nxasmq6b.com
    ("http://FAß.DE./x", "http://xn--fa-hia.de/x"),              # case and trailing dot
    ("https://bücher.de:8443/", "https://xn--bcher-kva.de:8443/"),
    ("http://user:pw@faß.de/?b=1&a=2", "http://xn--fa-hia.de/?a=2&b=1"),
    ("http://my_host.bücher.de/", "http://my_host.xn--bcher-kva.de/"),   # "_" is no IDNA
    ("http://ＡＢＣ.com/", "http://abc.com/"),                     # full-width letters
    ("http://a\u3002b.com/", "http://a.b.com/"),                  # ideographic full stop
    ("http://xn--fa-hia.de/", "http://xn--fa-hia.de/"),
])
def test_an_international_host_is_encoded_as_browsers_encode_it(raw: str, expected: str) -> None:
    assert canonicalize(raw) == expected
    assert canonicalize(expected) == expected


@pytest.mark.parametrize("raw", [
    "http://☃.net/",               # a symbol: IDNA2008 has none (IDNA2003 gave xn--n3h.net)
    "http://a\u200db.com/",        # a joiner where IDNA2008 forbids it (IDNA2003 dropped it)
    "http://-faß.de/",
])
def test_a_host_idna_refuses_is_no_url(raw: str) -> None:
    assert canonicalize(raw) is None


def test_the_scope_spells_a_configured_domain_as_links_spell_it() -> None:
    scope = Scope(allowed_domains=["faß.de", "Straße.de"])
    assert scope.check("http://xn--fa-hia.de/a", 1) is None
    assert scope.check("http://www.xn--strae-oqa.de/a", 1) is None
    assert scope.check("http://fass.de/a", 1) is not None      # another registered domain
    assert Scope(denied_domains=["faß.de"]).host_denied(canonicalize("http://faß.de/"))
    with pytest.raises(ValueError, match="not a valid host name"):
        Scope(allowed_domains=["☃.net"])


#: One address, the spellings a link may use (the WHATWG URL Standard's IPv4 parser).
LOOPBACK_SPELLINGS = [
    "127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.1",
    "017700000001", "0x7f.0.0.1", "0x07f.1", "0x007f.1", "0x0007f.1", "00177.1", "000177.1",
    "127.0.00.1", "127.00.0.1", "0X7F.1", "127.0.0.1.", "１２７.0.0.1",
]


def test_every_spelling_of_an_ipv4_address_is_one_url_and_one_host() -> None:
    urls = {canonicalize(f"http://{spelling}:8080/doc.xml") for spelling in LOOPBACK_SPELLINGS}
    assert urls == {"http://127.0.0.1:8080/doc.xml"}
    assert {host_key(canonicalize(f"http://{s}/")) for s in LOOPBACK_SPELLINGS} == {"127.0.0.1"}
    assert robots_origin(canonicalize("https://0x7f.1/x")) == "https://127.0.0.1"


@pytest.mark.parametrize("spelling", ["127.1", "2130706433", "0x7f.1", "0177.0.0.1", "10.1"])
def test_the_fast_path_leaves_an_address_spelled_otherwise_to_the_general_one(
        spelling: str) -> None:
    url = f"http://{spelling}/a"
    assert _already_canonical(url) is None
    assert canonicalize(url) == f"http://{urls.ipv4_host(spelling)}/a"


@pytest.mark.parametrize("host, address", [
    ("0x7f", "0.0.0.127"), ("4294967295", "255.255.255.255"), ("1.16777215", "1.255.255.255"),
    ("0x", "0.0.0.0"), ("a.b.c1", "a.b.c1"), ("example.com", "example.com"),
    ("1-2.example", "1-2.example"),
])
def test_ipv4_host(host: str, address: str) -> None:
    assert urls.ipv4_host(host) == address


@pytest.mark.parametrize("host", [
    "256.1.1.1", "1.2.3.4.5", "4294967296", "1.16777216", "09.1.1.1", "example.123", "1..2",
    "1_0.0.0.1", "0x1g.1", "foo.0x", "1.+2.3",
])
def test_a_number_that_is_no_ipv4_address_is_no_host(host: str) -> None:
    with pytest.raises(ValueError):
        urls.ipv4_host(host)
    assert canonicalize(f"http://{host}/") is None


def test_a_configured_address_is_spelled_as_canonical_urls_spell_it() -> None:
    scope = Scope(allowed_domains=["0x7f.1"])
    assert scope.check(canonicalize("http://2130706433:81/x"), 1) is None


_PART = st.one_of(st.integers(0, 300).map(str), st.integers(0, 300).map(lambda n: f"0{n:o}"),
                  st.integers(0, 300).map(lambda n: f"0x{n:x}"),
                  st.sampled_from(["", "0x", "08", "a", "1a", "0x1g", "00"]))


@settings(max_examples=1000, deadline=None, database=None)
@given(st.lists(_PART, min_size=1, max_size=5), st.sampled_from(["", ":80", ":8080"]),
       st.sampled_from(["", "/", "/a/b.xml", "/a?x=1"]))
def test_both_paths_agree_on_numeric_hosts(parts: list[str], port: str, path: str) -> None:
    url = f"http://{'.'.join(parts)}{port}{path}"
    canon = canonicalize(url)
    plain = _already_canonical(url)
    if plain is not None:
        assert plain == _canonicalize_w3lib(url, 10_000) == canon
    if canon is not None:
        assert canonicalize(canon) == canon
        host = host_key(canon).partition(":")[0]
        assert urls.ipv4_host(host) == host
