"""What a unit of the refresh planner costs (DESIGN.md §6): O(G + pages changed), never
O(N) a unit in a steady crawl.

Discovery's end: ρG goes to refresh only once DISCOVERY_END_UNITS units in a row began with
nothing unread, and comes back at once when a page is unread again. Each change of the
refresh bandwidth rebuilds the ledger from every page (a full scan), so a trickle of new
links must not flip it unit after unit. After downtime, the backlog of due pages is served
G a unit without being rewritten every unit."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from metadata import FetchRecord, MetadataStore, PageType, SetRefresh
from metadata import refresh_queries as rq
from xyro.clock import ManualClock
from xyro.crawl.frontier import DISCOVERY
from xyro.jobs.plan_job import DISCOVERY_END_UNITS, RefreshPlanner, UnitFigures

N = 300  # pages read, on 20 hosts
G = 30


class Crawl:
    """The planner's units against a web of N pages where a third change between reads;
    each unit's pages are read as the daemon would, through the metadata writer."""

    def __init__(self, store: MetadataStore, fill: Callable[[list], None], kit,
                 discovery_share: float = 0.2) -> None:
        self.store, self.fill, self.unit_s = store, fill, kit.unit
        self.u0 = int(kit.start // kit.unit)
        self.s = kit.settings(bandwidth=G, discovery_share=discovery_share,
                              max_interval_units=90.0)
        self.writes = 0  # SetRefresh ops of the last unit
        self.version: Counter[str] = Counter()
        self.new_links = 0
        urls = [f"http://site{i % 20}.example/p{i}.xml" for i in range(N)]
        self.changing = set(urls[::3])
        rnd = random.Random(1)
        records = []
        for url in urls:  # four reads 10 units apart, the last 10 to 20 units ago
            off = rnd.uniform(0, 10)
            records += [self._read(url, (self.u0 + off + 10 * k - 40) * self.unit_s)
                        for k in range(4)]
        fill(records)

    def _read(self, url: str, t: float, children: tuple[str, ...] = ()) -> FetchRecord:
        if url in self.changing:
            self.version[url] += 1
        return FetchRecord(url, t, PageType.XML, http_status=200,
                           signature=f"{url}#{self.version[url]}".encode(), children=children)

    def unit(self, u: int, new_link: bool) -> tuple[UnitFigures, list[tuple[str, int]]]:
        """Plan unit u (from conftest.START) with a planner of its own (as a restart would),
        read its pages; with ``new_link`` the first page read links a URL never seen."""
        ops: list = []
        conn = self.store.read_connection()
        try:
            planner = RefreshPlanner(conn, ops.append,
                                     ManualClock((self.u0 + u) * self.unit_s + 1.0), self.s)
            fetch = planner.run_unit()
            offers = planner.offers(fetch)
        finally:
            conn.close()
        self.fill(ops)
        self.writes = sum(isinstance(op, SetRefresh) for op in ops)
        records: list[FetchRecord] = []
        for items in offers.values():
            for url, _, not_before in items:
                t = max(not_before, (self.u0 + u) * self.unit_s + 2.0) + 1e-3 * len(records)
                kids: tuple[str, ...] = ()
                if new_link and not records:
                    kids = (f"http://site0.example/new{self.new_links}.xml",)
                    self.new_links += 1
                records.append(self._read(url, t, kids))
        self.fill(records)
        assert planner.last_unit is not None
        return planner.last_unit, fetch


def test_a_trickle_of_new_links_keeps_the_ledger(store, fill, kit) -> None:
    """One new URL every other unit (a mature scoped crawl): the unread set empties and
    refills, and the planner used to flip the refresh bandwidth between G and G − ρG with
    it, each flip a full scan (every unit of 3000 pages: 30 of 30)."""
    crawl = Crawl(store, fill, kit)
    assert crawl.unit(0, new_link=False)[0].full_scan  # no ledger yet
    full = [crawl.unit(u, new_link=u % 2 == 0)[0].full_scan for u in range(1, 25)]
    assert sum(full) == 0


def test_discovery_ends_after_the_empty_units_and_comes_back_at_once(store, fill, kit
                                                                     ) -> None:
    crawl = Crawl(store, fill, kit)
    crawl.unit(0, new_link=False)
    full = [crawl.unit(u, new_link=False)[0].full_scan
            for u in range(1, 2 * DISCOVERY_END_UNITS)]
    # Unit 0 was the first empty one; the DISCOVERY_END_UNITS-th gives ρG to refresh.
    assert [u for u, f in enumerate(full, 1) if f] == [DISCOVERY_END_UNITS - 1]
    conn = store.read_connection()
    assert rq.state_value(conn, rq.BANDWIDTH_KEY) == 30.0
    conn.close()
    u = 2 * DISCOVERY_END_UNITS
    crawl.unit(u, new_link=True)  # links a new page: unread at the next unit's start
    figures, fetch = crawl.unit(u + 1, new_link=False)
    assert figures.full_scan and figures.discovery == 1
    assert ("http://site0.example/new0.xml", DISCOVERY) in fetch
    conn = store.read_connection()
    assert rq.state_value(conn, rq.BANDWIDTH_KEY) == 24.0  # G − round(0.2·30)
    assert rq.state_value(conn, rq.UNREAD_EMPTY_SINCE_KEY) is None
    conn.close()


def test_a_backlog_is_served_without_being_refiled_every_unit(store, fill, kit) -> None:
    """Down for 200 units, every page is due at once: G of them are read a unit, the rest
    wait in their past folders (due again next unit) instead of being re-filed one unit on,
    which wrote the whole backlog every unit (O(N²/G) writes until it is served)."""
    crawl = Crawl(store, fill, kit, discovery_share=0.0)
    crawl.unit(0, new_link=False)
    crawl.unit(1, new_link=False)
    deferred = []
    for u in range(200, 200 + N // G):
        figures = crawl.unit(u, new_link=False)[0]
        assert not figures.full_scan and figures.due == G
        # The pages read (moved to their next folder) and those read last unit (re-filed
        # from their read); none of the pages still waiting.
        assert crawl.writes <= 2 * G
        deferred.append(figures.deferred)
    assert deferred[0] == N - G
    # Left in their past folders, the waiting pages were still served, the longest
    # unread first: every page was read once in the N/G units after the downtime.
    conn = store.read_connection()
    oldest = conn.execute("SELECT min(last_access) FROM urls WHERE type = 'xml'").fetchone()[0]
    conn.close()
    assert oldest >= (crawl.u0 + 200) * kit.unit
