"""Parts of the writer: the op queue, new-URL depths and ids."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from metadata import FetchRecord, MetadataStore, PageType, SetPending
from metadata.opqueue import OpQueue


def _marker(item: object) -> bool:
    return item == "M"


def test_queue_takes_many_stops_after_a_marker_and_times_out() -> None:
    q = OpQueue(10, _marker)
    for item in (1, 2, 3, "M", 4, 5):
        q.put(item)
    assert q.take(2, 0) == [1, 2]
    assert q.take(100, 0) == [3, "M"]  # a marker ends the take; 4 and 5 stay queued
    assert q.qsize() == 2
    assert q.take(100, None) == [4, 5]
    started = time.monotonic()
    assert q.take(5, 0.05) == []
    assert time.monotonic() - started >= 0.04
    assert q.take(5, 0) == []


def test_queue_put_blocks_while_full_until_woken() -> None:
    q = OpQueue(2, _marker)
    q.put(1)
    q.put(2)
    done = threading.Event()

    def producer() -> None:
        q.put(3)
        done.set()

    thread = threading.Thread(target=producer)
    thread.start()
    assert not done.wait(0.05)  # full: the producer waits
    assert q.take(1, 0) == [1]
    assert not done.wait(0.05)  # ... until the consumer lets it run
    q.wake()
    assert done.wait(2.0)
    thread.join()
    assert q.take(10, 0) == [2, 3]


def test_queue_take_waits_for_a_late_item() -> None:
    q = OpQueue(4, _marker)
    timer = threading.Timer(0.05, q.put, args=("late",))
    timer.start()
    assert q.take(3, 2.0) == ["late"]
    timer.join()


def test_new_urls_get_smallest_parent_depth_and_first_seen_ids(db_path: Path) -> None:
    root, deep = "http://d.example/", "http://d.example/deep"
    x, y, z, w_url = (f"http://d.example/{n}" for n in "xyzw")
    with MetadataStore.open(db_path) as store:
        with store.writer() as w:
            w.submit(FetchRecord(root, 1.0, PageType.HTML, 200, b"r" * 16, children=(deep,)))
            w.flush()
            # One batch: the depth-1 parent comes first, the depth-0 parent second.
            w.submit(FetchRecord(deep, 2.0, PageType.HTML, 200, b"d" * 16, children=(x, y)))
            w.submit(FetchRecord(root, 3.0, PageType.HTML, 200, b"q" * 16, children=(y, z),
                                 enqueue=((w_url, 2),)))
            w.submit(SetPending(root, (z, "http://d.example/dtd"), 3.0, "dtd"))
        conn = sqlite3.connect(db_path)
        got = conn.execute("SELECT url, depth, id FROM urls ORDER BY id").fetchall()
        conn.close()
    # Parents by increasing depth: root's children first (depth 1), then deep's (depth 2);
    # y is a child of both and keeps the smaller depth; the awaited DTD gets depth 0.
    assert got == [(root, 0, 1), (deep, 1, 2), (y, 1, 3), (z, 1, 4), (w_url, 1, 5),
                   (x, 2, 6), ("http://d.example/dtd", 0, 7)]


def test_child_lists_keep_order_duplicates_and_self_links_in_one_batch(db_path: Path) -> None:
    """Children resolve through one flat sequence per batch: each page still gets its own
    ordered list, duplicates and a link to itself included, even for a record given twice."""
    a, b, c = (f"http://o.example/{n}" for n in "abc")
    twice = FetchRecord(a, 1.0, PageType.HTML, 200, b"a" * 16, children=(b, c, b, a),
                        enqueue=((c, 2),))
    with MetadataStore.open(db_path) as store:
        with store.writer(batch_size=100, flush_interval_s=5.0) as w:
            w.submit(twice)
            w.submit(FetchRecord(b, 2.0, PageType.HTML, 200, b"b" * 16, children=(c, a)))
            w.submit(twice)
        ids = dict(zip((a, b, c), store.url_ids([a, b, c])))
        graph = store.export_graph()
        frontier = [r.url for r in store.frontier_rows()]
    row_of = {url: graph.indices[graph.indptr[i - 1]:graph.indptr[i]].tolist()
              for url, i in ids.items()}
    assert row_of[a] == [ids[b] - 1, ids[c] - 1, ids[b] - 1, ids[a] - 1]
    assert row_of[b] == [ids[c] - 1, ids[a] - 1]
    assert frontier == [c]
