"""Continuation in the temperature: every branch of Boltzmann fixed points that can be traced from the
unique high-temperature point, as Gambit traces its logit QRE from lambda = 0, plus the branches that
split off at bifurcations.

In logit coordinates with lambda = 1 / alpha the fixed points at every temperature form the zero set of

    H(y, lambda) = y - lambda Gamma(y),      Gamma(y) = Q-gaps of pi(y)   (= M(y) at alpha = 1),

a curve through (0, 0) (at lambda = 0 the uniform policy is the unique fixed point). Branches are followed
by pseudo-arclength predictor-corrector steps in z = (y, lambda) (Allgower & Georg, *Numerical
Continuation Methods*, ch. 2): Euler predictor along the unit tangent t (the null vector of
H_z = [I - lambda DGamma, -Gamma], oriented), chord-Newton corrector on {H = 0, t . (z - z_pred) = 0} with
the exact Jacobian (:mod:`ers_exact.solve.derivatives`), step length adapted to the corrector's
contraction. Folds (lambda turning back) need nothing special; every crossing of the target
lambda* = 1 / alpha is polished by Newton at fixed lambda* and reported with its branch.

Bifurcations. At a simple fold the augmented matrix A = [H_z; t^T] stays regular; at a branch point H_z
loses rank and A is singular. Two test functions are watched on every accepted step: the sign of det A
(it changes at a branch point of odd multiplicity, e.g. a pitchfork) and the smallest singular value of A
(a local minimum near zero catches even multiplicities, as in games with a symmetry group acting by a 2-D
representation). The point is then located (bisection on the sign, golden section on the singular value),
the kernel of H_z there gives the directions of the new branches (every kernel vector orthogonal to the
tangent, both signs, and pairwise combinations), each is corrected onto the curve at distance eps from
the branch point and traced in turn. This is the logit-QRE analogue of the "proven" bifurcations of the
alpha sweep (:mod:`ers_exact.solve.sweep`), located here to solver precision rather than between grid
points.

What continuation cannot promise: a branch that is connected to nothing traced (an isolated loop of
fixed points) is never reached, nor is a fold beyond the overshoot ``lambda_stop``. The solver
(:mod:`ers_exact.solve.fixed_points`) therefore uses continuation together with multistart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import LogitCoordinates, reward_unit
from ers_exact.solve.branch_points import BranchWatch, Seed, near_known, switch
from ers_exact.solve.config import ContinuationConfig
from ers_exact.solve.path import Tracer
from ers_exact.util.blas import blas_threads
from ers_exact.util.progress import Progress

__all__ = ["Branch", "ContinuationConfig", "ContinuationResult", "continuation", "unit_coordinates"]


@dataclass(frozen=True)
class Branch:
    """One traced branch: where it came from and why tracing stopped."""

    id: int
    parent: int | None  # the branch it split from (None: the principal branch from lambda = 0)
    origin_lambda: float  # lambda of the branch point it starts at (0 for the principal branch)
    steps: int
    crossings: int  # fixed points at lambda* found on it
    end: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ContinuationResult:
    """Fixed points at lambda* = 1 / alpha reached by continuation, with their branches."""

    alpha: float
    points: tuple[np.ndarray, ...] = field(repr=False)  # y of each crossing (polished)
    point_branch: tuple[int, ...]
    branches: tuple[Branch, ...]
    bifurcations: tuple[dict[str, Any], ...]
    steps: int
    seconds: float
    config: ContinuationConfig

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "lambda": 1.0 / self.alpha,
            "n_points": len(self.points),
            "point_branch": list(self.point_branch),
            "branches": [b.to_json() for b in self.branches],
            "bifurcations": list(self.bifurcations),
            "steps": self.steps,
            "seconds": round(self.seconds, 4),
            "config": self.config.to_json(),
        }


class _BranchProgress:
    """Progress of one branch: its lambda over lambda_stop (a bar per branch; more may be found on the way)."""

    def __init__(self, bar: Progress, lam_stop: float) -> None:
        self.bar, self.lam_stop, self.shown = bar, lam_stop, 0

    def __call__(self, lam: float) -> None:
        done = int(1000 * min(1.0, max(0.0, lam / self.lam_stop)))
        if done > self.shown:
            self.bar.update(done - self.shown)
            self.shown = done


def continuation(
    coords: LogitCoordinates,
    alpha: float,
    config: ContinuationConfig | None = None,
    progress: bool | None = None,
) -> ContinuationResult:
    """Trace the fixed-point branches from lambda = 0 to lambda* = 1 / alpha (see module docstring)."""
    cfg = config or ContinuationConfig()
    with blas_threads(cfg.blas_threads):
        return _continuation(coords, alpha, cfg, progress)


def unit_coordinates(coords: LogitCoordinates) -> tuple[LogitCoordinates, float]:
    """The coordinates of the game with its rewards divided by u = :func:`reward_unit` (the same layers and
    local histories, a new tree), and u. The trace runs there at lambda* = u / alpha: its fixed points are the
    game's, and its step rules (arclength scale, ``overshoot``'s + 0.05, the absolute floors) see rewards of
    spread 1 whatever the game's units (rewards x 1e4 at alpha x 1e4 lost three-lever's 23 continuation points
    at 0.25). A game of spread 1 keeps its own coordinates."""
    tree = coords.tree
    unit = reward_unit(tree)
    if unit == 1.0:
        return coords, 1.0
    game = replace(tree.game, reward=tree.game.reward / unit)
    return replace(coords, tree=HistoryTree(game, tree.layers, tree.local)), unit


def _continuation(
    coords: LogitCoordinates, alpha: float, cfg: ContinuationConfig, progress: bool | None
) -> ContinuationResult:
    """Trace branches from the principal seed at lambda = 0, breadth first, until the queue of seeds is empty or
    ``max_branches`` / ``max_steps`` is reached; every branch point found queues the branches leaving it."""
    start = time.perf_counter()
    coords, unit = unit_coordinates(coords)
    lam_star = unit / alpha
    tr = Tracer(coords, lam_star, cfg, unit)
    if coords.dim == 0:
        return ContinuationResult(
            alpha,
            (np.zeros(0),),
            (0,),
            (Branch(0, None, 0.0, 0, 1, "no coordinates"),),
            (),
            0,
            time.perf_counter() - start,
            cfg,
        )
    found = _Found(queue=[_principal_seed(tr, coords.dim, lam_star)])
    while found.queue and len(found.branches) < cfg.max_branches and found.steps < cfg.max_steps:
        _trace_next(tr, found, cfg, coords.tree.game.name, progress)
    return ContinuationResult(
        alpha=float(alpha),
        points=tuple(found.points),
        point_branch=tuple(found.point_branch),
        branches=tuple(_closed(found.branches, found.queue)),
        bifurcations=tuple(found.bifurcations),
        steps=found.steps,
        seconds=time.perf_counter() - start,
        config=cfg,
    )


@dataclass
class _Found:
    """What the continuation has found so far: the crossings y of lambda* (and the branch of each), the traced
    branches, the branch points (as reported, and their curve points z to recognise one reached twice), the
    seeds not yet traced and the steps spent."""

    queue: list[Seed]
    points: list[np.ndarray] = field(default_factory=list)
    point_branch: list[int] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    bifurcations: list[dict[str, Any]] = field(default_factory=list)
    known_bif: list[np.ndarray] = field(default_factory=list)
    steps: int = 0


def _principal_seed(tr: Tracer, D: int, lam_star: float) -> Seed:
    """The seed of the principal branch: z = (0, 0), where H_z = [I, -Gamma(0)], its tangent oriented towards
    increasing lambda. Sets ``tr.scale``: y grows like lambda Gamma, so arclength is measured in units of the
    path's size, not of lambda alone."""
    z0 = np.zeros(D + 1)
    hz0 = np.hstack([np.eye(D), -tr.gamma(z0[:-1], False)[0][:, None]])  # H_z at lambda = 0: [I, -Gamma(0)]
    tr.scale = (1.0 + lam_star) * max(1.0, float(np.linalg.norm(hz0[:, -1])))
    e = np.zeros(D + 1)
    e[-1] = 1.0
    t0, _ = tr.tangent(hz0, e)  # oriented towards increasing lambda
    return Seed(z0, t0, None, 0.0, None, hz0)


def _trace_next(tr: Tracer, found: _Found, cfg: ContinuationConfig, name: str, progress: bool | None) -> None:
    """Trace the first queued seed's branch (its own progress bar) into ``found``, then switch onto the branches
    leaving each branch point it met (queued after the others)."""
    lam_star = tr.lam_star
    lam_stop = cfg.overshoot * lam_star + 0.05
    seed = found.queue.pop(0)
    bid = len(found.branches)
    desc = f"continuation {name} to lambda={tr.lam(lam_star):g}: branch {bid + 1} of {bid + 1 + len(found.queue)} known"
    with Progress(1000, desc, enabled=progress) as bar:
        report = _BranchProgress(bar, lam_stop)
        steps, crossings, end, new_bifs = _trace(
            tr,
            seed,
            lam_star,
            lam_stop,
            cfg,
            found.points,
            found.point_branch,
            bid,
            found.known_bif,
            cfg.max_steps - found.steps,
            report,
        )
        report(lam_stop)
    found.steps += steps
    found.branches.append(Branch(bid, seed.parent, tr.lam(seed.origin), steps, crossings, end))
    for bif in new_bifs:
        bif["branch"] = bid
        children = switch(tr, bif, bid, progress)
        bif["new_branches"] = len(children)
        found.bifurcations.append({k: v for k, v in bif.items() if k not in ("z", "t", "kernel")})
        found.queue.extend(children)


def _closed(branches: list[Branch], queue: list[Seed]) -> list[Branch]:
    """The branches as reported: one still running when the step budget ran out says so, and the seeds left in
    the queue are counted in one last entry."""
    out = [
        Branch(b.id, b.parent, b.origin_lambda, b.steps, b.crossings, "step budget spent")
        if b.end == "running"
        else b
        for b in branches
    ]
    if queue:
        why = f"{len(queue)} branch(es) left untraced (max_branches / max_steps reached)"
        out.append(Branch(len(out), None, float("nan"), 0, 0, why))
    return out


def _trace(
    tr: Tracer,
    seed: Seed,
    lam_star: float,
    lam_stop: float,
    cfg: ContinuationConfig,
    points: list[np.ndarray],
    point_branch: list[int],
    bid: int,
    known_bif: list[np.ndarray],
    budget: int,
    report: Callable[[float], None] | None = None,
) -> tuple[int, int, str, list[dict[str, Any]]]:
    """Follow one branch from seed; append crossings of lambda*; return (steps, crossings, end, branch points).

    Each accepted predictor-corrector step z -> zn is checked for a crossing of lambda* (polished at fixed
    lambda*), then for a branch point between z and zn (:class:`BranchWatch`), then for the branch's end."""
    z, t = seed.z.copy(), seed.t.copy()
    h = cfg.initial_step * tr.scale
    t, lu = tr.tangent(seed.hz if seed.hz is not None else tr.Hz(z), t)
    watch = BranchWatch(tr, lu, z, t, cfg.locate_branch_points)
    steps, crossings = 0, 0
    prev: tuple[np.ndarray, np.ndarray] | None = None  # the previous point and tangent (Hermite predictor)
    found: list[dict[str, Any]] = []
    end = "running"
    while steps < budget:
        if cfg.stop_at_crossing and steps > 0:
            landed = tr.land(z, t, h, prev if cfg.hermite else None)
            if landed is not None:
                points.append(landed[0])
                point_branch.append(bid)
                steps, crossings, end = steps + 1, crossings + 1, f"crossed lambda*={tr.lam(lam_star):.6g}"
                break
        st = tr.step(z, t, h, prev if cfg.hermite else None)
        if st is None:
            h *= 0.5
            if h < cfg.min_step * tr.scale:
                end = f"step size underflow at lambda={tr.lam(z[-1]):.6g}"
                break
            continue
        zn, tn, lun = st.z, st.t, st.aug
        steps += 1
        if report is not None:
            report(float(zn[-1]))
        y_fp = _crossing(tr, z, zn, lam_star)
        if y_fp is not None:
            points.append(y_fp)
            point_branch.append(bid)
            crossings += 1
        if cfg.locate_branch_points:
            bif = watch.step(tr, (z, t, lu, h), (zn, tn, lun), lam_stop, cfg)
            if bif is not None and not near_known(bif["z"], known_bif, cfg.branch_eps):
                known_bif.append(bif["z"])
                found.append(bif)
        prev = (z, t)
        z, t, lu = zn, tn, lun
        h = tr.next_step(h, st)
        stop = _end(z, steps, crossings, seed, known_bif, (lam_star, lam_stop, tr.unit), cfg)
        if stop is not None:
            end = stop
            break
    return steps, crossings, end, found


def _crossing(tr: Tracer, z: np.ndarray, zn: np.ndarray, lam_star: float) -> np.ndarray | None:
    """The fixed point y at lambda* when the step z -> zn crosses lambda* = 1 / alpha: the chord's y at lambda*
    polished by Newton at fixed lambda*, kept when its residual is below 1e-9 max(1, |y|_inf); else None."""
    if not ((z[-1] - lam_star) * (zn[-1] - lam_star) <= 0 and zn[-1] != z[-1] and z[-1] != lam_star):
        return None
    frac = (lam_star - z[-1]) / (zn[-1] - z[-1])
    y_guess = z[:-1] + frac * (zn[:-1] - z[:-1])
    y_fp, res = tr.polish(y_guess, lam_star)
    if res < 1e-9 * max(1.0, float(np.abs(y_fp).max(initial=0.0))):
        return y_fp
    return None


def _end(
    z: np.ndarray,
    steps: int,
    crossings: int,
    seed: Seed,
    known_bif: list[np.ndarray],
    lams: tuple[float, float, float],
    cfg: ContinuationConfig,
) -> str | None:
    """Why tracing stops at the curve point z = (y, lambda) after ``steps`` steps (None: it goes on): a
    crossing when ``stop_at_crossing``, lambda past lambda_stop or below 0, or another known branch point
    reached (on a branch that left one). ``lams``: lambda*, lambda_stop and the trace's reward unit (the text
    gives the game's lambdas)."""
    lam_star, lam_stop, unit = lams
    if crossings and cfg.stop_at_crossing:
        return f"crossed lambda*={lam_star / unit:.6g}"
    if z[-1] > lam_stop:
        return f"passed lambda={lam_stop / unit:.6g}"
    if z[-1] < -1e-9:
        return "returned to lambda < 0"
    if (
        seed.origin_point is not None
        and steps > 3
        and near_known(z, [p for p in known_bif if p is not seed.origin_point], 0.5 * cfg.branch_eps)
    ):
        return f"reached another branch point at lambda={z[-1] / unit:.6g}"
    return None
