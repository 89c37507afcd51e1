"""robots.txt cache (xyro/net/robots.py): RFC 9309 statuses, TTL, Crawl-delay, Sitemaps, bad bodies."""

from __future__ import annotations

import os

import pytest

from xyro.clock import ManualClock
from xyro.net.robots import MAX_ROBOTS_BYTES, RobotsCache, query_orders
from xyro.net.urls import canonicalize

O = "http://h.example"
BODY = b"""# comment
User-agent: xyrobot
Disallow: /private
Allow: /private/open
Crawl-delay: 5
Sitemap: http://h.example/sitemap.xml
Sitemap: /relative-sitemap.xml
Sitemap: javascript:alert(1)

User-agent: *
Disallow: /
"""


@pytest.mark.parametrize("line, ours", [
    ("User-agent: Xy", False),             # a prefix of the token names another crawler
    ("User-agent: xyrob", False),
    ("User-agent: XyroBot-News", False),   # a longer token too
    ("User-agent: XyroBot/2.1", True),     # a version after the token still names us
    ("User-agent: XYROBOT  # us", True),
    ("User-agent: MyXyroBot", False),
])
def test_a_group_applies_to_the_whole_product_token_only(clock: ManualClock, line: str,
                                                         ours: bool) -> None:
    # RFC 9309 §2.2.1: the product token is matched case-insensitively, as a whole (as
    # Google's parser reads it: the name before any "/version").
    robots = RobotsCache("XyroBot", clock)
    robots.store(O, 200, f"{line}\nDisallow: /\n\nUser-agent: *\nAllow: /\n".encode(),
                 clock.now())
    assert robots.allowed(O + "/page") is not ours, line


def test_unknown_origin_needs_fetch_and_nothing_is_allowed(robots: RobotsCache) -> None:
    assert robots.state(O).kind == "needs_fetch"
    assert robots.verdict(O + "/a") == "unknown"
    assert robots.allowed(O + "/a") is False
    assert robots.allowed(O + "/robots.txt") is True      # robots.txt itself is always fetchable


def test_rules_for_our_token_case_insensitive(robots: RobotsCache, clock: ManualClock) -> None:
    st = robots.store(O, 200, BODY, clock.now())
    assert st.kind == "allowed" and st.rules is not None
    assert robots.allowed(O + "/public")
    assert not robots.allowed(O + "/private/x")
    assert robots.allowed(O + "/private/open/y")           # longest match wins (RFC 9309 §2.2.2)
    other = RobotsCache("OtherBot", clock)
    other.store(O, 200, BODY, clock.now())
    assert not other.allowed(O + "/public")                # the * group: disallow all
    upper = RobotsCache("XYROBOT", clock)
    upper.store(O, 200, BODY, clock.now())
    assert upper.allowed(O + "/public") and not upper.allowed(O + "/private/x")


def test_crawl_delay_capped_and_sitemaps(robots: RobotsCache, clock: ManualClock) -> None:
    robots.store(O, 200, BODY, clock.now())
    assert robots.crawl_delay(O) == 5.0
    assert robots.sitemaps(O) == ["http://h.example/sitemap.xml", "http://h.example/relative-sitemap.xml"]
    robots.store(O, 200, b"User-agent: *\nCrawl-delay: 86400\n", clock.now())
    assert robots.crawl_delay(O) == 30.0                   # capped by max_crawl_delay_s
    robots.store(O, 200, b"User-agent: *\nRequest-rate: 1/20s\n", clock.now())
    assert robots.crawl_delay(O) == 20.0
    for bad in [b"-3", b"nan", b"inf", b"soon"]:
        robots.store(O, 200, b"User-agent: *\nCrawl-delay: " + bad + b"\n", clock.now())
        assert robots.crawl_delay(O) == 0.0
    assert robots.crawl_delay("http://never.seen") == 0.0 and robots.sitemaps("http://never.seen") == []


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 301])
def test_unavailable_means_allow_all(robots: RobotsCache, clock: ManualClock, status: int) -> None:
    st = robots.store(O, status, b"<html>not found</html>", clock.now())
    assert st.kind == "allowed" and st.rules is None
    assert robots.allowed(O + "/anything/at/all")


@pytest.mark.parametrize("status", [500, 502, 503, 429, None, 600, 100])
def test_unreachable_disallows_all_then_retries(robots: RobotsCache, clock: ManualClock,
                                                status: int | None) -> None:
    st = robots.store(O, status, None, clock.now())
    assert st.kind == "disallow_all" and st.until == clock.now() + 600
    assert not robots.allowed(O + "/")
    assert robots.verdict(O + "/") == "disallowed"
    clock.advance(599)
    assert robots.state(O).kind == "disallow_all"
    clock.advance(1)
    assert robots.state(O).kind == "needs_fetch"           # fetch robots.txt again
    robots.store(O, 200, b"User-agent: *\nDisallow: /x\n", clock.now())
    assert robots.allowed(O + "/y") and not robots.allowed(O + "/x")


def test_ttl_expiry(robots: RobotsCache, clock: ManualClock) -> None:
    robots.store(O, 200, BODY, clock.now())
    clock.advance(3599)
    assert robots.state(O).kind == "allowed"
    clock.advance(1)
    assert robots.state(O).kind == "needs_fetch"
    assert robots.verdict(O + "/public") == "unknown"


def test_origins_are_separate_per_scheme_and_port(robots: RobotsCache, clock: ManualClock) -> None:
    robots.store("http://h.example", 200, b"User-agent: *\nDisallow: /\n", clock.now())
    assert not robots.allowed("http://h.example/a")
    assert robots.verdict("https://h.example/a") == "unknown"
    assert robots.verdict("http://h.example:8080/a") == "unknown"


def test_garbage_bodies_do_not_crash(robots: RobotsCache, clock: ManualClock) -> None:
    rng_bytes = os.urandom(64 * 1024)
    for body in [rng_bytes, b"\x00" * 5000, b"\xff\xfe" + "User-agent: *".encode("utf-16-le"),
                 b"<html><body>Disallow: maybe</body></html>", b"", b"User-agent\nDisallow\n:::\n"]:
        st = robots.store(O, 200, body, clock.now())
        assert st.kind == "allowed"
        robots.allowed(O + "/a")                             # answers, whatever it is
        robots.crawl_delay(O), robots.sitemaps(O)


def test_huge_body_is_capped_at_500_kib(robots: RobotsCache, clock: ManualClock) -> None:
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * 98 + b"\n"
    body = head + filler * (MAX_ROBOTS_BYTES // len(filler) + 10) + b"User-agent: *\nDisallow: /late\n"
    body += b"Disallow: /more\n" * 500_000                   # ~8 MB in all
    assert len(body) > 8_000_000
    robots.store(O, 200, body, clock.now())
    assert not robots.allowed(O + "/early/a")
    assert robots.allowed(O + "/late/a")                   # beyond 500 KiB: ignored
    assert robots.allowed(O + "/more")


def test_bom_is_ignored(robots: RobotsCache, clock: ManualClock) -> None:
    robots.store(O, 200, b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n", clock.now())
    assert not robots.allowed(O + "/x")


def test_lru_bound_on_entries(clock: ManualClock) -> None:
    cache = RobotsCache("XyroBot", clock, max_entries=3)
    for i in range(5):
        cache.store(f"http://h{i}", 404, None, clock.now())
    assert len(cache) == 3
    assert cache.state("http://h0").kind == "needs_fetch"
    assert cache.state("http://h4").kind == "allowed"


@pytest.mark.parametrize("kwargs, match", [
    ({"user_agent_token": "Xyro Bot"}, "one product token"),
    ({"user_agent_token": "XyroBot/1.0"}, "one product token"),
    ({"user_agent_token": "XyroBot", "ttl_s": 90_000}, "ttl_s must be in"),
    ({"user_agent_token": "XyroBot", "unreachable_retry_s": 0}, "unreachable_retry_s"),
])
def test_bad_configuration(clock: ManualClock, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RobotsCache(clock=clock, **kwargs)


def test_query_orders_move_each_parameter_first() -> None:
    assert query_orders("http://h/p") == ["http://h/p"]
    assert query_orders("http://h/?a=1&b=2&c") == [
        "http://h/?a=1&b=2&c", "http://h/?b=2&a=1&c", "http://h/?c&a=1&b=2"]
    assert len(query_orders("http://h/?" + "&".join(f"k{i}=1" for i in range(50)))) == 8


def test_query_rules_hold_after_canonical_sorting(robots: RobotsCache,
                                                  clock: ManualClock) -> None:
    robots.store(O, 200, b"User-agent: *\nDisallow: /?s=\nDisallow: /search?q=\n",
                 clock.now())
    for link in ("/?s=shoes&post_type=product", "/search?q=x&page=2"):
        url = canonicalize(link, base=O + "/")
        assert url is not None and "?s=" not in url and "?q=" not in url  # sorted away
        assert robots.verdict(url) == "disallowed", url
    assert robots.allowed(canonicalize("/?post_type=product&page=2", base=O + "/"))
    assert robots.allowed(O + "/search")
    assert robots.state(O).query_rules
    robots.store(O, 200, b"User-agent: *\nDisallow: /private/\n", clock.now())
    assert not robots.state(O).query_rules  # one check per URL: no order matters here
    assert robots.allowed(O + "/?a=1&b=2") and not robots.allowed(O + "/private/x?b=1&a=2")
