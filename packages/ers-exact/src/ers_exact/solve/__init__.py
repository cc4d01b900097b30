"""The solve layer: the Boltzmann map F(pi) = softmax(Q_pi / alpha) in logit coordinates y = M(y)
(``boltzmann``); M and its exact Jacobian from one forward and one backward pass, also over interval boxes
(``derivatives`` on its per-tree index ``logit_structure``, ``interval_array``); batched Newton
(``newton``); every Boltzmann fixed point pi = F(pi) that multistart and continuation find, and the
self-play-optimal set Pi*_alpha (``fixed_points``, its results in ``fixed_point_result``); Pi*_alpha proven complete by a certified
branch-and-bound (``optimal_set``, over probability-space box enclosures ``box_enclosure`` and batched
Krawczyk tests ``krawczyk_batch``); branches traced in the temperature from lambda = 0 with branch
switching at bifurcations (``continuation``); outward-rounded interval arithmetic (``interval``) and the
Krawczyk certificates and certified complete search built on it (``certify``); and a grid of temperatures
alpha (``sweep``). ``config`` holds the solver's settings (light: the command line reads them without
loading numpy or scipy); every name here is imported on first use. It imports ``model`` and ``util``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.solve.boltzmann import (
        LogitCoordinates,
        boltzmann_map,
        boltzmann_residual,
        logit_bound,
        softmax_policy,
    )
    from ers_exact.solve.config import (
        DEFAULT_MEMORY_BUDGET,
        ContinuationConfig,
        OptimalSetConfig,
        SolverConfig,
        parse_alphas,
    )
    from ers_exact.solve.continuation import Branch, ContinuationResult, continuation
    from ers_exact.solve.derivatives import LogitDerivatives, MemoryBudgetError
    from ers_exact.solve.fixed_point_result import FixedPoint, FixedPointSet
    from ers_exact.solve.fixed_points import solve_fixed_points
    from ers_exact.solve.optimal_set import certified_optimal_set
    from ers_exact.solve.optimal_set_result import CertifiedFixedPoint, OptimalSetResult
    from ers_exact.solve.sweep import SweepResult, sweep

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "Branch",
    "CertifiedFixedPoint",
    "ContinuationConfig",
    "ContinuationResult",
    "FixedPoint",
    "FixedPointSet",
    "LogitCoordinates",
    "LogitDerivatives",
    "MemoryBudgetError",
    "OptimalSetConfig",
    "OptimalSetResult",
    "SolverConfig",
    "SweepResult",
    "boltzmann_map",
    "boltzmann_residual",
    "certified_optimal_set",
    "continuation",
    "logit_bound",
    "parse_alphas",
    "softmax_policy",
    "solve_fixed_points",
    "sweep",
]

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "LogitCoordinates": "boltzmann",
            "boltzmann_map": "boltzmann",
            "boltzmann_residual": "boltzmann",
            "logit_bound": "boltzmann",
            "softmax_policy": "boltzmann",
            "Branch": "continuation",
            "ContinuationConfig": "config",
            "ContinuationResult": "continuation",
            "continuation": "continuation",
            "DEFAULT_MEMORY_BUDGET": "config",
            "LogitDerivatives": "derivatives",
            "MemoryBudgetError": "derivatives",
            "FixedPoint": "fixed_point_result",
            "FixedPointSet": "fixed_point_result",
            "SolverConfig": "config",
            "OptimalSetConfig": "config",
            "CertifiedFixedPoint": "optimal_set_result",
            "OptimalSetResult": "optimal_set_result",
            "certified_optimal_set": "optimal_set",
            "solve_fixed_points": "fixed_points",
            "SweepResult": "sweep",
            "parse_alphas": "config",
            "sweep": "sweep",
        },
    )
