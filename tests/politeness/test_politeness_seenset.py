"""The seen-set bit table T(h(u)) (xyro/crawl/seenset.py): sizing, FP rate measured, no false negatives."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from xyro.crawl.seenset import SeenSet


@pytest.mark.parametrize("n, p", [(1_000, 0.01), (100_000, 1e-3), (10_000_000, 1e-4)])
def test_size_matches_the_formula(n: int, p: float) -> None:
    s = SeenSet(n, p) if n <= 100_000 else None
    m = math.ceil(-n * math.log(p) / math.log(2) ** 2)
    assert SeenSet.bits_for(n, p) == m
    if s is not None:
        assert s.m_bits == m
        assert s.k == round(m / n * math.log(2))
        assert s.memory_bytes == (m + 7) // 8
        # about 1.44·log2(1/p) bits per URL
        assert s.memory_bytes * 8 / n == pytest.approx(-math.log2(p) / math.log(2), rel=0.01)


@pytest.mark.parametrize("p", [0.01, 1e-3])
def test_measured_false_positive_rate_is_near_the_target(p: float) -> None:
    n = 50_000 if p == 0.01 else 200_000
    s = SeenSet(n, p)
    inserted = [f"http://host{i % 997}.example/page/{i}" for i in range(n)]
    new = sum(s.add(u) for u in inserted)
    assert all(u in s for u in inserted)                        # never a false negative
    assert new >= n * (1 - 2 * p)                                # only FPs report "not new"
    probes = [f"http://host{i % 997}.example/other/{i}" for i in range(n)]
    measured = sum(u in s for u in probes) / n
    assert p / 1.5 <= measured <= p * 1.5, f"measured FP rate {measured} vs target {p}"
    assert s.estimated_fp_rate() == pytest.approx(p, rel=0.3)
    assert s.expected_fp_rate() == pytest.approx(p, rel=0.3)
    assert not s.over_capacity()


def test_add_reports_new_once_and_counts() -> None:
    s = SeenSet(100, 0.01)
    assert s.add("http://a/") is True
    assert s.add("http://a/") is False
    assert "http://a/" in s and "http://b/" not in s
    assert 42 not in s
    assert len(s) == 1
    assert 0 < s.fill_ratio() <= s.k / s.m_bits


def test_over_capacity_raises_the_estimated_rate() -> None:
    s = SeenSet(1_000, 0.01)
    for i in range(3_000):
        s.add(f"http://h/{i}")
    assert s.over_capacity()
    assert s.estimated_fp_rate() > 0.1


def test_concurrent_adds_count_each_url_once() -> None:
    s = SeenSet(20_000, 1e-4)
    urls = [f"http://h/{i}" for i in range(5_000)]
    results: list[int] = []

    def worker() -> None:
        results.append(sum(s.add(u) for u in urls))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == len(s) <= 5_000
    assert len(s) >= 5_000 - 5


@pytest.mark.parametrize("n, p, match", [(0, 0.01, "expected number"), (10, 0.0, "in \\(0, 1\\)"),
                                         (10, 1.0, "in \\(0, 1\\)")])
def test_bad_sizes_are_clear_errors(n: int, p: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SeenSet(n, p)


def test_add_many_sets_the_bits_add_sets_and_counts_the_new() -> None:
    # The start rebuilds the filter in batches: the same bit table as one add per URL, the
    # same fill, the same answers, with URLs already present counted as not new.
    urls = [f"http://host{i % 97}.example/page/{i}" for i in range(30_000)]
    one, batched = SeenSet(40_000, 1e-3), SeenSet(40_000, 1e-3)
    assert sum(one.add(u) for u in urls) == len(urls)
    assert batched.add_many(urls[:20_000]) == 20_000
    assert batched.add_many(urls[10_000:]) == 10_000               # half of these known
    assert batched.add_many([]) == 0
    assert bytes(batched._bits) == bytes(one._bits)
    assert len(batched) == len(one) and batched.fill_ratio() == one.fill_ratio()
    assert all(u in batched for u in urls[::7])
    assert batched.add(urls[5]) is False and batched.add("http://new.example/") is True
    assert batched.fill_ratio() == pytest.approx(one.fill_ratio(), abs=batched.k / batched.m_bits)


def test_positions_wrap_at_64_bits_alike() -> None:
    # h1 + i·h2 exceeds 2⁶⁴ for most URLs: the scalar and the batch positions must agree.
    s = SeenSet(1_000_003, 1e-6)
    urls = [f"http://h/{i}" for i in range(500)]
    assert s._batch_positions(urls).tolist() == [s._positions(u) for u in urls]


def _grants_anything() -> bool:
    knob = Path("/proc/sys/vm/overcommit_memory")
    return not knob.exists() or knob.read_text().strip() == "1"


@pytest.mark.skipif(_grants_anything(),
                    reason="the kernel grants any allocation (vm.overcommit_memory = 1)")
def test_a_seen_set_too_large_for_memory_is_a_clear_error() -> None:
    # crawler.expected_urls accepts up to 10^12: a seen-set of 1.7 TB is refused by the
    # kernel, and the crawl says so with the keys to change, not with numpy's traceback.
    from xyro.app import _seen_set
    from xyro.errors import XyroError

    with pytest.raises(XyroError, match=r"needs 1673\.\d GiB.*lower crawler.expected_urls"):
        _seen_set(10**12, 0, 1e-3)
