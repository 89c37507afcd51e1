"""Inverse ranking: interest of HTML pages for reaching XML (003 §5.2, DESIGN.md §5).

    x = c·Mᵗ·x + (1−c)·E′,   (Mᵗx)_i = (1/OutDeg(i))·Σ_{j ∈ Out(i)} x_j

E′_i = 1/N_XML on XML pages, 0 elsewhere; the variant E″ is the direct importance restricted
to XML pages and renormalized. x_i is the discounted chance that a random surfer leaving page
i reaches XML pages. Pages without out-links get x_i = (1−c)·E′_i. Mᵗ is row-stochastic (not
column-stochastic), so this is solved as the linear system above, without the eq. 7
renormalization (which would move the fixpoint); the caller rescales to mean 1.

Note: the paper's naive loop (§5.3) divides sourcePR′_j by OutDeg(j), the out-degree of the
link's destination; that is not the matrix Mᵗ it defines. We follow the matrix: the sum over a
page's out-links is divided by that page's own out-degree.
"""

from __future__ import annotations

import numpy as np

from ranking.graph import LinkGraph
from ranking.importance import personalization_vector
from ranking.results import ProgressFn, RankResult
from ranking.sweep import Fixpoint, SolverParams, solve_fixpoint


def check_xml_mask(xml_mask: object, n: int) -> np.ndarray:
    mask = np.asarray(xml_mask)
    if mask.shape != (n,):
        raise ValueError(f"xml_mask has shape {mask.shape}, expected ({n},) for n={n} pages")
    if mask.dtype != np.bool_:
        raise ValueError(f"xml_mask must be a bool array, got dtype {mask.dtype}")
    if not bool(mask.any()):
        raise ValueError("xml_mask marks no XML page: interest (reaching XML) is undefined")
    return mask


def interest_personalization(xml_mask: object, importance: object | None = None) -> np.ndarray:
    """E′ (uniform over XML pages) or, given the direct importance, E″ (normalized)."""
    mask = check_xml_mask(xml_mask, len(np.asarray(xml_mask)))
    if importance is None:
        return mask / float(mask.sum())
    weights = np.where(mask, np.asarray(importance, dtype=np.float64), 0.0)
    return np.asarray(personalization_vector(len(mask), weights))


def interest_fixpoint(graph: LinkGraph, damping: float, e: np.ndarray) -> Fixpoint:
    """The inverse equation: rows = sources of links, sum scaled by 1/OutDeg(row)."""
    return Fixpoint("interest", None, graph.inverse_out_degree(), (1.0 - damping) * e,
                    normalize=False)


def inverse_interest(graph: LinkGraph, xml_mask: object, params: SolverParams = SolverParams(),
                     *, importance: object | None = None,
                     progress: ProgressFn | None = None) -> RankResult:
    """Interest x of every page (unscaled). ``importance`` given: use E″ instead of E′."""
    check_xml_mask(xml_mask, graph.n)
    e = interest_personalization(xml_mask, importance)
    fixpoint = interest_fixpoint(graph, params.damping, e)
    return solve_fixpoint(graph.indptr, graph.indices, fixpoint, e.copy(), params, progress)
