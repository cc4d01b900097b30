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
    residual: float  # max |F(pi) - pi| on probabilities at the polished point (as FixedPoint.residual)
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
    volume_left: float  # share of the domain (logistic measure) in the boxes left (0.0 where it underflows)
    pruned: dict[str, int]  # boxes closed by each test
    candidates: int  # fixed points the solver found (all J)
    candidates_certified: int
    seconds: float
    note: str
    config: OptimalSetConfig
    reductions: tuple[str, ...] = ()  # proven reductions of the search (equivalence ties, symmetry domain)
    log10_volume_left: float = -np.inf  # log10 of volume_left, finite where volume_left underflows to 0
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
            "log10_volume_left": None if np.isinf(self.log10_volume_left) else self.log10_volume_left,
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
    """The :class:`OptimalSetResult` of a finished (or stopped) search: the certified roots whose J can reach
    the best lower bound J*_lo - eps, polished by Newton, with the search's counts and the boxes left open."""
    best_lo = max((j[0] for j in roots.J), default=-np.inf)
    best_hi = max((j[1] for j in roots.J), default=-np.inf)
    points = _certified_points(tree, coords, alpha, roots, best_lo - cfg.eps)
    n_left = len(left_lo)
    log10_volume = _log10_volume(left_lo, left_hi, B)
    volume = 10.0**log10_volume  # 0.0 where the share underflows; log10_volume_left keeps it
    complete = n_left == 0 and roots.ambiguous == 0 and roots.unmapped == 0 and bool(points)
    return OptimalSetResult(
        game=tree.game.name,
        horizon=tree.game.horizon,
        alpha=float(alpha),
        eps=cfg.eps,
        points=tuple(points),
        J_star_lo=float(best_lo),
        J_star_hi=float(best_hi) if complete else float("inf"),
        complete=complete,
        region=f"|y_d| <= B/alpha = {B:.6g} for all {coords.dim} logit coordinates (every fixed point lies there)",
        boxes=boxes,
        boxes_left=n_left,
        volume_left=volume,
        log10_volume_left=log10_volume,
        pruned=pruned,
        candidates=len(found.points),
        candidates_certified=n_cert,
        seconds=time.perf_counter() - start,
        note=_note(complete, cfg.eps, roots, len(points), boxes, n_left, log10_volume),
        config=cfg,
        reductions=reductions,
    )


def _certified_points(
    tree: HistoryTree, coords: LogitCoordinates, alpha: float, roots: Roots, threshold: float
) -> list[CertifiedFixedPoint]:
    """The certified roots whose J enclosure reaches ``threshold`` (= J*_lo - eps), best J first: each polished
    by Newton from its box's centre (the centre where Newton leaves the box), with J and the residual
    max |F(pi) - pi| at the polished point."""
    D = coords.dim
    keep = [r for r in range(len(roots.lo)) if roots.J[r][1] >= threshold]
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
                    optimal=bool(roots.J[r][1] >= threshold),
                    found_by=roots.by[r],
                )
            )
    points.sort(key=lambda p: -p.J)
    return points


def _note(
    complete: bool, eps: float, roots: Roots, n_points: int, boxes: int, n_left: int, log10_volume: float
) -> str:
    """The result's note: complete (every fixed point with J >= J* - eps listed), or why not: boxes left open
    (with their volume share), root boxes not proven distinct, images of roots not certified, no point."""
    if complete:
        return (
            f"certified complete: every fixed point with J >= J* - {eps:g} is listed "
            f"({n_points} point(s), {boxes:,} boxes)"
        )
    why = [f"{n_left:,} box(es) left unexplored (volume share {_share_text(log10_volume)})"] if n_left else []
    why += [f"{roots.ambiguous} overlapping root boxes not proven distinct"] if roots.ambiguous else []
    why += [f"{roots.unmapped} image(s) of roots not certified"] if roots.unmapped else []
    why += ["no certified fixed point"] if not n_points else []
    return f"NOT proven complete after {boxes:,} boxes: " + "; ".join(why)


def log_logistic_width(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """log(sigma(hi) - sigma(lo)) elementwise, lo <= hi, without the cancellation of the difference: on a
    saturated interval (lo = 50, hi = 60) sigma(hi) - sigma(lo) is 0 in float64 while the width is ~2e-22. For
    lo >= 0 it is -lo + log(1 - e^{lo - hi}) - softplus(-lo) - softplus(-hi) (sigma(hi) - sigma(lo) =
    sigma(-lo) - sigma(-hi)); for hi <= 0 the same of (-hi, -lo); across 0 (tanh(hi / 2) - tanh(lo / 2)) / 2,
    a sum of two non-negative parts (+-1e-303 is a width of 5.0e-304, where sigma(hi) - sigma(lo) is 0).
    -inf where lo == hi."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float))
    flip = hi <= 0
    a, b = np.where(flip, -hi, lo), np.where(flip, -lo, hi)  # a >= 0 unless the interval holds 0
    with np.errstate(divide="ignore"):
        d = (
            a - b
        )  # <= 0: log(1 - e^d) as log(-expm1(d)) near 0, log1p(-e^d) below -log 2 (Maechler's log1mexp)
        log1mexp = np.where(d > -np.log(2.0), np.log(-np.expm1(d)), np.log1p(-np.exp(d)))
        tail = -a + log1mexp - np.logaddexp(0.0, -a) - np.logaddexp(0.0, -b)
        middle = np.log(0.5 * (np.tanh(0.5 * hi) - np.tanh(0.5 * lo)))
    return np.where(a >= 0, tail, middle)


def _log10_volume(lo: np.ndarray, hi: np.ndarray, B: float) -> float:
    """log10 of the boxes' [n, D] share of the domain |y_d| <= B in the logistic measure (a sum over boxes of
    prod_d width_d / total^D, taken in logs so that it does not underflow); -inf for no boxes."""
    if len(lo) == 0:
        return -np.inf
    D = lo.shape[1]
    per_box = log_logistic_width(lo, hi).sum(axis=1) - D * log_logistic_width(np.array(-B), np.array(B))
    return float(np.logaddexp.reduce(per_box) / np.log(10.0))


def _share_text(log10_share: float) -> str:
    """A volume share for the note: as a number where float64 holds it, else as a power of ten."""
    return f"{10.0**log10_share:.3g}" if log10_share > -300 else f"10^{log10_share:.1f}"
