"""The synthetic web's structure and ground truth: hosts, pages, links, rates, PageRank.

Built once from a :class:`WebSpec` and its seed (numpy ``default_rng``), with no sockets:
URLs need ports, so the model speaks in (host index, path) and :class:`SyntheticWeb` turns
them into URLs once the servers are bound.

In-links follow a power law by Zipf-weighted target sampling: page of popularity rank r
is chosen with probability ~ r^-a, which gives P(in-degree = k) ~ k^-(1 + 1/a); so
a = 1 / (gamma - 1) for the spec's ``inlink_exponent`` gamma.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from xyro.synthweb.hostile import CASES, HOST_LEVEL
from xyro.synthweb.spec import RobotsRule, WebSpec

DISALLOW_DIRS = ("/private/", "/tmp/", "/cgi-bin/", "/search/")
FEED_KINDS = ("rss", "atom")


@dataclass(frozen=True, slots=True)
class Link:
    """One link as written in a page body, in document order."""

    host: int          # host index of the target
    path: str          # target path on that host
    kind: str          # a, area, frame, iframe, alternate, xlink, rss, atom
    nofollow: bool
    form: str          # relative, root, absolute (how the href is written)


@dataclass(frozen=True, slots=True)
class Page:
    id: int
    host: int
    path: str
    kind: str          # html, xml, rss, atom
    rate: float        # changes per clock second (Poisson)
    disallowed: bool
    links: tuple[Link, ...]
    base_dir: str | None = None   # HTML <base href> directory, when the page has one
    doctype: bool = False          # XML: <!DOCTYPE catalog SYSTEM ...dtd>
    stylesheet: bool = False       # XML: <?xml-stylesheet?> PI


@dataclass(frozen=True, slots=True)
class Host:
    index: int
    address: str                   # 127.0.0.N
    role: str                      # normal, silent, refused
    robots: str                    # rules, missing (404), error (500), malformed
    disallow: tuple[str, ...]
    crawl_delay: float | None
    reliable_last_modified: bool
    etag: bool
    sitemap: bool
    throttled: bool
    pages: tuple[int, ...]         # page ids, home page first
    sitemap_honest: bool = False   # <lastmod> = true last change (else: generation time)


@dataclass(frozen=True, slots=True)
class HostilePlacement:
    name: str
    host: int
    path: str                      # entry path (linked from ``source`` page)
    source: int                    # page id of the page linking to it


class WebModel:
    """Hosts, pages and links of one synthetic web, with ground-truth queries."""

    def __init__(self, spec: WebSpec, hosts: tuple[Host, ...], pages: tuple[Page, ...],
                 hostile: tuple[HostilePlacement, ...]) -> None:
        self.spec = spec
        self.hosts = hosts
        self.pages = pages
        self.hostile = hostile
        self.page_at: dict[tuple[int, str], int] = {(p.host, p.path): p.id for p in pages}

    @property
    def normal_hosts(self) -> tuple[Host, ...]:
        return tuple(h for h in self.hosts if h.role == "normal")

    def host_of_role(self, role: str) -> Host | None:
        return next((h for h in self.hosts if h.role == role), None)

    def edges(self, nofollow: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) page-id arrays of page-to-page links (hostile targets excluded).

        ``nofollow=False`` leaves out the links marked rel=nofollow: not endorsements, they
        cast no vote in a ranking (and a crawler that honours them never stores them)."""
        src, dst = [], []
        for p in self.pages:
            for link in p.links:
                t = self.page_at.get((link.host, link.path))
                if t is not None and (nofollow or not link.nofollow):
                    src.append(p.id)
                    dst.append(t)
        return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)

    def in_degrees(self) -> np.ndarray:
        _, dst = self.edges()
        return np.bincount(dst, minlength=len(self.pages))

    def pagerank(self, damping: float = 0.85, tol: float = 1e-12,
                 max_iter: int = 1000) -> np.ndarray:
        """PageRank of the page graph by power iteration (Brin & Page 1998).

        x' = d * (M x + (dangling mass) / n) + (1 - d) / n, with M column-stochastic over
        distinct out-links; dangling pages spread their rank uniformly. Sums to 1.
        """
        n = len(self.pages)
        src, dst = self.edges()
        adj = sp.coo_matrix((np.ones(len(src)), (dst, src)), shape=(n, n)).tocsr()
        adj.data[:] = 1.0  # duplicate links count once
        out = np.asarray(adj.sum(axis=0)).ravel()
        dangling = out == 0
        inv = np.where(dangling, 0.0, 1.0 / np.maximum(out, 1))
        m = adj @ sp.diags(inv)
        x = np.full(n, 1.0 / n)
        for _ in range(max_iter):
            nxt = damping * (m @ x + x[dangling].sum() / n) + (1.0 - damping) / n
            if np.abs(nxt - x).sum() < tol:
                return nxt / nxt.sum()
            x = nxt
        return x / x.sum()


def is_disallowed(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path.startswith(p) for p in prefixes)


def build_model(spec: WebSpec) -> WebModel:
    """The whole web structure, deterministic from ``spec`` (and its seed)."""
    rng = np.random.default_rng([spec.seed, 0x5EB])
    hosts = _host_attrs(spec, rng)
    sizes = _host_sizes(spec, rng)
    page_host = np.repeat(np.arange(spec.n_hosts), sizes)
    kinds = _page_kinds(spec, rng, sizes)
    rates = _rates(spec, rng)
    disallowed = _disallowed_flags(spec, rng, hosts, sizes)
    paths = _paths(spec, rng, hosts, page_host, kinds, disallowed)
    links = _links(spec, rng, page_host, kinds, disallowed, sizes)
    link_objs = _link_objects(spec, rng, links, page_host, paths, kinds)
    hostile, extra = _place_hostile(spec, rng, hosts, page_host, kinds, disallowed)
    for pid, link in extra:
        link_objs[pid].append(link)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    pages = []
    base_draw = rng.random(spec.n_pages)
    xml_draw = rng.random((spec.n_pages, 2))
    for i in range(spec.n_pages):
        d = paths[i].rsplit("/", 1)[0] + "/"
        base = None
        if kinds[i] == "html" and base_draw[i] < 0.04 and i != starts[page_host[i]]:
            base = "/x/" if d != "/x/" else "/p/"
        pages.append(Page(id=i, host=int(page_host[i]), path=paths[i], kind=kinds[i],
                          rate=float(rates[i]), disallowed=bool(disallowed[i]),
                          links=tuple(link_objs[i]), base_dir=base,
                          doctype=kinds[i] == "xml" and xml_draw[i, 0] < 0.5,
                          stylesheet=kinds[i] == "xml" and xml_draw[i, 1] < 0.3))
    full_hosts = tuple(
        _with_pages(h, tuple(range(int(starts[h.index]), int(starts[h.index + 1]))))
        if h.role == "normal" else h for h in hosts)
    return WebModel(spec, full_hosts, tuple(pages), tuple(hostile))


def _with_pages(h: Host, pages: tuple[int, ...]) -> Host:
    return replace(h, pages=pages)


def _host_attrs(spec: WebSpec, rng: np.random.Generator) -> list[Host]:
    n = spec.n_hosts
    need = spec.host_roles_needed
    if need and n < need + 1:
        raise ValueError(f"WebSpec.n_hosts={n} is too small for the host-level hostile cases "
                         f"{sorted(spec.hostile & HOST_LEVEL)}: need at least {need + 1} "
                         f"(host 0 stays plain); raise n_hosts or drop those cases")
    special = list(rng.permutation(np.arange(1, n))[:need]) if n > 1 else []
    role_of: dict[int, str] = {}
    for kind in ("robots_500", "robots_malformed", "throttled_host"):
        if kind in spec.hostile:
            role_of[int(special.pop(0))] = kind
    overrides = {r.host: r for r in spec.robots_rules}
    draws = rng.random((n, 6))
    # A stream of its own, so that webs built before sitemaps had <lastmod> stay the same.
    honest_draws = np.random.default_rng([spec.seed, 0x5173]).random(n)
    hosts = []
    for i in range(n):
        robots = "rules"
        if role_of.get(i) == "robots_500":
            robots = "error"
        elif role_of.get(i) == "robots_malformed":
            robots = "malformed"
        elif i != 0 and draws[i, 0] < spec.robots_missing_share and i not in overrides:
            robots = "missing"
        rule = overrides.get(i) or _random_rule(spec, rng, i, draws[i])
        if robots == "malformed":
            # The one group a parser can read in the malformed file (see content.py).
            rule = RobotsRule(i, ("/private/",), None)
        if robots in ("missing", "error"):
            rule = RobotsRule(i, (), None)
        hosts.append(Host(
            index=i, address=f"127.0.0.{spec.first_address + i}", role="normal",
            robots=robots, disallow=rule.disallow, crawl_delay=rule.crawl_delay,
            reliable_last_modified=bool(draws[i, 3] < spec.reliable_lm_share),
            etag=bool(draws[i, 4] < spec.etag_share),
            sitemap=bool(draws[i, 5] < spec.sitemap_share) and robots == "rules",
            throttled=role_of.get(i) == "throttled_host", pages=(),
            sitemap_honest=bool(honest_draws[i] < spec.sitemap_honest_share)))
    for j, role in enumerate(("silent", "refused")):
        idx = n + j
        hosts.append(Host(idx, f"127.0.0.{spec.first_address + idx}", role, "missing", (),
                          None, False, False, False, False, ()))
    return hosts


def _random_rule(spec: WebSpec, rng: np.random.Generator, i: int,
                 draw: np.ndarray) -> RobotsRule:
    disallow: tuple[str, ...] = ()
    if draw[1] < spec.disallow_share:
        k = 1 + int(rng.integers(0, 2))
        disallow = tuple(sorted(rng.choice(DISALLOW_DIRS, size=k, replace=False).tolist()))
    delay = None
    if draw[2] < spec.crawl_delay_share:
        delay = float(spec.crawl_delays[int(rng.integers(0, len(spec.crawl_delays)))])
    return RobotsRule(i, disallow, delay)


def _host_sizes(spec: WebSpec, rng: np.random.Generator) -> np.ndarray:
    """Pages per host: mildly skewed (weight ~ rank^-0.6), at least 1 (the home page)."""
    n, total = spec.n_hosts, spec.n_pages
    w = (np.arange(1, n + 1) ** -0.6)[rng.permutation(n)]
    extra = rng.multinomial(total - n, w / w.sum())
    return extra + 1


def _page_kinds(spec: WebSpec, rng: np.random.Generator, sizes: np.ndarray) -> list[str]:
    draw = rng.random((spec.n_pages, 2))
    kinds = []
    home = set(np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist())
    for i in range(spec.n_pages):
        if i in home or draw[i, 0] >= spec.xml_share:
            kinds.append("html")
        elif draw[i, 1] < 0.7:
            kinds.append("xml")
        else:
            kinds.append(FEED_KINDS[int(draw[i, 1] * 1000) % 2])
    return kinds


def _rates(spec: WebSpec, rng: np.random.Generator) -> np.ndarray:
    shape = spec.change_rate_shape
    rates = rng.gamma(shape, spec.change_rate_mean / shape, size=spec.n_pages)
    rates[rng.random(spec.n_pages) < spec.static_share] = 0.0
    return rates


def _disallowed_flags(spec: WebSpec, rng: np.random.Generator, hosts: list[Host],
                      sizes: np.ndarray) -> np.ndarray:
    flags = rng.random(spec.n_pages) < spec.disallowed_page_share
    start = 0
    for h, size in zip(hosts, sizes):
        end = start + int(size)
        if not h.disallow:
            flags[start:end] = False
        flags[start] = is_disallowed("/", h.disallow)  # the home page is "/"
        start = end
    return flags


def _paths(spec: WebSpec, rng: np.random.Generator, hosts: list[Host], page_host: np.ndarray,
           kinds: list[str], disallowed: np.ndarray) -> list[str]:
    ext = {"html": ".html", "xml": ".xml", "rss": ".rss", "atom": ".atom"}
    home_dir = {"html": "/p/", "xml": "/x/", "rss": "/feeds/", "atom": "/feeds/"}
    paths, last_host = [], -1
    for i in range(spec.n_pages):
        h = int(page_host[i])
        name = f"{i}{ext[kinds[i]]}"
        if h != last_host:
            paths.append("/")
        elif disallowed[i]:
            prefix = hosts[h].disallow[int(rng.integers(0, len(hosts[h].disallow)))]
            paths.append(prefix + name if prefix.endswith("/") else f"{prefix}-{name}")
        else:
            paths.append(home_dir[kinds[i]] + name)
        last_host = h
    return paths


def _links(spec: WebSpec, rng: np.random.Generator, page_host: np.ndarray, kinds: list[str],
           disallowed: np.ndarray, sizes: np.ndarray) -> list[list[int]]:
    """Targets per page: a spanning tree over allowed pages, plus Zipf-sampled links."""
    n = spec.n_pages
    a = 1.0 / (spec.inlink_exponent - 1.0)
    weight = (rng.permutation(n) + 1.0) ** -a
    starts = np.concatenate([[0], np.cumsum(sizes)])
    out: list[list[int]] = [[] for _ in range(n)]
    degrees = np.minimum(rng.geometric(1.0 / spec.mean_out_degree, size=n), 200)
    cross = rng.random(int(degrees.sum())) < spec.cross_host_share
    global_p = weight / weight.sum()
    global_pick = rng.choice(n, size=int(cross.sum()), p=global_p)
    gi = 0
    ci = 0
    for h in range(spec.n_hosts):
        lo, hi = int(starts[h]), int(starts[h + 1])
        local_p = weight[lo:hi] / weight[lo:hi].sum()
        local_pick = lo + rng.choice(hi - lo, size=int(degrees[lo:hi].sum()), p=local_p)
        li = 0
        allowed_seen = [lo]
        for i in range(lo, hi):
            if i > lo:
                pool = allowed_seen if not disallowed[i] else list(range(lo, i))
                parent = pool[int(rng.integers(0, len(pool)))]
                out[parent].append(i)
                if not disallowed[i]:
                    allowed_seen.append(i)
            for _ in range(int(degrees[i])):
                if cross[ci]:
                    t = int(global_pick[gi])
                    gi += 1
                else:
                    t = int(local_pick[li])
                li += 1
                ci += 1
                out[i].append(t)
    for i in range(n):
        seen: set[int] = {i}
        out[i] = [t for t in out[i] if not (t in seen or seen.add(t))]
    return out


def _link_objects(spec: WebSpec, rng: np.random.Generator, links: list[list[int]],
                  page_host: np.ndarray, paths: list[str], kinds: list[str]) -> list[list[Link]]:
    result = []
    for i, targets in enumerate(links):
        draw = rng.random((len(targets), 3))
        objs = []
        for (t, (d_form, d_kind, d_nf)) in zip(targets, draw):
            same = page_host[t] == page_host[i]
            form = "absolute"
            if same and paths[t] != "/":
                form = "relative" if d_form < 0.6 else ("root" if d_form < 0.85 else "absolute")
            elif same:
                form = "root" if d_form < 0.85 else "absolute"
            kind, nofollow = _link_kind(kinds[i], kinds[t], float(d_kind), float(d_nf))
            if kind in ("rss", "atom"):
                form = "absolute"
            objs.append(Link(int(page_host[t]), paths[t], kind, nofollow, form))
        # Document order: HTML alternates sit in <head>, before every body link.
        objs.sort(key=lambda link: link.kind != "alternate")
        if kinds[i] in FEED_KINDS:
            # A feed's channel/feed link points at its site's home page.
            objs.insert(0, Link(int(page_host[i]), "/", kinds[i], False, "absolute"))
        result.append(objs)
    return result


def _link_kind(src_kind: str, dst_kind: str, d_kind: float, d_nf: float) -> tuple[str, bool]:
    if src_kind == "xml":
        return "xlink", False
    if src_kind in FEED_KINDS:
        return src_kind, False
    if dst_kind in FEED_KINDS and d_kind < 0.5:
        return "alternate", False
    if d_kind < 0.03:
        return "area", False
    if d_kind < 0.05:
        return "iframe", False
    if d_kind < 0.06:
        return "frame", False
    return "a", d_nf < 0.05


def _place_hostile(spec: WebSpec, rng: np.random.Generator, hosts: list[Host],
                   page_host: np.ndarray, kinds: list[str], disallowed: np.ndarray
                   ) -> tuple[list[HostilePlacement], list[tuple[int, Link]]]:
    """Put each page-level hostile case on a plain host, linked from an allowed HTML page."""
    plain = [h.index for h in hosts if h.role == "normal" and h.robots in ("rules", "missing")
             and not h.throttled]
    sources = [i for i in range(spec.n_pages) if kinds[i] == "html" and not disallowed[i]
               and int(page_host[i]) in plain]
    placements, extra = [], []
    silent, refused = spec.n_hosts, spec.n_hosts + 1
    for name in sorted(spec.hostile):
        case = CASES[name]
        if case.entry is None:
            continue
        if name == "silent_host":
            host = silent
        elif name == "refused_port":
            host = refused
        else:
            host = plain[int(rng.integers(0, len(plain)))]
        src = sources[int(rng.integers(0, len(sources)))]
        placements.append(HostilePlacement(name, host, case.entry, src))
        form = "root" if host == int(page_host[src]) else "absolute"
        extra.append((src, Link(host, case.entry, "a", False, form)))
    return placements, extra


def relative_ref(base_dir: str, target: str) -> str:
    """An href for ``target`` written relative to directory ``base_dir`` (both absolute)."""
    if target == "/":
        return "/"
    rel = posixpath.relpath(target, base_dir.rstrip("/") or "/")
    return rel
