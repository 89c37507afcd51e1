"""The one-host out-of-core ranking gives what it gave before its slices went through the
slice-level kernel (``ranking.slice_sweep``), the one a cluster worker calls too.

``data/outofcore_golden.npz`` holds the results of ``rank_out_of_core`` at commit 638bca7
(before the kernel) on the graph below, for each case: importance, interest and the
residual of every sweep. The sweep is deterministic (point Gauss-Seidel in page order, the
same numba kernel), so the results must agree to 1e-12 in L1 and the sweep counts exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ranking.outofcore import rank_out_of_core
from ranking.slices import ArrayCsrSource, SliceStore
from ranking.sweep import SolverParams

GOLDEN = Path(__file__).with_name("data") / "outofcore_golden.npz"


def _cases(n: int) -> dict[str, tuple[str, bool, np.ndarray, np.ndarray | None]]:
    xml = np.random.default_rng(2).random(n) < 0.1
    return {"paper_uniform": ("paper", False, xml, None),
            "teleport_xml_importance": ("teleport", True, xml, None),
            "paper_personalized": ("paper", False, xml,
                                   np.random.default_rng(5).random(n) + 0.1),
            "no_xml": ("paper", False, np.zeros(n, dtype=bool), None)}


@pytest.mark.parametrize("case", ["paper_uniform", "teleport_xml_importance",
                                  "paper_personalized", "no_xml"])
def test_one_host_out_of_core_is_unchanged(tmp_path: Path, make_graph, case: str) -> None:
    graph = make_graph(2, n=3000, m=30000)
    dangling, from_importance, mask, personalization = _cases(graph.n)[case]
    store = SliceStore.build(ArrayCsrSource(graph.indptr, graph.indices), tmp_path, 200_000,
                             chunk_links=5000)
    assert store.count == 8
    got = rank_out_of_core(store, mask, SolverParams(tol=1e-10, max_iter=500),
                           dangling=dangling, interest_from_importance=from_importance,
                           personalization=personalization)
    with np.load(GOLDEN) as golden:
        for name, result in (("importance", got.importance), ("interest", got.interest)):
            want = golden[f"{case}_{name}"]
            assert np.abs(result.values - want).sum() <= 1e-12, name
            residuals = golden[f"{case}_{name}_residuals"]
            assert result.iterations == (len(residuals) if len(residuals) else 0)
            np.testing.assert_allclose(result.residuals, residuals, rtol=1e-9, atol=0)
