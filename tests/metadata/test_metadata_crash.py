"""SIGKILL in the middle of writer batches: the file stays sound and holds whole batches only.

A child process runs the real writer and submits tagged groups of fetches (every URL of
group b carries ``/b{b}/``), flushing after each group so that one group is one transaction;
it prints the number of each group it has seen committed. The test kills it with SIGKILL
after a random number of groups, i.e. while it is in the middle of the next group.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from metadata import MetadataStore

PAGES, KIDS = 40, 6

CHILD = f"""
import sys
from metadata import FetchRecord, MetadataStore, PageType
PAGES, KIDS = {PAGES}, {KIDS}
store = MetadataStore.open(sys.argv[1])
w = store.writer(batch_size=PAGES * 2, flush_interval_s=3600.0)
b = 0
while True:
    for i in range(PAGES):
        base = f"http://k{{i % 3}}.example/b{{b}}/p{{i}}"
        kids = tuple(f"{{base}}/c{{j}}" for j in range(KIDS))
        w.submit(FetchRecord(base, float(b), PageType.HTML, 200, b"%16d" % b,
                             children=kids, enqueue=tuple((k, 2) for k in kids)))
    w.flush()
    print(b, flush=True)
    b += 1
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_sigkill_mid_batch_leaves_whole_batches(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "crash.db"
    rng = random.Random(seed)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                            text=True)
    target = rng.randint(2, 25)
    committed = -1
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            committed = int(line)
            if committed >= target:
                break
        try:  # let it run a random few milliseconds more: the kill lands anywhere in a group
            proc.wait(timeout=rng.uniform(0.0, 0.05))
        except subprocess.TimeoutExpired:
            pass
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for line in proc.stdout:  # groups reported after we stopped reading
            committed = int(line)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert committed >= target, "the child died before reaching the kill point"

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    pages, links, frontier, children = {}, {}, {}, {}
    for tag, count in conn.execute(
            "SELECT CAST(substr(url, instr(url, '/b') + 2) AS INTEGER), count(*) "
            "FROM urls WHERE type = 'html' GROUP BY 1"):
        pages[tag] = count
    for tag, count in conn.execute(
            "SELECT CAST(substr(url, instr(url, '/b') + 2) AS INTEGER), count(*) "
            "FROM urls WHERE type = 'unread' GROUP BY 1"):
        children[tag] = count
    for tag, count, n in conn.execute(
            "SELECT CAST(substr(u.url, instr(u.url, '/b') + 2) AS INTEGER), "
            "count(*), sum(l.n) FROM links l JOIN urls u ON u.id = l.src GROUP BY 1"):
        links[tag] = (count, n)
    for tag, count in conn.execute(
            "SELECT CAST(substr(u.url, instr(u.url, '/b') + 2) AS INTEGER), count(*) "
            "FROM frontier f JOIN urls u ON u.id = f.url_id GROUP BY 1"):
        frontier[tag] = count
    conn.close()

    # every group the child saw committed is there, each one whole; nothing partial after it
    assert set(pages) >= set(range(committed + 1))
    assert max(pages) <= committed + 1
    for tag in pages:
        assert pages[tag] == PAGES, f"group {tag} is partial: {pages[tag]} of {PAGES} pages"
        assert children[tag] == PAGES * KIDS
        assert links[tag] == (PAGES, PAGES * KIDS)
        assert frontier[tag] == PAGES * KIDS
    assert set(children) == set(pages) == set(frontier)

    with MetadataStore.open(path) as store:  # and the store reopens and keeps working
        assert store.url_ids(["http://k0.example/b0/p0"], create=False) == [1]
