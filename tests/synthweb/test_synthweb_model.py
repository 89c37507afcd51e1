"""The web's structure: determinism, power-law in-links, reachability, PageRank, spec errors."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest

from xyro.synthweb import WebSpec, build_model
from xyro.synthweb.model import WebModel


def _signature(m: WebModel) -> list[object]:
    return [(p.host, p.path, p.kind, p.rate, p.disallowed, p.links) for p in m.pages] + \
        [m.hosts, m.hostile]


def test_same_seed_same_web_other_seed_other_web(spec: WebSpec) -> None:
    assert _signature(build_model(spec)) == _signature(build_model(spec))
    assert _signature(build_model(spec)) != _signature(build_model(replace(spec, seed=12)))


def test_in_degree_has_a_power_law_tail() -> None:
    spec = WebSpec(seed=3, n_hosts=20, n_pages=20000, mean_out_degree=8, hostile=frozenset())
    indeg = build_model(spec).in_degrees()
    # Heavy tail: the top 1% of pages hold far more than 1% of the links.
    top = np.sort(indeg)[::-1]
    assert top[: len(top) // 100].sum() > 0.15 * top.sum()
    # Hill estimator of the tail exponent over the top 500 in-degrees, near the spec's 2.1.
    k = 500
    tail = top[: k + 1].astype(float)
    alpha = k / np.log(tail[:k] / tail[k]).sum()
    assert 1.6 < 1 + alpha < 2.8, f"in-degree tail exponent {1 + alpha:.2f}"
    # And a uniform-target web would not look like that.
    flat = np.random.default_rng(0).poisson(indeg.mean(), size=len(indeg))
    assert np.sort(flat)[::-1][: len(flat) // 100].sum() < 0.05 * flat.sum()


def test_every_allowed_page_is_reachable_through_allowed_pages(spec: WebSpec) -> None:
    m = build_model(spec)
    homes = [h.pages[0] for h in m.normal_hosts]
    seen, todo = set(homes), deque(homes)
    while todo:
        p = m.pages[todo.popleft()]
        for link in p.links:
            t = m.page_at.get((link.host, link.path))
            if t is not None and t not in seen and not m.pages[t].disallowed:
                seen.add(t)
                todo.append(t)
    allowed = {p.id for p in m.pages if not p.disallowed}
    assert allowed <= seen


def test_disallowed_pages_exist_and_are_linked(spec: WebSpec) -> None:
    m = build_model(spec)
    disallowed = {p.id for p in m.pages if p.disallowed}
    assert disallowed, "the test spec must produce disallowed pages"
    linked = {m.page_at.get((l.host, l.path)) for p in m.pages for l in p.links}
    assert disallowed <= linked
    for pid in disallowed:
        page = m.pages[pid]
        assert any(page.path.startswith(pref) for pref in m.hosts[page.host].disallow)


def test_xml_share_and_kinds(spec: WebSpec) -> None:
    m = build_model(replace(spec, n_pages=3000, xml_share=0.4))
    kinds = [p.kind for p in m.pages]
    share = sum(k != "html" for k in kinds) / len(kinds)
    assert 0.34 < share < 0.44
    assert {"xml", "rss", "atom", "html"} <= set(kinds)
    xml_ids = {p.id for p in m.pages if p.kind != "html"}
    src_kinds = {m.pages[s].kind for s, d in zip(*m.edges()) if d in xml_ids}
    assert "html" in src_kinds and "xml" in src_kinds  # XML is linked from both


def test_edges_without_nofollow_leave_out_exactly_the_nofollow_links(spec: WebSpec) -> None:
    m = build_model(replace(spec, n_pages=3000))
    everything = list(zip(*(a.tolist() for a in m.edges())))
    voting = list(zip(*(a.tolist() for a in m.edges(nofollow=False))))
    marked = [(p.id, m.page_at[(l.host, l.path)]) for p in m.pages for l in p.links
              if l.nofollow and (l.host, l.path) in m.page_at]
    assert marked, "the test spec must produce nofollow links"
    assert len(voting) == len(everything) - len(marked)
    assert Counter(everything) - Counter(voting) == Counter(marked)


def test_pagerank_matches_networkx(spec: WebSpec) -> None:
    m = build_model(spec)
    src, dst = m.edges()
    g = nx.DiGraph()
    g.add_nodes_from(range(len(m.pages)))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    ref = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=1000)
    ours = m.pagerank()
    assert abs(ours.sum() - 1) < 1e-9
    assert np.allclose(ours, [ref[i] for i in range(len(m.pages))], atol=1e-8)


def test_link_forms_and_kinds_are_varied(spec: WebSpec) -> None:
    links = [l for p in build_model(replace(spec, n_pages=3000)).pages for l in p.links]
    assert {"relative", "root", "absolute"} <= {l.form for l in links}
    assert {"a", "area", "iframe", "frame", "alternate", "xlink", "rss", "atom"} <= \
        {l.kind for l in links}
    assert any(l.nofollow for l in links)
    assert any(l.host != 0 for l in links)


@pytest.mark.parametrize("change,needle", [
    ({"xml_share": 1.5}, "xml_share"),
    ({"n_pages": 3}, "n_pages"),
    ({"inlink_exponent": 1.0}, "inlink_exponent"),
    ({"hostile": frozenset({"nope"})}, "hostile"),
    ({"n_hosts": 300}, "first_address"),
])
def test_bad_spec_gets_a_clear_error(change: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=f"WebSpec.{needle}"):
        WebSpec(**change)


def test_too_few_hosts_for_host_level_cases_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="n_hosts=2 is too small"):
        build_model(WebSpec(n_hosts=2, n_pages=20))
    assert build_model(WebSpec(n_hosts=1, n_pages=20, hostile=frozenset({"gzip_bomb"})))
