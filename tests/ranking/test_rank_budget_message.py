"""A stored graph too big for ``ranking.memory_budget_mb`` (DESIGN.md §5 "Scale"): the slices
are cut under the budget less the process's own resident set and the compiled kernel
(``rank_job.ranking_bytes``), and the error says so: the budget as configured, the resident
set subtracted, and a budget that does work when given."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest

from xyro.jobs.rank_job import KERNEL_BYTES, RankParams, process_rss_bytes, rank_stream

N = 2_000_000


@dataclass
class _Stream:
    n: int
    xml_mask: np.ndarray
    chunks: object


@contextmanager
def _links(max_links: int) -> Iterator[_Stream]:
    """A chain over every third page of N pages, one chunk: the store's stream, in form."""
    rows = np.arange(0, N, 3, dtype=np.int64)
    mask = np.zeros(N, bool)
    mask[::5] = True
    yield _Stream(N, mask, iter([(rows, np.ones(len(rows), np.int64), (rows + 1) % N)]))


def test_the_message_names_the_configured_budget_and_a_budget_that_works() -> None:
    with pytest.raises(ValueError) as caught:
        rank_stream(_links, RankParams(memory_budget_bytes=48 << 20))
    rss_mb = process_rss_bytes() / 2**20
    message = str(caught.value)
    assert message.startswith("ranking.memory_budget_mb = 48 is too small to rank "
                              f"{N:,} pages out of core"), message
    held = float(re.search(r"already holds (\d+) MB \(its resident set\)", message)[1])
    assert abs(held - rss_mb) <= 0.25 * rss_mb + 8, (held, rss_mb)
    assert f"the compiled sweeps take {KERNEL_BYTES >> 20} MB" in message
    enough = int(re.search(r"set ranking\.memory_budget_mb to at least (\d+)", message)[1])
    assert enough > 48
    report = rank_stream(_links, RankParams(memory_budget_bytes=enough << 20))
    assert report.out_of_core and len(report.importance) == N
    assert abs(report.importance.mean() - 1.0) < 1e-9
