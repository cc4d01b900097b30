"""The results of :func:`ers_exact.solve.fixed_points.solve_fixed_points`: one Boltzmann fixed point pi = F(pi)
(``FixedPoint``) and the set found at one temperature alpha with how it was found (``FixedPointSet``,
Pi^alpha as found and its self-play-optimal part Pi*_alpha)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.solve.config import SolverConfig
from ers_exact.solve.continuation import ContinuationResult

__all__ = ["COMPLETE_SCOPE", "FixedPoint", "FixedPointSet"]


@dataclass(frozen=True)
class FixedPoint:
    """One Boltzmann fixed point pi = F(pi).

    ``residual`` is max |F(pi) - pi| over agents, histories and actions on float64 probabilities: pi(y) and
    F(pi) = pi(M(y)), each by a shifted log-sum-exp (``LogitCoordinates.residual``). It is *not* the measure
    by which the solver accepted the point, which is relative in the logits y: ||M(y) - y||_inf <= tol *
    max(1, ||y||_inf) (``SolverConfig.tol``, 1e-11). At low temperature the two differ: a logit error at an
    action whose probability is 0 or 1 to float64 moves no probability, so ``residual`` is 0.0 however large
    that error, while one at a logit near 0 moves pi by about pi (1 - pi) times it. Three-lever at alpha 1e-4 (32 starts, seed 1),
    logits up to 1.5e4: 0.0 beside a logit error of 4.3e-8 (the exact value is below 1e-300), and 1.35e-8
    from an error of 5.4e-8 at a logit near 0 (relative 5.4e-12, within the solver's tolerance)."""

    policy: tuple[np.ndarray, ...] = field(repr=False)
    y: np.ndarray = field(repr=False)
    J: float
    residual: float  # max |F(pi) - pi| on probabilities (class docstring), not the solver's logit measure
    spectral_radius: float  # of DM at the point
    stable: bool
    certified: bool | None  # None: not attempted
    optimal: bool
    basin: int  # multistart Newton runs (two per start) that converged here
    method: str = "multistart"  # who found it: "multistart", "continuation", ... joined by "+"
    branch: int | None = None  # continuation branch it lies on (ContinuationResult.branches), if any

    def to_json(self, with_policy: bool = False) -> dict[str, Any]:
        out = {
            "J": self.J,
            "residual": self.residual,
            "spectral_radius": self.spectral_radius,
            "stable": self.stable,
            "certified": self.certified,
            "optimal": self.optimal,
            "basin": self.basin,
            "method": self.method,
            "branch": self.branch,
            "root_policy": [p[0].tolist() for p in self.policy],
        }
        if with_policy:
            out["policy"] = [p.tolist() for p in self.policy]
        return out


#: what ``FixedPointSet.complete`` is about (also in its JSON, beside ``complete``)
COMPLETE_SCOPE = "all Boltzmann fixed points (Pi^alpha); Pi*_alpha (J >= J* - eps) is proven complete by `ers-exact optimal-set`"


@dataclass(frozen=True)
class FixedPointSet:
    """The fixed points found at one alpha, and how they were found."""

    game: str
    horizon: int
    alpha: float
    points: tuple[FixedPoint, ...]
    config: SolverConfig
    n_starts: int
    converged_starts: int
    complete: bool  # every fixed point of Pi^alpha is listed (proven); not about Pi*_alpha, see optimal_set
    completeness: str  # how completeness was (or was not) established
    seconds: float
    method: str = (
        "multistart damped iteration + batched Newton (exact Jacobian) in logit coordinates; "
        "continuation from lambda = 0 with branch switching; Krawczyk certificates"
    )
    continuation: ContinuationResult | None = None
    # distinct near-roots left out of ``points``: residual below tol, but Newton's step above step_tol there and
    # still shrinking the residual (converging linearly, as to a singular root at a bifurcation), with no listed
    # point within their convergence radius (SolverConfig.near_radius): not resolved in float64
    unconverged: int = 0

    @property
    def J_star(self) -> float:
        """The best J among the points found: J* where ``complete``, else a lower bound on it (the points not
        found may hold a better one; ``optimal_set`` proves J* and Pi*)."""
        return max(p.J for p in self.points) if self.points else float("nan")

    @property
    def optimal_points(self) -> tuple[FixedPoint, ...]:
        """Pi*_alpha as found: the points whose J is within optimal_tol (times the reward spread) of the best."""
        return tuple(p for p in self.points if p.optimal)

    def to_json(self, with_policy: bool = False) -> dict[str, Any]:
        return {
            "game": self.game,
            "horizon": self.horizon,
            "alpha": self.alpha,
            "J_star": self.J_star,
            "n_fixed_points": len(self.points),
            "n_optimal": len(self.optimal_points),
            "fixed_points": [p.to_json(with_policy) for p in self.points],
            "n_starts": self.n_starts,
            "converged_starts": self.converged_starts,
            "n_unconverged": self.unconverged,
            "complete": self.complete,
            "complete_scope": COMPLETE_SCOPE,
            "n_fixed_points_is": "exact" if self.complete else "lower bound",
            "completeness": self.completeness,
            "seconds": round(self.seconds, 4),
            "method": self.method,
            "continuation": self.continuation.to_json() if self.continuation is not None else None,
            "config": self.config.to_json(),
        }
