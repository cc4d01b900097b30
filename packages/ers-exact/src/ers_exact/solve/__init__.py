"""The solve layer: the Boltzmann map F(pi) = softmax(Q_pi / alpha) in logit coordinates y = M(y)
(``boltzmann``); M and its exact Jacobian from one forward and one backward pass, also over interval
boxes (``derivatives``, ``interval_array``); batched Newton (``newton``); every Boltzmann fixed point
pi = F(pi) that multistart and continuation find, and the self-play-optimal set Pi*_alpha
(``fixed_points``); branches traced in the temperature from lambda = 0 with branch switching at
bifurcations (``continuation``); outward-rounded interval arithmetic (``interval``) and the Krawczyk
certificates and certified complete search built on it (``certify``); and a grid of temperatures alpha
(``sweep``). It imports ``model`` and ``util``.
"""

from ers_exact.solve.boltzmann import (
    LogitCoordinates,
    boltzmann_map,
    boltzmann_residual,
    logit_bound,
    softmax_policy,
)
from ers_exact.solve.continuation import Branch, ContinuationConfig, ContinuationResult, continuation
from ers_exact.solve.derivatives import DEFAULT_MEMORY_BUDGET, LogitDerivatives, MemoryBudgetError
from ers_exact.solve.fixed_points import FixedPoint, FixedPointSet, SolverConfig, solve_fixed_points
from ers_exact.solve.sweep import SweepResult, parse_alphas, sweep

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "Branch",
    "ContinuationConfig",
    "ContinuationResult",
    "FixedPoint",
    "FixedPointSet",
    "LogitCoordinates",
    "LogitDerivatives",
    "MemoryBudgetError",
    "SolverConfig",
    "SweepResult",
    "boltzmann_map",
    "boltzmann_residual",
    "continuation",
    "logit_bound",
    "parse_alphas",
    "softmax_policy",
    "solve_fixed_points",
    "sweep",
]
