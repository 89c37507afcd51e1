"""Records returned by the ranking solvers, the progress report, and the convergence error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankResult:
    """A converged ranking vector.

    ``values``: direct importance is 1-normalized (sum 1); inverse interest is the solution of
    its linear system (unscaled). ``residual`` is the last L1 change between successive
    sweeps (see ``ranking.sweep``), ``residuals`` one per sweep; ``seconds`` wall time.
    """

    values: np.ndarray
    iterations: int
    residual: float
    residuals: tuple[float, ...]
    seconds: float
    method: str


@dataclass(frozen=True)
class SweepProgress:
    """Reported after every sweep: which ranking, sweep number (1-based), its residual."""

    ranking: str
    iteration: int
    residual: float


ProgressFn = Callable[[SweepProgress], None]


class ConvergenceError(RuntimeError):
    """The iteration hit ``max_iter`` sweeps before the residual fell below ``tol``."""

    def __init__(self, ranking: str, iterations: int, residual: float, tol: float,
                 residuals: tuple[float, ...]) -> None:
        super().__init__(
            f"{ranking} did not converge: residual {residual:.3e} after {iterations} sweeps "
            f"is above tol {tol:.1e}; raise max_iter or tol, or lower the damping")
        self.ranking = ranking
        self.iterations = iterations
        self.residual = residual
        self.tol = tol
        self.residuals = residuals
