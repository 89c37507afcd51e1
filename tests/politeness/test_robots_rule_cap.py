"""The Allow/Disallow lines a robots.txt may make this crawler match (xyro/net/robots.py):
the first MAX_ROBOTS_RULES of each user agent, so one verdict, taken under the robots cache's
one lock for every worker, stays in milliseconds whatever the site writes (a 500 KiB file
of wildcard rules took two seconds a URL)."""

from __future__ import annotations

import logging
import time

import pytest

from xyro.clock import ManualClock
from xyro.net.robots import MAX_ROBOTS_BYTES, MAX_ROBOTS_RULES, RobotsCache

O = "http://h.example"
#: A URL each wildcard rule scans to its end: long, with eight query parameters.
LONG_URL = O + "/" + "abcdefghijk" * 150 + "?" + "&".join(f"p{n}=abcdefghijk" for n in range(8))


def _wildcard_body(group: str = "User-agent: *", size: int = MAX_ROBOTS_BYTES - 64) -> bytes:
    """``size`` bytes of 11-wildcard rules no URL of the test matches (13,000 in 500 KiB)."""
    lines, i = [group.encode()], 0
    while sum(map(len, lines)) < size:
        lines.append(b"Disallow: /*a*b*c*d*e*f*g*h*i*j*k*" + str(i).encode() + b"$")
        i += 1
    return b"\n".join(lines) + b"\n"


CLOCK = ManualClock()   # never advanced: every entry stays fresh


def _cache(max_rules: int = MAX_ROBOTS_RULES) -> RobotsCache:
    return RobotsCache("XyroBot", CLOCK, max_rules=max_rules)


def _store(robots: RobotsCache, body: bytes) -> None:
    robots.store(O, 200, body, CLOCK.now())


@pytest.fixture
def robots() -> RobotsCache:
    return _cache()


def test_a_verdict_against_a_robots_txt_full_of_wildcard_rules_takes_milliseconds(
        robots: RobotsCache, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="xyro.net.robots"):
        _store(robots, _wildcard_body())
    assert robots.verdict(LONG_URL) == "allowed"   # the first call builds protego's index
    t0 = time.process_time()
    for _ in range(5):
        assert robots.verdict(LONG_URL) == "allowed"
    per_verdict = (time.process_time() - t0) / 5
    # 1,000 such rules: about 50 ms here; all 12,700 of the file took 0.8 s.
    assert per_verdict < 0.2, f"{per_verdict * 1000:.0f} ms for one verdict"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and O in warnings[0] and str(MAX_ROBOTS_RULES) in warnings[0]


def test_the_first_rules_of_a_group_hold_and_those_past_the_cap_are_ignored() -> None:
    robots = _cache(max_rules=3)
    _store(robots, b"User-agent: *\nDisallow: /a\nDisallow: /b\nAllow: /b/open\n"
                         b"Disallow: /c\nDisallow: /d\n")
    assert robots.verdict(O + "/a/1") == robots.verdict(O + "/b/1") == "disallowed"
    assert robots.verdict(O + "/b/open/1") == "allowed"
    assert robots.verdict(O + "/c/1") == robots.verdict(O + "/d/1") == "allowed"


def test_groups_repeated_for_one_agent_share_its_cap() -> None:
    # protego merges the groups of one user agent: a cap per group would not bound them.
    robots = _cache(max_rules=2)
    body = b"".join(b"User-agent: *\nDisallow: /%d\n\n" % i for i in range(5))
    _store(robots, body)
    assert [robots.verdict(f"{O}/{i}") for i in range(5)] == \
        ["disallowed"] * 2 + ["allowed"] * 3


def test_a_group_past_the_cap_still_ends_where_the_next_one_starts() -> None:
    # The lines past the cap become empty Disallow lines, not nothing: without them the
    # User-agent lines of the next group would join this one, and its rules apply to us.
    robots = _cache(max_rules=1)
    _store(robots, b"User-agent: *\nDisallow: /a\nDisallow: /b\n"
                         b"User-agent: OtherBot\nDisallow: /\n")
    assert robots.verdict(O + "/a") == "disallowed"
    assert robots.verdict(O + "/b") == robots.verdict(O + "/z") == "allowed"


def test_our_own_group_keeps_its_rules_after_a_long_group_for_every_agent() -> None:
    robots = _cache(max_rules=2)
    _store(robots, b"User-agent: *\nDisallow: /1\nDisallow: /2\nDisallow: /3\n\n"
                         b"User-agent: XyroBot\nDisallow: /mine\n")
    assert robots.verdict(O + "/mine") == "disallowed"
    assert robots.verdict(O + "/1") == "allowed"   # our group alone applies (RFC 9309 §2.2.1)


def test_rules_for_other_crawlers_are_dropped_without_a_warning(
        robots: RobotsCache, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="xyro.net.robots"):
        _store(robots, _wildcard_body("User-agent: OtherBot", 100_000) +
               b"User-agent: *\nDisallow: /private\n")
    assert robots.verdict(O + "/private/x") == "disallowed"
    assert robots.verdict(O + "/open") == "allowed"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("line", [
    b"Disallow /x", b"DISALLOW : /x", b"disalow: /x", b"Disallow:/x", b"Disallow:\t/x"])
def test_every_spelling_protego_reads_as_a_rule_counts(line: bytes) -> None:
    robots = _cache(max_rules=1)
    _store(robots, b"User-agent: *\nDisallow: /first\n" + line + b"\n")
    assert robots.verdict(O + "/first") == "disallowed"
    assert robots.verdict(O + "/x") == "allowed"


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_rules"):
        RobotsCache("XyroBot", ManualClock(), max_rules=0)
