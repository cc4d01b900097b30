"""The solve layer: the Boltzmann map F(pi) = softmax(Q_pi / alpha) in logit coordinates y = M(y)
(``boltzmann``); every Boltzmann fixed point pi = F(pi) that multistart damped iteration and Newton find,
and the self-play-optimal set Pi*_alpha (``fixed_points``); outward-rounded interval arithmetic
(``interval``) and the Krawczyk certificates and certified complete search built on it (``certify``);
and continuation over a grid of temperatures alpha (``sweep``). It imports ``model`` and ``util``.
"""

from ers_exact.solve.boltzmann import (
    LogitCoordinates,
    boltzmann_map,
    boltzmann_residual,
    logit_bound,
    softmax_policy,
)
from ers_exact.solve.fixed_points import FixedPoint, FixedPointSet, SolverConfig, solve_fixed_points
from ers_exact.solve.sweep import SweepResult, parse_alphas, sweep

__all__ = [
    "FixedPoint",
    "FixedPointSet",
    "LogitCoordinates",
    "SolverConfig",
    "SweepResult",
    "boltzmann_map",
    "boltzmann_residual",
    "logit_bound",
    "parse_alphas",
    "softmax_policy",
    "solve_fixed_points",
    "sweep",
]
