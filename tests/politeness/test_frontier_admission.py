"""The frontier owns queued work (DESIGN.md §2): one admission for every producer, and only
the frontier asks the writer for enqueues and dequeues, so memory and store cannot drift.

Checked against a real metadata store: what each producer's offers become in the frontier
table and in ``urls.type``, the one record of a completed fetch, and random sequences of
every operation after which the persisted frontier equals the frontier in memory.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata import FetchRecord, MetadataStore, PageType
from metadata.writer import Writer
from xyro.clock import ManualClock
from xyro.crawl.admission import Admission, Refusal, Source
from xyro.crawl.frontier import (BACKGROUND, DISCOVERY, LOADER, REFRESH, URGENT, Frontier,
                           admit_offline, records)
from xyro.crawl.frontier_queues import FrontierItem
from xyro.crawl.hosts import HostScheduler
from xyro.net.robots import RobotsCache
from xyro.net.urls import Scope, TrapGuard

T0 = 1_700_000_000.0
SEED = "http://in.example/"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    with MetadataStore.open(tmp_path / "x.db") as s:
        yield s


@pytest.fixture
def writer(store: MetadataStore, clock: ManualClock) -> Iterator[Writer]:
    w = store.writer(now=clock.now)
    yield w
    w.close()


def admission(clock: ManualClock, max_depth: int = 2, budget: int = 1000,
              allowed: tuple[str, ...] = ()) -> Admission:
    return Admission(Scope([SEED], allowed, ["denied.example"], (), ["/private/"], max_depth),
                     TrapGuard(clock, max_pages_per_host_per_unit=budget, unit_s=3600.0),
                     frozenset({".png"}))


def make_frontier(clock: ManualClock, writer: Writer | None, **kw: object) -> Frontier:
    robots = RobotsCache("XyroBot", clock)
    frontier = Frontier(HostScheduler(0.0, clock), robots, clock,
                        admission=admission(clock, **kw),  # type: ignore[arg-type]
                        record=None if writer is None else writer.submit)
    for host in ("in.example", "other.example", "dtd.example"):
        robots.store(f"http://{host}", 404, b"", T0)  # allow all: no robots items
    return frontier


def table(store: MetadataStore) -> dict[str, tuple]:
    """url → (type, depth, queued priority or None, refused reason or None)."""
    conn = sqlite3.connect(store.path)
    try:
        return {url: (t, d, p, r) for url, t, d, p, r in conn.execute(
            "SELECT u.url, u.type, u.depth, f.priority, (SELECT detail FROM errors e WHERE "
            "e.url_id = u.id AND e.kind = 'refused') FROM urls u "
            "LEFT JOIN frontier f ON f.url_id = u.id")}
    finally:
        conn.close()


def page(item: FrontierItem, clock: ManualClock, *links: str) -> FetchRecord:
    return FetchRecord(item.url, clock.now(), PageType.HTML, 200, b"md5", children=links)


def fetch(frontier: Frontier, clock: ManualClock) -> FrontierItem:
    item = frontier.pop(clock.now())
    assert item is not None and item.kind == "fetch"
    frontier.done(item, now=clock.now())
    return item


# -- the admission -------------------------------------------------------------------------

@pytest.mark.parametrize("url,depth,source,kind", [
    ("ftp://in.example/x", 0, Source.SEED, "scheme"),
    ("http://in.example/a", 3, Source.DISCOVERY, "depth"),
    ("http://in.example/a.png", 1, Source.DISCOVERY, "suffix"),
    ("http://other.example/", 1, Source.DISCOVERY, "scope"),
    ("http://in.example/private/a", 1, Source.REFRESH, "scope"),
    ("http://in.example/x/y/x/y/x/y/", 1, Source.DISCOVERY, "trap"),
    ("http://in.example/x/y/x/y/x/y/", 1, Source.LOADER, "trap"),
    ("http://denied.example/", 0, Source.SEED, "scope"),
    ("http://in.example/a", 0, Source.DISCOVERY, None),
    ("http://other.example/", 0, Source.SEED, None),      # a seed: the derived scope allows it
    ("http://other.example/d.dtd", 9, Source.LOADER, None),  # DTDs live elsewhere, any depth
    # The global PageRank estimate's pages: out of scope, any depth; suffixes, traps hold.
    ("http://other.example/p", 9, Source.GLOBAL_ESTIMATE, None),
    ("http://other.example/a.png", 1, Source.GLOBAL_ESTIMATE, "suffix"),
    ("http://other.example/x/y/x/y/x/y/", 1, Source.GLOBAL_ESTIMATE, "trap"),
    # Denied domains and deny patterns bind every producer: never fetched means never.
    ("http://denied.example/d.dtd", 1, Source.LOADER, "scope"),
    ("http://other.example/private/d.dtd", 1, Source.LOADER, "scope"),
    ("http://www.denied.example/p", 1, Source.GLOBAL_ESTIMATE, "scope"),
    ("http://other.example/private/p", 1, Source.GLOBAL_ESTIMATE, "scope"),
])
def test_one_admission_with_rules_per_source(clock: ManualClock, url: str, depth: int,
                                             source: Source, kind: str | None) -> None:
    refusal = admission(clock).check(url, depth, source)
    assert (refusal.kind if refusal else None) == kind, refusal


def test_explicit_allowed_domains_refuse_seeds_and_reloads_grow_a_derived_scope(
        clock: ManualClock) -> None:
    explicit = admission(clock, allowed=("in.example",))
    assert explicit.check("http://other.example/", 0, Source.SEED).kind == "scope"
    derived = admission(clock)
    assert derived.check("http://other.example/a", 1, Source.DISCOVERY).kind == "scope"
    derived.add_seeds(["http://other.example/"])
    assert derived.check("http://other.example/a", 1, Source.DISCOVERY) is None


def test_the_host_budget_refuses_for_the_unit_only(clock: ManualClock) -> None:
    adm = admission(clock, budget=1)
    assert adm.check("http://in.example/1", 1, Source.DISCOVERY) is None
    refusal = adm.check("http://in.example/2", 1, Source.DISCOVERY)
    assert refusal is not None and refusal.kind == "budget" and not refusal.lasting
    assert adm.check("http://in.example/2", 1, Source.REFRESH) is None  # counted once, before
    assert [type(op).__name__ for op in records(
        [], [(admit_offline(adm, Source.SEED, ["http://x/"], URGENT).queued[0],
              refusal)])] == []


# -- what reaches the store ----------------------------------------------------------------

def test_producers_are_recorded_and_refusals_marked(clock: ManualClock, store: MetadataStore,
                                                    writer: Writer) -> None:
    frontier = make_frontier(clock, writer)
    seeded = frontier.submit(Source.SEED, [SEED, "http://in.example/a.png"], URGENT)
    assert [o.url for o in seeded.queued] == [SEED]
    assert frontier.submit(Source.SEED, [SEED], URGENT).known == 1  # a known seed is skipped
    frontier.submit(Source.LOADER, ["http://dtd.example/d.dtd"], LOADER, depth=2)
    writer.flush()
    rows = table(store)
    assert rows[SEED][2] == URGENT and rows["http://dtd.example/d.dtd"][2] == LOADER
    kind, _, queued, reason = rows["http://in.example/a.png"]
    assert (kind, queued) == ("refused", None) and "skip_suffixes" in reason
    assert sorted(u for u, *_ in frontier.rows()) == sorted(u for u, r in rows.items()
                                                            if r[2] is not None)


def test_a_completion_is_one_record_with_the_page_its_children_and_its_move(
        clock: ManualClock, store: MetadataStore, writer: Writer) -> None:
    frontier = make_frontier(clock, writer)
    frontier.submit(Source.SEED, [SEED], URGENT)
    item = fetch(frontier, clock)
    ops: list = []
    frontier._record = ops.append  # see the one op handed to the writer
    links = [("http://in.example/x.xml", DISCOVERY), ("http://other.example/", BACKGROUND),
             (SEED, BACKGROUND)]  # a link back to the page itself: seen, skipped
    sub = frontier.complete(item, page(item, clock, *(u for u, _ in links)), links)
    assert [o.url for o in sub.queued] == ["http://in.example/x.xml"] and sub.known == 1
    (record,) = ops
    assert record.enqueue == (("http://in.example/x.xml", DISCOVERY),)
    assert [u for u, _ in record.refused] == ["http://other.example/"]
    writer.submit(record)
    writer.flush()
    rows = table(store)
    assert rows[SEED][0] == "html" and rows[SEED][2] is None          # dequeued
    assert rows["http://in.example/x.xml"][1:3] == (1, DISCOVERY)     # child queued at depth 1
    assert rows["http://other.example/"][0] == "refused"              # kept as a link target


def test_a_url_asked_for_again_while_open_keeps_its_row(clock: ManualClock,
                                                        store: MetadataStore,
                                                        writer: Writer) -> None:
    """A 304 the loader wants unconditionally, or a refresh of a document waiting for its
    DTD: the ask rides in the completion record, which would otherwise delete the row."""
    frontier = make_frontier(clock, writer)
    frontier.submit(Source.SEED, [SEED], URGENT)
    item = fetch(frontier, clock)
    asked = frontier.submit(Source.LOADER, [SEED], LOADER)
    assert [o.url for o in asked.queued] == [SEED]
    frontier.complete(item, page(item, clock))
    writer.flush()
    assert table(store)[SEED][2] == LOADER
    again = fetch(frontier, clock)
    frontier.complete(again, page(again, clock))
    writer.flush()
    assert table(store)[SEED][2] is None and len(frontier) == 0


def test_refused_deep_then_admitted_shallow_becomes_unread(clock: ManualClock,
                                                           store: MetadataStore,
                                                           writer: Writer) -> None:
    frontier = make_frontier(clock, writer, max_depth=2)
    deep = "http://in.example/deep"
    frontier.submit(Source.SEED, [SEED], URGENT)
    seed = fetch(frontier, clock)
    frontier.complete(seed, page(seed, clock, "http://in.example/1"),
                      [("http://in.example/1", DISCOVERY)])
    writer.flush()  # a page discovered and fetched in one batch is stored at depth 0
    one = fetch(frontier, clock)
    frontier.complete(one, page(one, clock, "http://in.example/2"),
                      [("http://in.example/2", DISCOVERY)])
    writer.flush()
    two = fetch(frontier, clock)
    frontier.complete(two, page(two, clock, deep), [(deep, DISCOVERY)])  # depth 3 > 2
    writer.flush()
    assert table(store)[deep][:3] == ("refused", 3, None)
    # The seed page changed and now links it directly: depth 1.
    seed_again = frontier.submit(Source.REFRESH, [(SEED, 0)], REFRESH)
    assert seed_again.queued
    refreshed = fetch(frontier, clock)
    frontier.complete(refreshed, page(refreshed, clock, deep), [(deep, DISCOVERY)])
    writer.flush()
    assert table(store)[deep][:3] == ("unread", 1, DISCOVERY)


def test_restore_holds_rows_the_configuration_no_longer_wants(
        clock: ManualClock, store: MetadataStore, writer: Writer) -> None:
    """A narrower scope at a start (a typo, a deleted seed) leaves the rows it refuses in the
    store's frontier, unqueued and unrefused: a start whose scope admits them again has them
    back."""
    frontier = make_frontier(clock, writer)
    frontier.submit(Source.SEED, [SEED, "http://other.example/"], URGENT)
    frontier.submit(Source.LOADER, ["http://dtd.example/d.dtd"], LOADER)
    writer.flush()
    rows = [(r.url, r.priority, r.depth, r.not_before) for r in store.frontier_rows()]
    narrow = make_frontier(clock, writer, allowed=("in.example",))
    restored = narrow.restore(rows, [SEED])
    assert (restored.queued, restored.held) == (2, {"scope": 1})  # the seed and the DTD
    assert len(narrow) == 2
    writer.flush()
    after = table(store)
    assert after["http://other.example/"][:3] == ("unread", 0, URGENT)
    wide = make_frontier(clock, writer, allowed=("in.example", "other.example"))
    again = wide.restore(
        [(r.url, r.priority, r.depth, r.not_before) for r in store.frontier_rows()], [SEED])
    assert (again.queued, again.held) == (3, {})


def test_an_out_of_scope_page_of_the_global_estimate_is_fetched_for_its_links_only(
        clock: ManualClock, store: MetadataStore, writer: Writer) -> None:
    """Queued as a ``links`` item at the discovery level; its completion stores its links
    but queues none of them, even in-scope ones; a give-back and a restart keep it so."""
    frontier = make_frontier(clock, writer)
    outside = "http://other.example/hub"
    assert frontier.submit(Source.DISCOVERY, [outside], DISCOVERY).refused  # not the crawl's
    sub = frontier.submit(Source.GLOBAL_ESTIMATE, [outside], DISCOVERY)
    assert [o.url for o in sub.queued] == [outside]
    writer.flush()
    assert table(store)[outside][0] == "unread" and table(store)[outside][2] == DISCOVERY
    item = frontier.pop(clock.now())
    assert item is not None and item.kind == "links"
    frontier.done(item, now=clock.now())
    frontier.give_back(item)                       # a stop cut its fetch short
    item = frontier.pop(clock.now())
    assert item is not None and item.kind == "links"
    frontier.done(item, now=clock.now())
    links = [("http://in.example/new", DISCOVERY), ("http://other.example/next", DISCOVERY)]
    record = FetchRecord(outside, clock.now(), PageType.OUTSIDE, 200, b"md5",
                         children=tuple(u for u, _ in links))
    done = frontier.complete(item, record, links)
    assert not done.queued and not done.refused and len(frontier) == 0
    writer.flush()
    rows = table(store)
    assert rows[outside][0] == "outside" and rows[outside][2] is None
    assert "http://in.example/new" in rows and rows["http://in.example/new"][2] is None
    assert store.export_graph().m == 2                # its links are in the graph

    # Persisted while queued, it comes back as a links item only when the rounds say so.
    frontier.submit(Source.GLOBAL_ESTIMATE, ["http://other.example/next"], DISCOVERY)
    writer.flush()
    rows = [(r.url, r.priority, r.depth, r.not_before) for r in store.frontier_rows()]
    assert make_frontier(clock, None).restore(rows, []).queued == 0
    restarted = make_frontier(clock, None)
    assert restarted.restore(rows, [], frozenset({"http://other.example/next"})).queued == 1
    again = restarted.pop(clock.now())
    assert again is not None and again.kind == "links"


@pytest.mark.parametrize("target, kind", [("http://other.example/moved", "links"),
                                           ("http://in.example/moved", "fetch"),
                                           ("http://other.example/a.png", None)])
def test_a_redirect_of_an_out_of_scope_page_is_followed(
        clock: ManualClock, store: MetadataStore, writer: Writer, target: str,
        kind: str | None) -> None:
    """A ``links`` item's 3xx: its target is the page itself, followed as a ``links`` item
    again (an in-scope target as a crawl page; a refused one not at all), where the hop
    used to end with the target never queued and never a candidate again."""
    frontier = make_frontier(clock, writer)
    outside = "http://other.example/hub"
    frontier.submit(Source.GLOBAL_ESTIMATE, [outside], DISCOVERY)
    item = frontier.pop(clock.now())
    assert item is not None and item.kind == "links"
    frontier.done(item, now=clock.now())
    record = FetchRecord(outside, clock.now(), PageType.ERROR, 301, None,
                         children=(target,), error_kind="redirect")
    done = frontier.complete(item, record, [(target, DISCOVERY)], Source.REDIRECT)
    assert [o.url for o in done.queued] == ([target] if kind else [])
    if kind is not None:
        clock.advance(60.0)
        hop = frontier.pop(clock.now())
        assert hop is not None and (hop.url, hop.kind) == (target, kind)


def test_offline_admission_is_the_same(clock: ManualClock) -> None:
    sub = admit_offline(admission(clock), Source.SEED, [SEED, "http://in.example/private/x"],
                        URGENT)
    ops = records(sub.queued, sub.refused)
    assert [type(op).__name__ for op in ops] == ["Enqueue", "Refuse"]
    assert isinstance(sub.refused[0][1], Refusal) and "deny pattern" in ops[1].reason


# -- memory and store cannot drift ---------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_random_operations_keep_memory_and_store_equal(seed: int, clock: ManualClock,
                                                       store: MetadataStore,
                                                       writer: Writer) -> None:
    rng = random.Random(seed)
    frontier = make_frontier(clock, writer, max_depth=3)
    urls = [f"http://{h}/{p}{i}" for h in ("in.example", "other.example")
            for p in ("p", "private/") for i in range(12)]
    held: list[FrontierItem] = []

    def check() -> None:  # the store holds what memory holds: queued, or fetched and open
        writer.flush()
        rows = table(store)
        persisted = {url for url, row in rows.items() if row[2] is not None}
        assert persisted == {url for url, *_ in frontier.rows()} | {i.url for i in held}
        assert not any(rows[u][0] == "refused" for u in persisted)

    for step in range(600):
        if step % 20 == 0:
            check()
        clock.advance(rng.uniform(0, 0.2))
        op = rng.random()
        if op < 0.3:
            source = rng.choice([Source.SEED, Source.REFRESH, Source.LOADER])
            # Often a URL whose fetch is open: asked for again while its document waits.
            url = rng.choice(held).url if held and rng.random() < 0.5 else rng.choice(urls)
            frontier.submit(source, [(url, rng.randrange(5))], rng.randrange(5))
        elif op < 0.8 and (item := frontier.pop(clock.now())) is not None:
            if item.kind == "disallowed":
                frontier.complete(item, page(item, clock))
                continue
            frontier.done(item, now=clock.now())
            end = rng.random()
            if end < 0.15:
                frontier.give_back(item, clock.now() + rng.uniform(0, 3))
            elif end < 0.35:
                held.append(item)  # a document waiting for its DTD
            else:
                links = [(u, rng.randrange(5)) for u in rng.sample(urls, 3)]
                frontier.complete(item, page(item, clock, *(u for u, _ in links)), links)
        elif held:
            item = held.pop(rng.randrange(len(held)))
            frontier.complete(item, page(item, clock))
    while held:
        item = held.pop()
        frontier.complete(item, page(item, clock))
    check()
    assert frontier.open_fetches == 0
