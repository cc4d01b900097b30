"""The result types of :func:`~ers_exact.solve.optimal_set.certified_optimal_set`: one certified fixed point
(a box proven to hold exactly it, J enclosed over the box) and the optimal set Pi*_alpha with its proof status
(``complete``, eps, the region covered, what is left unexplored); both serialise to JSON."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates, logit_bound
from ers_exact.solve.config import OptimalSetConfig, SolverConfig
from ers_exact.solve.fixed_point_result import FixedPointSet
from ers_exact.solve.newton import newton
from ers_exact.solve.optimal_set_boxes import sigmoid
from ers_exact.solve.optimal_set_roots import Roots

__all__ = ["CertifiedFixedPoint", "OptimalSetResult", "build_result"]


@dataclass(frozen=True)
class CertifiedFixedPoint:
    """A fixed point proven to be the only one in the box [box_lo, box_hi] of logits. ``policy``: pi^i per
    agent, a [histories x actions] table as in :class:`~ers_exact.solve.fixed_point_result.FixedPoint` (its
    JSON, with ``with_policy``, is a policy file that ``ers-exact value --policy`` reads)."""

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


def build_result(
    tree: HistoryTree,
    coords: LogitCoordinates,
    alpha: float,
    cfg: OptimalSetConfig,
    roots: Roots,
    found: FixedPointSet,
    n_cert: int,
    boxes: int,
    left_lo: np.ndarray,
    left_hi: np.ndarray,
    pruned: dict[str, int],
    B: float,
    start: float,
    reductions: tuple[str, ...] = (),
) -> OptimalSetResult:
    D = coords.dim
    best_lo = max((j[0] for j in roots.J), default=-np.inf)
    best_hi = max((j[1] for j in roots.J), default=-np.inf)
    keep = [r for r in range(len(roots.lo)) if roots.J[r][1] >= best_lo - cfg.eps]
    points = []
    if keep:
        mid = np.array([0.5 * (roots.lo[r] + roots.hi[r]) for r in keep]).reshape(len(keep), D)
        y, _ = (
            newton(coords, mid, alpha, SolverConfig().newton_settings, logit_bound(tree, alpha))
            if D
            else (mid, None)
        )
        for k, r in enumerate(keep):
            if D and not (np.all(y[k] >= roots.lo[r]) and np.all(y[k] <= roots.hi[r])):
                y[k] = mid[k]
        ev = coords.evaluate(y, alpha, jacobian=False)
        res = coords.residual(y, alpha, image=ev.values) if D else np.zeros(len(keep))
        pols = coords.to_policy(y)
        for k, r in enumerate(keep):
            points.append(
                CertifiedFixedPoint(
                    policy=tuple(p[k] for p in pols),
                    y=y[k],
                    box_lo=roots.lo[r],
                    box_hi=roots.hi[r],
                    J=float(ev.J[k]),
                    J_lo=roots.J[r][0],
                    J_hi=roots.J[r][1],
                    residual=float(res[k]),
                    optimal=bool(roots.J[r][1] >= best_lo - cfg.eps),
                    found_by=roots.by[r],
                )
            )
    points.sort(key=lambda p: -p.J)
    n_left = len(left_lo)
    if n_left:
        width = np.clip(sigmoid(left_hi) - sigmoid(left_lo), 1e-300, 1.0)
        total = np.clip(sigmoid(np.array(B)) - sigmoid(np.array(-B)), 1e-300, 1.0)
        volume = float(np.exp(np.log(width).sum(axis=1) - D * np.log(total)).sum())
    else:
        volume = 0.0
    complete = n_left == 0 and roots.ambiguous == 0 and roots.unmapped == 0 and bool(points)
    region = f"|y_d| <= B/alpha = {B:.6g} for all {D} logit coordinates (every fixed point lies there)"
    if complete:
        note = (
            f"certified complete: every fixed point with J >= J* - {cfg.eps:g} is listed "
            f"({len(points)} point(s), {boxes:,} boxes)"
        )
    else:
        why = [f"{n_left:,} box(es) left unexplored (volume share {volume:.3g})"] if n_left else []
        why += [f"{roots.ambiguous} overlapping root boxes not proven distinct"] if roots.ambiguous else []
        why += [f"{roots.unmapped} image(s) of roots not certified"] if roots.unmapped else []
        why += ["no certified fixed point"] if not points else []
        note = f"NOT proven complete after {boxes:,} boxes: " + "; ".join(why)
    return OptimalSetResult(
        game=tree.game.name,
        horizon=tree.game.horizon,
        alpha=float(alpha),
        eps=cfg.eps,
        points=tuple(points),
        J_star_lo=float(best_lo),
        J_star_hi=float(best_hi) if complete else float("inf"),
        complete=complete,
        region=region,
        boxes=boxes,
        boxes_left=n_left,
        volume_left=volume,
        pruned=pruned,
        candidates=len(found.points),
        candidates_certified=n_cert,
        seconds=time.perf_counter() - start,
        note=note,
        config=cfg,
        reductions=reductions,
    )
