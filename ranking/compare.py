"""How close two importance vectors are: OPIC's estimate against the offline ranking of the
same graph (DESIGN.md §5 "OPIC"; the papers' convergence experiment, 000 §4 and 004 §4).

Pure: arrays in, a dict out, no I/O. ``estimate`` (a, e.g. OPIC's inflow estimate) and
``reference`` (b, e.g. the ``teleport`` PageRank of ``ranking.importance``, OPIC's fixpoint)
hold the values of the same n pages in the same order. Both are first renormalized to sum 1
over these n pages (so restricting two rankings to the pages they share compares their
shapes, not the mass that lies elsewhere). Then, with the normalized a and b:

- ``pages``: n;
- ``l1``: the L1 distance Σ|a_i − b_i|, in [0, 2] (DESIGN.md §5 quotes OPIC's error in it:
  "L1 error 1.1 %" is 0.011);
- ``kendall_tau``: Kendall's τ-b of a and b (``scipy.stats.kendalltau``, ties counted as τ-b
  does), in [−1, 1]; None when undefined (n < 2, or one vector constant). Above
  ``max_tau_pages`` pages it is computed on a uniform random sample of that many pages
  drawn with ``seed`` (reproducible); ``kendall_tau_pages`` says on how many pages it was
  computed and ``kendall_tau_sampled`` whether that was a sample;
- ``top_k`` and ``top_k_overlap``: k = min(``top_k``, n) and |top_k(a) ∩ top_k(b)| / k,
  top_k(x) being the k pages with the largest x_i, ties to the lower index;
- ``mean_relative_error``: (1/n)·Σ |a_i − b_i| / b_i (DESIGN.md §5: "mean relative error
  3.5 %" is 0.035). It needs b_i > 0 everywhere, which the teleport PageRank gives: every
  page gets at least (1 − c)/N.

Bad input (shapes, NaN, negative values, no mass, a zero in the reference) raises
ValueError saying which argument and what to pass instead.
"""

from __future__ import annotations

import math

import numpy as np

TOP_K = 100
MAX_TAU_PAGES = 200_000


def _vector(values: object, name: str) -> np.ndarray:
    """``values`` as a float64 vector summing to 1; ValueError if that is impossible."""
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers ({exc})") from None
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of per-page values, got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} is empty: there are no pages to compare")
    if not bool(np.all(np.isfinite(x))):
        raise ValueError(f"{name} holds NaN or infinite values; pass finite importances")
    if bool(np.any(x < 0)):
        raise ValueError(f"{name} holds negative values ({float(x.min())!r}); importances "
                         "must be >= 0")
    total = float(x.sum())
    if not (total > 0 and math.isfinite(total)):
        raise ValueError(f"{name} sums to {total}: it has no mass to renormalize over "
                         f"these {x.size} pages")
    return x / total


def _positive_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def normalized_pair(estimate: object, reference: object) -> tuple[np.ndarray, np.ndarray]:
    """Both vectors checked and renormalized to sum 1 (module doc); ValueError if unusable."""
    a = _vector(estimate, "estimate")
    b = _vector(reference, "reference")
    if a.shape != b.shape:
        raise ValueError(f"estimate has {a.size} pages but reference has {b.size}: pass the "
                         "values of the same pages, in the same order")
    return a, b


def l1_distance(estimate: object, reference: object) -> float:
    """Σ|a_i − b_i| of the two vectors renormalized to sum 1 (module doc)."""
    a, b = normalized_pair(estimate, reference)
    return float(np.abs(a - b).sum())


def top_indices(x: np.ndarray, k: int) -> np.ndarray:
    """The k indices of the largest values, ties to the lower index."""
    return np.argsort(-x, kind="stable")[:k]


def compare_rankings(estimate: object, reference: object, *, top_k: int = TOP_K,
                     max_tau_pages: int = MAX_TAU_PAGES,
                     seed: int = 0) -> dict[str, float | int | bool | None]:
    """The metrics of the module doc for ``estimate`` against ``reference``."""
    a, b = normalized_pair(estimate, reference)
    top_k = _positive_int(top_k, "top_k", 1)
    max_tau_pages = _positive_int(max_tau_pages, "max_tau_pages", 2)
    if bool(np.any(b <= 0)):
        zero = int(np.flatnonzero(b <= 0)[0])
        raise ValueError(f"reference is 0 at page index {zero}: the relative error needs a "
                         "positive reference everywhere (use the teleport PageRank, or drop "
                         "the pages it gives no mass)")
    n = a.size
    diff = np.abs(a - b)
    k = min(top_k, n)
    overlap = np.intersect1d(top_indices(a, k), top_indices(b, k)).size
    tau, tau_pages, sampled = _kendall(a, b, max_tau_pages, seed)
    return {"pages": n, "l1": float(diff.sum()), "kendall_tau": tau,
            "kendall_tau_pages": tau_pages, "kendall_tau_sampled": sampled,
            "top_k": k, "top_k_overlap": overlap / k,
            "mean_relative_error": float((diff / b).mean())}


def _kendall(a: np.ndarray, b: np.ndarray, max_pages: int,
             seed: int) -> tuple[float | None, int, bool]:
    """Kendall's τ-b, on a seeded sample of ``max_pages`` pages when there are more."""
    n = a.size
    sampled = n > max_pages
    if sampled:
        pick = np.sort(np.random.default_rng(seed).choice(n, size=max_pages, replace=False))
        a, b = a[pick], b[pick]
    if a.size < 2:
        return None, int(a.size), sampled
    # Imported here: scipy.stats costs ~1 s to import, and every CLI command and the
    # daemon load this module; only a comparison needs it.
    from scipy.stats import kendalltau

    tau = float(kendalltau(a, b).statistic)
    return (None if math.isnan(tau) else tau), int(a.size), sampled
