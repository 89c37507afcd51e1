"""crawler.cpus pins every thread of the crawl process, running or started later."""

from __future__ import annotations

import os
import threading

import pytest

from xyro.affinity import pin_process
from xyro.errors import XyroError


@pytest.fixture
def restore_affinity():
    saved = {}
    for tid in (int(t) for t in os.listdir(f"/proc/{os.getpid()}/task")):
        try:
            saved[tid] = os.sched_getaffinity(tid)
        except ProcessLookupError:  # a thread of an earlier test ended after the listing
            pass
    yield
    for tid, cpus in saved.items():
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            pass
    os.sched_setaffinity(0, saved[threading.get_native_id()])


def test_pins_running_and_later_threads(restore_affinity) -> None:
    cpu = min(os.sched_getaffinity(0))
    release = threading.Event()
    before = threading.Thread(target=release.wait, daemon=True)
    before.start()
    pin_process([cpu])
    seen: list[set[int]] = []
    after = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
    after.start()
    after.join()
    assert os.sched_getaffinity(before.native_id) == {cpu}
    assert os.sched_getaffinity(0) == {cpu}
    assert seen == [{cpu}]
    release.set()


def test_a_cpu_the_process_may_not_use_is_a_clear_error(restore_affinity) -> None:
    missing = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(XyroError, match=r"crawler.cpus=\[\d+\] names CPUs"):
        pin_process([missing])
