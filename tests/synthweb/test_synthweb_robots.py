"""robots.txt per host (rules, 404, 500 for a while, malformed), Crawl-delay, sitemaps."""

from __future__ import annotations

import protego
import requests

from xyro.clock import ManualClock
from xyro.synthweb import SyntheticWeb, WebSpec
from xyro.synthweb.spec import RobotsRule

UA = "XyroBot/0.1 (+https://example.org/xyro)"


def test_robots_rules_agree_with_ground_truth(web: SyntheticWeb) -> None:
    checked = 0
    for host in web.model.normal_hosts:
        r = requests.get(web.url_of(host.index, "/robots.txt"), timeout=5)
        if host.robots == "missing":
            assert r.status_code == 404
            continue
        if host.robots == "error":
            assert r.status_code == 500
            continue
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
        rp = protego.Protego.parse(r.content.decode("utf-8", "replace"))
        for pid in host.pages:
            url = web.url(pid)
            assert rp.can_fetch(url, UA) == (not web.is_disallowed(url)), url
            checked += 1
        if host.robots == "rules":
            assert not rp.can_fetch(web.url(host.pages[0]), "BadBot")
        delay = rp.crawl_delay(UA)
        expected = host.crawl_delay if host.robots == "rules" else None
        assert delay == expected
    assert checked > 100
    assert web.disallowed_urls() and web.crawl_delays()


def test_disallowed_urls_are_linked_from_allowed_pages(web: SyntheticWeb) -> None:
    bad = set(web.disallowed_urls())
    linking = [p.id for p in web.model.pages if not p.disallowed
               and bad & set(web.out_links(p.id))]
    assert linking, "a crawler ignoring robots.txt must find links into disallowed areas"


def test_malformed_robots_still_yields_its_one_readable_group(web: SyntheticWeb) -> None:
    host = next(h for h in web.model.normal_hosts if h.robots == "malformed")
    body = requests.get(web.url_of(host.index, "/robots.txt"), timeout=5).content
    assert b"\x00" in body and b"\xff" in body and b"<html>" in body
    rp = protego.Protego.parse(body.decode("utf-8", "replace"))
    assert not rp.can_fetch(web.url_of(host.index, "/private/x.html"), UA)
    assert rp.can_fetch(web.url_of(host.index, "/p/1.html"), UA)
    assert web.is_disallowed(web.url_of(host.index, "/private/x.html"))


def test_robots_500_lasts_for_the_configured_window(web: SyntheticWeb,
                                                    clock: ManualClock) -> None:
    host = next(h for h in web.model.normal_hosts if h.robots == "error")
    url = web.url_of(host.index, "/robots.txt")
    assert requests.get(url, timeout=5).status_code == 500
    clock.advance(web.spec.robots_error_seconds + 1)
    after = requests.get(url, timeout=5)
    assert after.status_code == 200 and "User-agent: *" in after.text
    assert web.hostile_hosts()[host.address].expected == "robots"


def test_sitemap_lines_and_sitemaps(web: SyntheticWeb) -> None:
    hosts = [h for h in web.model.normal_hosts if h.sitemap]
    assert hosts
    for host in hosts:
        rp = protego.Protego.parse(
            requests.get(web.url_of(host.index, "/robots.txt"), timeout=5).text)
        (sitemap,) = list(rp.sitemaps)
        r = requests.get(sitemap, timeout=5)
        assert r.status_code == 200
        listed = set(r.text.split("<loc>")[1:])
        allowed = [p for p in host.pages if not web.model.pages[p].disallowed]
        assert len(listed) == len(allowed)
    no_map = [h for h in web.model.normal_hosts if not h.sitemap]
    assert requests.get(web.url_of(no_map[0].index, "/sitemap.xml"), timeout=5
                        ).status_code == 404


def test_explicit_robots_rules_override_the_random_ones() -> None:
    spec = WebSpec(seed=4, n_hosts=4, n_pages=200, hostile=frozenset(),
                   robots_missing_share=0.0, disallowed_page_share=0.3,
                   robots_rules=(RobotsRule(1, ("/tmp/", "/search/"), 3.0),))
    with SyntheticWeb(spec, ManualClock(1e9)) as web:
        text = requests.get(web.url_of(1, "/robots.txt"), timeout=5).text
        assert "Disallow: /tmp/" in text and "Disallow: /search/" in text
        assert "Crawl-delay: 3" in text
        assert web.crawl_delays()[web.host_name(1)] == 3.0
        assert all(u.split("/", 3)[3].startswith(("tmp/", "search/"))
                   for u in web.disallowed_urls(1))
        assert web.disallowed_urls(1)


def test_honest_sitemaps_date_each_change_and_lying_ones_the_generation_time() -> None:
    """Some sitemap hosts tell the truth in <lastmod>, the others stamp "now": the two cases
    a publication-trust check must tell apart."""
    import re
    from datetime import datetime

    spec = WebSpec(seed=5, n_hosts=8, n_pages=400, hostile=frozenset(),
                   robots_missing_share=0.0, sitemap_share=1.0, sitemap_honest_share=0.5,
                   change_rate_mean=1 / 3600.0, static_share=0.0)
    clock = ManualClock(1.7e9)
    with SyntheticWeb(spec, clock) as web:
        clock.advance(5 * 86400.0)   # pages change about every hour: their dates now differ
        now = clock.now()
        kinds = set()
        for host in [h for h in web.model.normal_hosts if h.sitemap]:
            text = requests.get(web.url_of(host.index, "/sitemap.xml"), timeout=5).text
            dates = {loc: datetime.fromisoformat(d.replace("Z", "+00:00")).timestamp()
                     for loc, d in re.findall(r"<loc>([^<]+)</loc><lastmod>([^<]+)</lastmod>",
                                              text)}
            assert len(dates) == sum(1 for p in host.pages if not web.model.pages[p].disallowed)
            if host.sitemap_honest:
                for p in host.pages:
                    if web.url(p) in dates:
                        assert dates[web.url(p)] == int(web.changes.state(p, now)[1])
                assert len(set(dates.values())) > 1
            else:
                assert set(dates.values()) == {int(now)}
            kinds.add(host.sitemap_honest)
        assert kinds == {True, False}
