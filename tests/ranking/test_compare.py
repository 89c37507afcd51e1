"""ranking.compare: the metrics of OPIC's estimate against the offline ranking (DESIGN.md §5),
on vectors small enough to check by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ranking.compare import TOP_K, compare_rankings, l1_distance


def test_hand_checked_three_pages() -> None:
    # a = (.5, .3, .2), b = (.4, .4, .2):
    #   L1 = .1 + .1 + 0 = .2; mean relative error = (.1/.4 + .1/.4 + 0)/3 = 1/6;
    #   Kendall tau-b: pairs (0,1) tied in b, (0,2) and (1,2) concordant, so
    #   (C - D)/sqrt((n0 - ties_a)(n0 - ties_b)) = 2/sqrt(3*2)
    got = compare_rankings([0.5, 0.3, 0.2], [0.4, 0.4, 0.2])
    assert got["pages"] == 3
    assert got["l1"] == pytest.approx(0.2)
    assert got["mean_relative_error"] == pytest.approx(1 / 6)
    assert got["kendall_tau"] == pytest.approx(2 / math.sqrt(6))
    assert got["kendall_tau_pages"] == 3 and got["kendall_tau_sampled"] is False
    assert got["top_k"] == 3 and got["top_k_overlap"] == 1.0


def test_each_vector_is_renormalized_over_the_pages_given() -> None:
    # (1, 3) -> (.25, .75) against (.5, .5): L1 = .5, relative errors .5 and .5
    got = compare_rankings([1.0, 3.0], [7.0, 7.0])
    assert got["l1"] == pytest.approx(0.5)
    assert got["mean_relative_error"] == pytest.approx(0.5)
    assert got["kendall_tau"] is None  # a constant reference has no order
    assert compare_rankings(np.array([5.0, 3.0, 2.0]) * 9, [0.4, 0.4, 0.2]) == \
        compare_rankings([0.5, 0.3, 0.2], [4.0, 4.0, 2.0])
    assert l1_distance([1.0, 3.0], [2.0, 2.0]) == pytest.approx(0.5)


def test_reversed_order_and_disjoint_top_k() -> None:
    got = compare_rankings([0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], top_k=2)
    assert got["kendall_tau"] == pytest.approx(-1.0)
    assert got["top_k"] == 2 and got["top_k_overlap"] == 0.0  # {3, 2} against {0, 1}
    assert got["l1"] == pytest.approx(0.8)  # .3 + .1 + .1 + .3


def test_top_100_overlap_with_ties_to_the_lower_index() -> None:
    a = np.arange(1.0, 151.0)                 # top 100: indices 50..149
    b = a.copy()
    b[140:] = 0.5                             # top 100: indices 40..139
    got = compare_rankings(a, b)
    assert TOP_K == 100 and got["top_k"] == 100
    assert got["top_k_overlap"] == pytest.approx(90 / 100)   # indices 50..139
    # equal values: the lower indices win, so a constant vector's top 2 is {0, 1}
    assert compare_rankings([1.0, 1.0, 1.0, 1.0], [4.0, 3.0, 2.0, 1.0],
                            top_k=2)["top_k_overlap"] == 1.0
    assert compare_rankings([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0],
                            top_k=2)["top_k_overlap"] == 0.0


def test_identical_vectors() -> None:
    x = np.random.default_rng(3).random(500) + 0.01
    got = compare_rankings(x, x)
    assert got["l1"] == 0.0 and got["mean_relative_error"] == 0.0
    assert got["kendall_tau"] == pytest.approx(1.0) and got["top_k_overlap"] == 1.0


def test_one_page() -> None:
    got = compare_rankings([2.0], [3.0])
    assert got["pages"] == 1 and got["l1"] == 0.0 and got["top_k"] == 1
    assert got["kendall_tau"] is None and got["kendall_tau_pages"] == 1


def test_kendall_tau_on_a_seeded_sample_above_the_cap() -> None:
    rng = np.random.default_rng(11)
    ref = rng.random(3000) + 0.1
    est = ref * (1 + 0.3 * rng.standard_normal(3000)).clip(0.1)
    full = compare_rankings(est, ref)
    assert full["kendall_tau_pages"] == 3000 and not full["kendall_tau_sampled"]
    part = compare_rankings(est, ref, max_tau_pages=1000, seed=5)
    assert part["kendall_tau_pages"] == 1000 and part["kendall_tau_sampled"] is True
    assert part == compare_rankings(est, ref, max_tau_pages=1000, seed=5)  # reproducible
    assert part["kendall_tau"] == pytest.approx(full["kendall_tau"], abs=0.05)
    # the other metrics always use every page
    assert {k: part[k] for k in ("l1", "top_k_overlap", "mean_relative_error", "pages")} == \
        {k: full[k] for k in ("l1", "top_k_overlap", "mean_relative_error", "pages")}
    # identical orders stay exactly 1 on any sample
    assert compare_rankings(ref, ref, max_tau_pages=100)["kendall_tau"] == pytest.approx(1.0)


@pytest.mark.parametrize("estimate, reference, match", [
    ([[0.5, 0.5]], [[0.5, 0.5]], "1-D"),
    ([], [], "empty"),
    ([0.5, float("nan")], [0.5, 0.5], "NaN"),
    ([0.5, float("inf")], [0.5, 0.5], "NaN or infinite"),
    ([0.5, -0.1], [0.5, 0.5], "negative"),
    ([0.0, 0.0], [0.5, 0.5], "no mass"),
    ([0.5, 0.5], [0.0, 0.0], "reference sums to 0"),
    ([0.5, 0.5], [0.2, 0.3, 0.5], "same pages"),
    ([0.5, 0.5], [1.0, 0.0], "reference is 0 at page index 1"),
    (["a", "b"], [0.5, 0.5], "array of numbers"),
])
def test_bad_vectors_raise_value_error(estimate: object, reference: object,
                                       match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compare_rankings(estimate, reference)


@pytest.mark.parametrize("kwargs, match", [
    ({"top_k": 0}, "top_k=0"), ({"top_k": 2.5}, "top_k=2.5"), ({"top_k": True}, "top_k"),
    ({"max_tau_pages": 1}, "max_tau_pages=1"),
])
def test_bad_parameters_raise_value_error(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compare_rankings([0.5, 0.5], [0.5, 0.5], **kwargs)
