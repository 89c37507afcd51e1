"""Benchmark: ingest fetched pages through the real metadata Writer (DESIGN.md §4).

Simulates a breadth-first crawl: page k is URL k; each fetched page has ``--links`` children,
``--new-share`` of them brand-new URLs (created as unread rows with host and depth, and
enqueued), the rest already-known URLs (copying model: power-law in-degree, see
``records``; ``--copy-share 0`` makes them all uniform, the no-locality worst case).
Hosts are interleaved (URL k is on host k mod 20,000), as a polite crawler interleaves
them. Every fetch goes through ``Writer.submit`` (one op per page) and batched transactions;
the clock is stopped after the final flush. ``pages_per_s`` is over the whole run;
``second_half_pages_per_s`` and ``last_tenth_pages_per_s`` are the sustained rates as the
database grows (committed pages, see ``_Commits``; present when the run spans several
batches), and the target holds for both the whole run and the last tenth. Then the
~N×links-link graph is exported to CSR.

Peer, same run: the same writer with batch_size=max_batch_size=1 (one transaction per
fetch) on a fresh slice of ``--peer-pages`` pages, against the batched writer on the same
slice.

    .venv/bin/python tests/bench/metadata_ingest.py            # 1,000,000 pages, 10 links
    .venv/bin/python tests/bench/metadata_ingest.py --quick    # 20,000 pages

Prints ONE JSON line on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from benchmachine import machine  # a sibling script module (tests/bench is sys.path[0])

from metadata import Enqueue, FetchRecord, MetadataStore, PageType
from metadata.writer import Writer

HOSTS = 20_000
SEEDS = 100
T0 = 1_767_225_600.0


_HOST_PREFIX = tuple(f"http://www.h{h}.example.org/section/" for h in range(HOSTS))


def urls(ks: Iterable[int]) -> list[str]:
    """URL of page k, for each k (the one spelling; the host part is looked up, not
    formatted, as the harness makes ten of these per page)."""
    prefix = _HOST_PREFIX
    return [f"{prefix[k % HOSTS]}{k // HOSTS}/page-{k}.html" for k in ks]


def url(k: int) -> str:
    return urls((k,))[0]


def _child_slots(n_new: int, n_known: int) -> np.ndarray:
    """Column of each child in ``[new..., known...]``: new and known children alternate,
    the surplus kind comes last."""
    both = min(n_new, n_known)
    return np.array([x for pair in zip(range(both), range(n_new, n_new + both)) for x in pair]
                    + list(range(both, n_new)) + list(range(n_new + both, n_new + n_known)),
                    dtype=np.int64)


def _child_ids(start: int, stop: int, links: int, n_new: int, coins: np.ndarray,
               picks: np.ndarray, copy_share: float, targets: np.ndarray,
               slots: np.ndarray) -> np.ndarray:
    """Children of pages ``start..stop-1`` (one row each), written into ``targets``.

    Page k is preceded by exactly ``k * links`` links. A copied child takes the target of
    link ``int(pick * k * links)``; one emitted in this same block is resolved by pointer
    jumping (each copy points to a strictly earlier link, so chains end).
    """
    k = np.arange(start, stop, dtype=np.int64)[:, None]
    emitted = k * links
    new = SEEDS + k * n_new + np.arange(n_new, dtype=np.int64)
    pos = (picks * emitted).astype(np.int64)
    base = start * links
    copied = np.where(pos < base, targets[np.minimum(pos, base)], -1 - (pos - base))
    uniform = (picks * (SEEDS + k * n_new)).astype(np.int64)
    known = np.where((coins < copy_share) & (emitted > 0), copied, uniform)
    flat = np.concatenate([new, known], axis=1)[:, slots].reshape(-1)
    while True:
        ref = flat < 0
        if not ref.any():
            break
        flat[ref] = flat[-1 - flat[ref]]
    targets[base:base + flat.size] = flat
    return flat.reshape(-1, links)


def records(pages: int, links: int, new_share: float, seed: int,
            copy_share: float = 0.8) -> Iterator[FetchRecord]:
    """The crawl: page k is fetched k-th; its new children are the next URLs in line.

    Known children follow the copying model of web graphs (Kumar et al. 2000): with
    probability ``copy_share`` a child copies the target of a random earlier link, which
    gives the power-law in-degree of real web graphs, else it is a uniformly random known URL
    (``copy_share=0`` is the adversarial all-uniform case: no locality at all).

    Child ids are drawn with numpy a block of pages at a time, so the harness spends its
    time building the records (URL strings, ``FetchRecord`` and its checks), as a crawler
    would, rather than drawing random numbers (it shares the GIL with the writer).
    """
    rng = np.random.default_rng(seed)
    n_new = round(links * new_share)
    n_known = links - n_new
    slots = _child_slots(n_new, n_known)
    new_at = [j for j, col in enumerate(slots.tolist()) if col < n_new]  # new children
    targets = np.zeros(pages * links + 1, dtype=np.int64)
    html, xml = PageType.HTML, PageType.XML
    block = 4096
    for start in range(0, pages, block):
        stop = min(start + block, pages)
        coins = rng.random((block, n_known))[:stop - start]
        picks = rng.random((block, n_known))[:stop - start]
        rows = _child_ids(start, stop, links, n_new, coins, picks, copy_share, targets,
                          slots).tolist()
        for k, child_ids in zip(range(start, stop), rows):
            children = tuple(urls(child_ids))
            yield FetchRecord(
                url=url(k), fetched_at=T0 + k * 0.01, page_type=xml if k % 10 == 0 else html,
                http_status=200, signature=k.to_bytes(16, "little"), children=children,
                enqueue=tuple([(children[j], 2) for j in new_at]),
                content_type="text/html", size=20_000 + k % 997)


class _Commits:
    """Committed pages over time, read off the writer's counter as the run goes: does the
    rate hold as the database grows?

    Measured from the first commit past half (a tenth) of the pages to the final flush, so
    the figure covers whole batches the writer committed; the producer's own marks would
    count pages merely queued (a batch holds up to 32,000 pages, about three seconds).
    """

    def __init__(self, writer: Writer, other_ops: int, pages: int) -> None:
        self._writer = writer
        self._other = other_ops  # ops that are not pages (the seeds)
        self._pages = pages
        self._first_past: dict[float, tuple[int, float]] = {}  # share -> (pages, time)

    def poll(self) -> None:
        done = self._writer.stats["ops_written"] - self._other
        for share in (0.5, 0.9):
            if share not in self._first_past and done >= share * self._pages:
                self._first_past[share] = (done, time.perf_counter())

    def sustained(self, end: float) -> dict:
        out = {}
        for share, key in ((0.5, "second_half_pages_per_s"), (0.9, "last_tenth_pages_per_s")):
            if share in self._first_past:
                done, at = self._first_past[share]
                out[key] = round((self._pages - done) / (end - at), 1)
        return out


def ingest(path: Path, pages: int, links: int, new_share: float, batch_size: int,
           label: str, max_batch_size: int | None = None, copy_share: float = 0.8) -> dict:
    with MetadataStore.open(path) as store:
        writer = store.writer(batch_size=batch_size, max_batch_size=max_batch_size)
        started = time.perf_counter()
        cpu0 = time.process_time()
        for k in range(SEEDS):
            writer.submit(Enqueue(url(k), 1, enqueued_at=T0))
        marks: list[tuple[int, float]] = [(0, started)]
        commits = _Commits(writer, SEEDS, pages)
        step = max(pages // 10, 1)
        for i, rec in enumerate(records(pages, links, new_share, seed=1,
                                              copy_share=copy_share), 1):
            writer.submit(rec)
            if i % 1024 == 0:
                commits.poll()
            if i % step == 0:
                marks.append((i, time.perf_counter()))
                rate = step / (marks[-1][1] - marks[-2][1])
                print(f"[{label}] {i:,} pages, last {step:,} at {rate:,.0f} pages/s",
                      file=sys.stderr)
        writer.flush()
        elapsed = time.perf_counter() - started
        stats = writer.stats
        writer.close()
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        urls = conn.execute("SELECT count(*) FROM urls").fetchone()[0]
        frontier = conn.execute("SELECT count(*) FROM frontier").fetchone()[0]
        conn.close()
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        result = {
            "pages": pages, "links": pages * links, "urls": urls, "frontier": frontier,
            "seconds": round(elapsed, 3),
            "pages_per_s": round(pages / elapsed, 1),
            "links_per_s": round(pages * links / elapsed, 1),
            "writer_busy_seconds": round(stats["busy_seconds"], 3),
            "writer_cpu_us_per_page": round(stats["cpu_seconds"] / pages * 1e6, 1),
            "process_cpu_us_per_page": round((time.process_time() - cpu0) / pages * 1e6, 1),
            "batches": stats["batches"],
            "db_bytes": size,
            "bytes_per_url": round(size / urls, 1),
        }
        result.update(commits.sustained(started + elapsed))
        return result


def export(path: Path, expect_links: int) -> dict:
    with MetadataStore.open(path) as store:
        started = time.perf_counter()
        graph = store.export_graph()
        seconds = time.perf_counter() - started
    if graph.m != expect_links:
        raise SystemExit(f"export returned {graph.m} links, expected {expect_links}")
    return {"export_csr_seconds": round(seconds, 3), "graph_n": graph.n, "graph_m": graph.m,
            "xml_pages": int(graph.xml_mask.sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 pages smoke run")
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--links", type=int, default=10)
    ap.add_argument("--new-share", type=float, default=0.5,
                    help="share of each page's children that are brand-new URLs")
    ap.add_argument("--copy-share", type=float, default=0.8,
                    help="share of known children copied from earlier links (power-law "
                         "in-degree); the rest are uniform; 0 = no locality at all")
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--max-batch-size", type=int, default=None)
    ap.add_argument("--peer-pages", type=int, default=5000,
                    help="pages for the one-transaction-per-fetch peer")
    ap.add_argument("--dir", type=Path, default=None, help="where to put the databases")
    args = ap.parse_args()
    pages = 20_000 if args.quick else args.pages
    peer_pages = min(args.peer_pages, 1000 if args.quick else args.peer_pages, pages)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="xyro-bench-") as tmp:
        main_db, peer_db = Path(tmp) / "ingest.db", Path(tmp) / "peer.db"
        ours = ingest(main_db, pages, args.links, args.new_share, args.batch_size, "writer",
                      args.max_batch_size, args.copy_share)
        ours.update(export(main_db, pages * args.links))
        ours["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                    1)
        # Same-size comparison: the peer is measured on a slice, so is a batched run.
        ours_slice = ingest(Path(tmp) / "slice.db", peer_pages, args.links, args.new_share,
                            args.batch_size, "writer, slice", args.max_batch_size,
                            args.copy_share)
        peer = ingest(peer_db, peer_pages, args.links, args.new_share, 1, "per-fetch txn",
                      1, args.copy_share)
    out = {
        "benchmark": "metadata_ingest",
        "xyro_batched_writer": ours,
        "per_fetch_transaction": peer,
        "xyro_batched_writer_same_slice": ours_slice,
        "ratios": {"pages_per_s_batched_vs_per_fetch_transaction_same_slice":
                   round(ours_slice["pages_per_s"] / peer["pages_per_s"], 2)},
        "targets": {"pages_per_s_min": 10_000, "export_csr_seconds_max": 5.0,
                    "peak_rss_mb_max": 2048,
                    "met": bool(min(ours["pages_per_s"], ours.get("last_tenth_pages_per_s",
                                                                   ours["pages_per_s"]))
                                >= 10_000
                                and ours["export_csr_seconds"] <= 5.0
                                and ours["peak_rss_mb"] <= 2048)},
        "params": {"links_per_page": args.links, "new_share": args.new_share,
                   "copy_share": args.copy_share,
                   "batch_size": args.batch_size, "quick": args.quick},
        "machine": machine(sqlite=sqlite3.sqlite_version),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
