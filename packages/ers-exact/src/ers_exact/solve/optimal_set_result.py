"""The result types of :func:`~ers_exact.solve.optimal_set.certified_optimal_set`: one certified fixed point
(a box proven to hold exactly it, J enclosed over the box) and the optimal set Pi*_alpha with its proof status
(``complete``, eps, the region covered, what is left unexplored); both serialise to JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.solve.config import OptimalSetConfig

__all__ = ["CertifiedFixedPoint", "OptimalSetResult"]


@dataclass(frozen=True)
class CertifiedFixedPoint:
    """A fixed point proven to be the only one in the box [box_lo, box_hi] of logits."""

    policy: tuple[np.ndarray, ...] = field(repr=False)
    y: np.ndarray = field(repr=False)  # the polished point (inside the box)
    box_lo: np.ndarray = field(repr=False)
    box_hi: np.ndarray = field(repr=False)
    J: float  # at the polished point
    J_lo: float  # J enclosed over the box
    J_hi: float
    residual: float  # max |F(pi) - pi| at the polished point
    optimal: bool  # J_hi >= J*_lo - eps: in the eps-optimal set (not excluded from it)
    found_by: str  # "candidate" (the solver found it) or "search" (only the branch-and-bound did)

    def to_json(self, with_policy: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "J": self.J,
            "J_enclosure": [self.J_lo, self.J_hi],
            "residual": self.residual,
            "certified": True,
            "optimal": self.optimal,
            "found_by": self.found_by,
            "box_width": float(np.max(self.box_hi - self.box_lo, initial=0.0)),
            "root_policy": [p[0].tolist() for p in self.policy],
        }
        if with_policy:
            out["policy"] = [p.tolist() for p in self.policy]
        return out


@dataclass(frozen=True)
class OptimalSetResult:
    """The certified search's outcome: the fixed points with J >= J* - eps and whether the list is complete."""

    game: str
    horizon: int
    alpha: float
    eps: float
    points: tuple[CertifiedFixedPoint, ...]  # every root with J_hi >= L - eps, best first
    J_star_lo: float  # J*_alpha lies in [J_star_lo, J_star_hi] when complete (else >= J_star_lo)
    J_star_hi: float
    complete: bool
    region: str
    boxes: int  # boxes examined
    boxes_left: int
    volume_left: float  # share of the domain (logistic measure) in the boxes left
    pruned: dict[str, int]  # boxes closed by each test
    candidates: int  # fixed points the solver found (all J)
    candidates_certified: int
    seconds: float
    note: str
    config: OptimalSetConfig
    reductions: tuple[str, ...] = ()  # proven reductions of the search (equivalence ties, symmetry domain)
    method: str = (
        "certified branch-and-bound over |y| <= B/alpha: probability-space enclosures of M and J, "
        "contraction Y <- Y n M(Y), value bound J < J* - eps, batched Krawczyk tests, bisection"
    )

    @property
    def optimal_points(self) -> tuple[CertifiedFixedPoint, ...]:
        """Pi*_alpha up to eps: the certified fixed points not excluded from J >= J* - eps."""
        return tuple(p for p in self.points if p.optimal)

    def to_json(self, with_policy: bool = False) -> dict[str, Any]:
        return {
            "game": self.game,
            "horizon": self.horizon,
            "alpha": self.alpha,
            "eps": self.eps,
            "J_star": [self.J_star_lo, self.J_star_hi],
            "n_optimal": len(self.optimal_points),
            "complete": self.complete,
            "region": self.region,
            "points": [p.to_json(with_policy) for p in self.points],
            "boxes": self.boxes,
            "boxes_left": self.boxes_left,
            "volume_left": self.volume_left,
            "pruned": dict(self.pruned),
            "candidates": self.candidates,
            "candidates_certified": self.candidates_certified,
            "seconds": round(self.seconds, 4),
            "note": self.note,
            "reductions": list(self.reductions),
            "method": self.method,
            "config": self.config.to_json(),
        }
