"""Canonical URLs, host keys, scope rules and trap defences (xyro/net/urls.py)."""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xyro.clock import ManualClock
from xyro.content.html_links import resolve_href
from xyro.net.urls import (Scope, TrapGuard, _already_canonical, _canonicalize_w3lib, canonicalize,
                       host_key, join_plain, plain_directory, robots_origin, robots_url,
                       url_keys)

T0 = 1_700_000_000.0  # the start of the conftest clock


@pytest.mark.parametrize("raw, expected", [
    ("HTTP://Example.COM/a", "http://example.com/a"),                        # case of scheme/host
    ("http://example.com:80/a", "http://example.com/a"),                     # default port
    ("https://example.com:443/", "https://example.com/"),
    ("https://example.com:80/", "https://example.com:80/"),                  # not default for https
    ("http://example.com:8080", "http://example.com:8080/"),                 # empty path → /
    ("http://example.com/a#frag", "http://example.com/a"),                   # fragment dropped
    ("http://example.com/p?z=1&a=2&m=3", "http://example.com/p?a=2&m=3&z=1"),  # query order
    ("http://example.com/svc?wsdl", "http://example.com/svc?wsdl"),          # no "=" added
    ("http://example.com/p?wsdl&b=1&a=", "http://example.com/p?a=&b=1&wsdl"),
    ("http://example.com/p?q=a b&x=%7e%2f", "http://example.com/p?q=a+b&x=~%2F"),
    ("http://example.com/p?", "http://example.com/p"),                       # empty query
    ("http://example.com/%7euser/a%2fb", "http://example.com/~user/a%2Fb"),  # percent-encoding
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/ä?q=ü", "http://example.com/%C3%A4?q=%C3%BC"),
    ("https://bücher.de/", "https://xn--bcher-kva.de/"),                     # IDNA
    ("http://example.com./x", "http://example.com/x"),                       # trailing dot
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),             # dot segments
    ("http://user:secret@example.com/", "http://example.com/"),              # no credentials
    ("http://[::1]:80/x", "http://[::1]/x"),                                 # IPv6
    ("http://127.0.0.1:8001/a", "http://127.0.0.1:8001/a"),
    ("  http://example.com/  ", "http://example.com/"),
])
def test_canonicalize(raw: str, expected: str) -> None:
    assert canonicalize(raw) == expected


@pytest.mark.parametrize("old_key", [
    "http://example.com/p?a=2&m=3&z=1", "http://example.com/svc?wsdl=",
    "http://example.com/p?q=a+b", "http://example.com/p?x=%2Fy&y=%C3%BC",
])
def test_keys_of_the_sorted_canonical_form_stay_keys(old_key: str) -> None:
    # Databases written when a bare parameter got its "=" (w3lib's canonicalize_url) keep
    # their keys: each one canonicalizes to itself, so its row is found again.
    assert canonicalize(old_key) == old_key


@pytest.mark.parametrize("raw, base, expected", [
    ("rel/p", "http://h.org/dir/page.html", "http://h.org/dir/rel/p"),
    ("../up", "http://h.org/a/b/c", "http://h.org/a/up"),
    ("/abs?x=1", "https://h.org:8443/a/b", "https://h.org:8443/abs?x=1"),
    ("//other.org/x", "https://h.org/", "https://other.org/x"),
    ("#top", "http://h.org/page", "http://h.org/page"),
    ("?q=1", "http://h.org/page", "http://h.org/page?q=1"),
])
def test_canonicalize_relative(raw: str, base: str, expected: str) -> None:
    assert canonicalize(raw, base=base) == expected


@pytest.mark.parametrize("raw", [
    "javascript:alert(1)", "mailto:a@example.com", "ftp://example.com/f", "file:///etc/passwd",
    "data:text/html,hi", "tel:+123", "http://", "http:///path", "http://exa mple.com/",
    "http://a..b/", "http://-bad-.com/", "http://example.com:99999/", "http://[::1/",
    "http://example.com:0/", "", "   ", "http://ex%41mple.com/",
    "http://example.com/" + "a" * 3000,                                       # over-long
])
def test_canonicalize_refuses(raw: str) -> None:
    assert canonicalize(raw) is None


@pytest.mark.parametrize("raw, expected", [
    ("http://example.com/a%%41a", "http://example.com/a%25Aa"),
    ("http://example.com/r%%41B.xml", "http://example.com/r%25AB.xml"),
    ("http://example.com/100%", "http://example.com/100%25"),
    ("http://example.com/p?q=%%41", "http://example.com/p?q=%25A"),
])
def test_a_stray_percent_stays_a_literal_percent(raw: str, expected: str) -> None:
    assert canonicalize(raw) == expected
    assert canonicalize(expected) == expected


def test_canonicalize_length_limit_is_after_canonicalization() -> None:
    url = "http://example.com/" + "a" * 100
    assert canonicalize(url, max_length=len(url)) == url
    assert canonicalize(url, max_length=len(url) - 1) is None
    assert canonicalize(None) is None  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(max_size=80), st.sampled_from(["http://h.org/", "https://x.y:81/a/b?c=d"]))
def test_canonicalize_never_raises_and_is_idempotent(raw: str, base: str) -> None:
    canon = canonicalize(raw, base=base)
    if canon is not None:
        assert canonicalize(canon) == canon
        assert canon.startswith(("http://", "https://"))


_LABELS = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_NEAR_PLAIN = st.builds(
    lambda scheme, labels, port, segments: (
        f"{scheme}://{'.'.join(labels)}{port}" + "".join("/" + s for s in segments)),
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    st.lists(_LABELS | st.sampled_from(["-a", "A", "xn--bcher-kva", "0"]), min_size=1, max_size=4),
    st.sampled_from(["", ":80", ":443", ":8080", ":0", ":080", ":65535", ":65536", ":99999"]),
    st.lists(st.text(alphabet="abcXYZ019._~-%/?#:;=&+ä ", max_size=8), max_size=5))


@settings(max_examples=1000, deadline=None)
@given(_NEAR_PLAIN)
def test_fast_path_agrees_with_w3lib(url: str) -> None:
    """URLs taken as already canonical come out of the general (w3lib) path unchanged."""
    plain = _already_canonical(url)
    if plain is not None:
        assert plain == _canonicalize_w3lib(url, 10_000)


@pytest.mark.parametrize("url", [
    "http://example.com/a/b.html", "https://x.y:8443/~u/a-b_c.xml", "http://127.0.0.1:8001/p",
    "http://h.org"])
def test_fast_path_takes_plain_urls(url: str) -> None:
    assert _already_canonical(url) is not None


_PLAIN_BASES = st.builds(
    lambda scheme, port, segments: f"{scheme}://h.org{port}/" + "/".join(segments),
    st.sampled_from(["http", "https"]), st.sampled_from(["", ":8080"]),
    st.lists(st.text(alphabet="ab0._~-", max_size=5), max_size=4))


@settings(max_examples=1000, deadline=None)
@given(_PLAIN_BASES | _NEAR_PLAIN,
       st.text(alphabet="ab._/", max_size=8) | st.text(alphabet="ab0._~-/%?#:ä ", max_size=10))
def test_join_plain_agrees_with_resolve_and_canonicalize(base: str, href: str) -> None:
    """The concatenation shortcut gives what resolving and canonicalizing give."""
    directory = plain_directory(base)
    if directory is None:
        return
    joined = join_plain(directory, href)
    if joined is not None:
        assert joined == canonicalize(resolve_href(base, href))


@pytest.mark.parametrize("base, href, expected", [
    ("http://h.org/docs/a.xml", "b.xml", "http://h.org/docs/b.xml"),
    ("http://h.org/docs/", "sub/c-d_e~f.xml", "http://h.org/docs/sub/c-d_e~f.xml"),
    ("http://h.org:8080/a", "x//y", "http://h.org:8080/x//y"),
])
def test_join_plain_takes_plain_relative_paths(base: str, href: str, expected: str) -> None:
    directory = plain_directory(base)
    assert directory is not None and join_plain(directory, href) == expected


@pytest.mark.parametrize("href", ["../b.xml", "./b.xml", "a/./b", ".b", "/abs.xml", "b.xml?q=1",
                                  "b.xml#f", "http://x.org/", " b.xml", "b c.xml", "ä.xml", ""])
def test_join_plain_leaves_the_rest_to_the_general_path(href: str) -> None:
    assert join_plain("http://h.org/docs/", href) is None


def test_plain_directory_needs_a_canonical_base() -> None:
    assert plain_directory("http://h.org/a/b.xml") == "http://h.org/a/"
    assert plain_directory("HTTP://h.org/a") is None
    assert plain_directory("http://h.org/a?q") is None
    assert plain_directory("http://h.org") is None  # canonical form differs ("/" added)


def test_host_key_and_robots_origin() -> None:
    assert host_key("http://Example.com:80/x") == "example.com"
    assert host_key("https://example.com/x") == "example.com"      # one server, one budget
    assert host_key("https://example.com:8443/") == "example.com:8443"
    assert host_key("http://[::1]:81/") == "[::1]:81"
    assert robots_origin("https://Example.com:443/a?b") == "https://example.com"
    assert robots_origin("http://example.com:8080/a") == "http://example.com:8080"
    assert robots_url(robots_origin("http://h:81/x")) == "http://h:81/robots.txt"
    assert url_keys("https://H.org:8443/a") == ("h.org:8443", "https://h.org:8443")
    with pytest.raises(ValueError, match="not an http"):
        host_key("mailto:x@y")


def test_scope_seeds_hosts_and_subdomains() -> None:
    scope = Scope(seeds=["http://www.example.com/start"])
    assert scope.check("http://www.example.com/a", 1) is None
    assert scope.check("http://blog.www.example.com/a", 1) is None            # subdomain
    assert "outside the allowed domains" in scope.check("http://example.com/", 1)
    assert "outside the allowed domains" in scope.check("http://badexample.com/", 1)
    assert "outside the allowed domains" in scope.check("http://www.example.com.evil.org/", 1)


def test_a_found_seed_adds_its_host_exactly() -> None:
    # Where a seed redirected (a remote server's choice): that host, never its subdomains,
    # so a redirect to a bare suffix or a platform does not open every site under it.
    scope = Scope(seeds=["http://old.example/"], found=["http://com/", "http://new.example/"])
    assert scope.check("http://com/x", 1) is None
    assert "outside the allowed domains" in scope.check("http://shop.com/", 1)
    assert scope.check("http://new.example/a", 1) is None
    assert "outside the allowed domains" in scope.check("http://blog.new.example/", 1)
    scope.add_found(["http://moved.example/"])
    assert scope.check("http://moved.example/", 1) is None
    assert scope.check("http://www.moved.example/", 1) is not None
    assert scope.is_seed("http://moved.example/")


def test_an_ipv6_seed_allows_its_own_pages() -> None:
    scope = Scope(seeds=["http://[::1]:8080/"])
    assert scope.check("http://[::1]:8080/a", 1) is None
    scope.add_found(["http://[::2]/"])
    assert scope.check("http://[::2]/b", 1) is None


def test_seeds_added_from_two_threads_at_once_are_all_kept() -> None:
    # The dispatcher (a seed's redirect) and the daemon's seeds job add seeds concurrently.
    scope = Scope(seeds=["http://start.example/"])
    sys.setswitchinterval(1e-6)   # switch threads as often as possible
    try:
        threads = [threading.Thread(target=lambda k=k: [
            scope.add_seeds([f"http://h{k}-{i}.example/"]) for i in range(1000)])
            for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(0.005)
    lost = [f"h{k}-{i}" for k in range(2) for i in range(1000)
            if scope.check(f"http://h{k}-{i}.example/", 1) is not None]
    assert lost == []


def test_scope_allowed_denied_patterns_depth() -> None:
    scope = Scope(seeds=["http://a.org/"], allowed_domains=["example.org", "Bücher.DE"],
                  denied_domains=["private.example.org"], allow_patterns=[r"\.(xml|html)$", r"/$"],
                  deny_patterns=[r"/logout"], max_depth=3)
    assert scope.check("http://example.org/", 0) is None
    assert scope.check("http://x.example.org/doc.xml", 3) is None
    assert scope.check("https://xn--bcher-kva.de/a.html", 1) is None
    assert "outside" in scope.check("http://a.org/", 0)                       # seeds ignored now
    assert "denied domain" in scope.check("http://private.example.org/a.xml", 1)
    assert "denied domain" in scope.check("http://deep.private.example.org/a.xml", 1)
    assert "deny pattern" in scope.check("http://example.org/logout/x.html", 1)
    assert "no allow pattern" in scope.check("http://example.org/img.png", 1)
    assert "depth 4 exceeds" in scope.check("http://example.org/", 4)
    assert scope.check("mailto:a@b", 0) == "not an http(s) URL with a host"


def test_scope_bad_configuration_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"deny pattern '\(' is not a valid regular expression"):
        Scope(allowed_domains=["a.org"], deny_patterns=["("])
    with pytest.raises(ValueError, match="seed 'ftp://x/' is not a crawlable"):
        Scope(seeds=["ftp://x/"])
    with pytest.raises(ValueError, match="max_depth must be >= 0"):
        Scope(allowed_domains=["a.org"], max_depth=-1)
    with pytest.raises(ValueError, match="empty domain"):
        Scope(allowed_domains=["."])


@pytest.fixture
def guard(clock: ManualClock) -> TrapGuard:
    return TrapGuard(clock, max_url_length=200, max_repeated_segments=2, max_query_params=5,
                     max_pages_per_host_per_unit=3, unit_s=3600)


@pytest.mark.parametrize("url, reason", [
    ("http://h/a/b/a/b/a/b/", "block 'a/b' repeats"),
    ("http://h/x/x/x", "block 'x' repeats"),
    ("http://h/p/q/r/s/p/q/r/s/p/q/r/s/end", "block 'p/q/r/s' repeats"),
    ("http://h/" + "/".join(f"s{i}" for i in range(40)), "more than 32 segments"),
    ("http://h/?a=1&b=2&c=3&d=4&e=5&f=6", "6 parameters"),
    ("http://h/?a=1&a=1&a=1&a=1&a=1&a=1", "6 parameters"),
    ("http://h/calendar/2031/01/", "year 2031"),
    ("http://h/calendar/1977-12", "year 1977"),
    ("http://h/cal?year=2100&month=1", "year 2100"),
    ("http://h/" + "z" * 250, "longer than 200"),
])
def test_trap_refusals(guard: TrapGuard, url: str, reason: str) -> None:
    assert reason in guard.check(url)


@pytest.mark.parametrize("url", [
    "http://h/a/b/a/b/", "http://h/docs/2.7/docs/", "http://h/blog/2023/11/post",
    "http://h/cal?year=2024&month=5", "http://h/?a=1&b=2&c=3&d=4&e=5", "http://h/item/12345-6",
])
def test_trap_accepts_normal_urls(clock: ManualClock, url: str) -> None:
    assert TrapGuard(clock, max_query_params=5).check(url) is None


def test_trap_per_host_budget_resets_each_unit(clock: ManualClock, guard: TrapGuard) -> None:
    clock.set((T0 // 3600 + 1) * 3600)  # start of a unit
    assert [guard.check(f"http://h/{i}") for i in range(3)] == [None] * 3
    assert "reached 3 pages" in guard.check("http://h/3")
    assert guard.check("http://other:81/0") is None                # other host, own budget
    assert guard.check("http://h/4", count=False) is not None
    clock.advance(3599)
    assert "reached 3 pages" in guard.check("http://h/5")
    clock.advance(1)                                                 # next unit
    assert guard.check("http://h/6") is None


def test_trap_budget_is_not_spent_by_refused_shapes(guard: TrapGuard) -> None:
    for _ in range(10):
        assert guard.check("http://h/x/x/x") is not None
    assert guard.check("http://h/fine") is None


def test_trap_bad_configuration(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="max_query_params must be >= 1"):
        TrapGuard(clock, max_query_params=0)
    with pytest.raises(ValueError, match="unit_s must be > 0"):
        TrapGuard(clock, unit_s=0)
