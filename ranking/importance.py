"""Direct importance: PageRank with the paper's normalization (003 §5.1, eq. 5–7).

    PR_{k+1} = r_k·(c·M·PR_k + (1−c)·E),   r_k = ‖PR_k‖₁ / ‖c·M·PR_k + (1−c)·E‖₁

with M[i, j] = 1/OutDeg(j) when j links to i, c the damping and E the personalization
(uniform 1/N by default), PR_0 = E. Pages without out-links lose their mass; r_k puts it back
spread in proportion to the current vector, so ‖PR‖₁ = 1 throughout ("paper" variant). The
fixpoint is the Perron vector of c·M + (1−c)·E·1ᵀ.

``dangling="teleport"``: the mass of pages without out-links is spread along E, as networkx
and igraph do: PR = c·M·PR + (c·dᵀPR + 1−c)·E, swept in this normalized form with the
dangling mass δ = dᵀPR kept current (``ranking.sweep``, as PRPACK does).

Units: values are probabilities (sum 1); the refresh planner's importance is N·PR_i (mean 1).
"""

from __future__ import annotations

import math

import numpy as np

from ranking.graph import LinkGraph
from ranking.results import ProgressFn, RankResult
from ranking.sweep import Fixpoint, SolverParams, solve_fixpoint

DANGLING_MODES = ("paper", "teleport")


def personalization_vector(n: int, personalization: object | None) -> np.ndarray | float:
    """E normalized to sum 1, or the scalar 1/n when None (uniform). ValueError if unusable."""
    if personalization is None:
        return 1.0 / n
    e = np.asarray(personalization, dtype=np.float64)
    if e.shape != (n,):
        raise ValueError(f"personalization has shape {e.shape}, expected ({n},) for n={n} pages")
    if not bool(np.all(np.isfinite(e))):
        raise ValueError("personalization holds NaN or infinite values; give finite weights")
    if bool(np.any(e < 0)):
        raise ValueError("personalization holds negative weights; weights must be >= 0")
    total = float(e.sum())
    if not (total > 0 and math.isfinite(total)):
        raise ValueError(f"personalization sums to {total}; it needs positive finite mass")
    return e / total


def check_dangling(dangling: str) -> None:
    if dangling not in DANGLING_MODES:
        raise ValueError(f"dangling={dangling!r} is unknown; use one of {DANGLING_MODES}")


def importance_fixpoint(graph: LinkGraph, damping: float, e: np.ndarray | float,
                        dangling: str) -> Fixpoint:
    """The direct equation: rows = destinations, vector pre-scaled by 1/OutDeg(source)."""
    inverse_degree = graph.inverse_out_degree()
    return Fixpoint("importance", inverse_degree, None, (1.0 - damping) * e, normalize=True,
                    dangling=inverse_degree == 0, spread_along_x=dangling == "paper")


def direct_importance(graph: LinkGraph, params: SolverParams = SolverParams(), *,
                      personalization: object | None = None, dangling: str = "paper",
                      progress: ProgressFn | None = None,
                      in_links: LinkGraph | None = None) -> RankResult:
    """Importance of every page (sum 1), in memory. ``in_links``: a prebuilt transpose
    of ``graph``."""
    check_dangling(dangling)
    e = personalization_vector(graph.n, personalization)
    pattern = in_links if in_links is not None else graph.transpose()
    x0 = np.full(graph.n, e) if isinstance(e, float) else e.copy()
    fixpoint = importance_fixpoint(graph, params.damping, e, dangling)
    result = solve_fixpoint(pattern.indptr, pattern.indices, fixpoint, x0, params, progress)
    if dangling == "teleport":
        values = result.values
        values /= values.sum()
    return result
