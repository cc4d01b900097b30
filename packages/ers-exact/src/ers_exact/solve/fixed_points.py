"""All Boltzmann fixed points Pi^alpha of a game that multistart can find, and the self-play-optimal set
Pi*_alpha = argmax_{pi in Pi^alpha} J(pi).

Method (recorded in every result): seeded starts spread over the product of simplices (uniform, Dirichlet
and near-pure), damped iteration pi <- (1 - eta) pi + eta F(pi) (reaches stable points), then Newton on
g(y) = y - M(y) in logit coordinates with a batched central-difference Jacobian (polishes and reaches
unstable points), de-duplication in probability space, then per point: residual, J, spectral radius of
DM (stable iff < 1) and, on small systems, an interval Krawczyk certificate (:mod:`ers_exact.solve.certify`).
Multistart is not complete in general: ``complete`` is True only when a certified subdivision search
(:func:`ers_exact.solve.certify.enumerate_all`) proved that no other fixed point exists.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.optimal import PolicyBudgetError, self_play_optimum
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import LogitCoordinates, boltzmann_residual, logit_bound
from ers_exact.solve.certify import certify_point, enumerate_all

__all__ = ["FixedPoint", "FixedPointSet", "SolverConfig", "solve_fixed_points"]


@dataclass(frozen=True)
class SolverConfig:
    """Parameters of :func:`solve_fixed_points` (recorded in the result)."""

    n_starts: int = 64  # random starts (plus the uniform start and any warm starts)
    seed: int = 0
    damping: float = 0.5  # eta of the damped iteration
    damped_steps: int = 300
    newton_steps: int = 60
    max_newton_step: float = 2.0  # infinity-norm cap on a Newton step in logit units
    tol: float = 1e-11  # converged when ||y - M(y)||_inf < tol
    dedup_tol: float = 1e-7  # two points are one when their policies differ by less (max abs)
    optimal_tol: float = 1e-9  # pi is self-play optimal when J(pi) >= J* - optimal_tol
    stable_margin: float = 1e-6  # stable when spectral radius < 1 - margin
    certify: bool = True  # interval Krawczyk test per point (small systems)
    max_certify_dim: int = 64
    complete_search: bool = True  # certified subdivision when the effective dimension is small
    max_complete_dim: int = 3
    optimum_start: bool = True  # also start near the exact deterministic optimum when it is cheap to find
    optimum_max_policies: int = 5_000

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FixedPoint:
    """One Boltzmann fixed point pi = F(pi)."""

    policy: tuple[np.ndarray, ...] = field(repr=False)
    y: np.ndarray = field(repr=False)
    J: float
    residual: float  # max |F(pi) - pi|
    spectral_radius: float  # of DM at the point
    stable: bool
    certified: bool | None  # None: not attempted
    optimal: bool
    basin: int  # starts that converged here

    def to_json(self, with_policy: bool = False) -> dict[str, Any]:
        out = {"J": self.J, "residual": self.residual, "spectral_radius": self.spectral_radius,
               "stable": self.stable, "certified": self.certified, "optimal": self.optimal, "basin": self.basin,
               "root_policy": [p[0].tolist() for p in self.policy]}
        if with_policy:
            out["policy"] = [p.tolist() for p in self.policy]
        return out


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
    complete: bool
    completeness: str  # how completeness was (or was not) established
    seconds: float
    method: str = "multistart damped iteration + batched Newton in logit coordinates; Krawczyk certificates"

    @property
    def J_star(self) -> float:
        return max(p.J for p in self.points) if self.points else float("nan")

    @property
    def optimal_points(self) -> tuple[FixedPoint, ...]:
        """Pi*_alpha as found: the points whose J is within optimal_tol of the best."""
        return tuple(p for p in self.points if p.optimal)

    def to_json(self, with_policy: bool = False) -> dict[str, Any]:
        return {"game": self.game, "horizon": self.horizon, "alpha": self.alpha, "J_star": self.J_star,
                "n_fixed_points": len(self.points), "n_optimal": len(self.optimal_points),
                "fixed_points": [p.to_json(with_policy) for p in self.points], "n_starts": self.n_starts,
                "converged_starts": self.converged_starts, "complete": self.complete,
                "completeness": self.completeness, "seconds": round(self.seconds, 4), "method": self.method,
                "config": self.config.to_json()}


def _starts(coords: LogitCoordinates, cfg: SolverConfig, warm: np.ndarray | None) -> np.ndarray:
    """Uniform start, Dirichlet starts, near-pure starts (deterministic + epsilon), and warm starts."""
    rng = np.random.default_rng(cfg.seed)
    tree = coords.tree
    n_dir = cfg.n_starts // 2
    n_pure = cfg.n_starts - n_dir
    pols = []
    for hist in tree.local:
        legal = hist.legal.astype(float)
        dirichlet = rng.gamma(1.0, size=(n_dir,) + legal.shape) * legal
        pure = np.zeros((n_pure,) + legal.shape)
        choice = np.argmax(rng.random((n_pure,) + legal.shape) * legal, axis=2)
        np.put_along_axis(pure, choice[:, :, None], 1.0, axis=2)
        eps = rng.choice([0.02, 0.1, 0.3], size=(n_pure, 1, 1))
        pure = (1 - eps) * pure + eps * legal / legal.sum(axis=1, keepdims=True)
        both = np.concatenate([legal[None] / legal.sum(axis=1, keepdims=True)[None], dirichlet, pure])
        pols.append(both / both.sum(axis=2, keepdims=True))
    y = coords.from_policy(tuple(pols))
    if cfg.optimum_start:
        y = np.concatenate([y, _optimum_start(coords, cfg)])
    if warm is not None and len(warm):
        y = np.concatenate([np.atleast_2d(warm), y])
    return y


def _optimum_start(coords: LogitCoordinates, cfg: SolverConfig) -> np.ndarray:
    """Logits of the exact deterministic self-play optimum, smoothed (small alpha puts optimal Boltzmann
    points near it); empty when exhaustive search is over budget."""
    try:
        best = self_play_optimum(coords.tree, max_policies=cfg.optimum_max_policies, progress=False)
    except PolicyBudgetError:
        return np.zeros((0, coords.dim))
    legal = [h.legal / h.legal.sum(axis=1, keepdims=True) for h in coords.tree.local]
    return coords.from_policy(tuple((0.95 * p + 0.05 * u)[None] for p, u in zip(best.policy, legal)))


def _damped(coords: LogitCoordinates, y: np.ndarray, alpha: float, cfg: SolverConfig) -> np.ndarray:
    """pi <- (1 - eta) pi + eta F(pi) in probability space, batched; returns logits."""
    pols = coords.to_policy(y)
    for _ in range(cfg.damped_steps):
        image = coords.to_policy(coords.logit_map(coords.from_policy(pols), alpha))
        diff = max(float(np.abs(f - p).max()) for f, p in zip(image, pols))
        pols = tuple((1 - cfg.damping) * p + cfg.damping * f for p, f in zip(pols, image))
        if diff < cfg.tol:
            break
    return coords.from_policy(pols)


def _newton(coords: LogitCoordinates, y: np.ndarray, alpha: float, cfg: SolverConfig, bound: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """Batched Newton on g(y) = y - M(y); returns (y, ||g||_inf)."""
    y = np.clip(y, -bound, bound)
    res = np.abs(y - coords.logit_map(y, alpha)).max(axis=1)
    D = y.shape[1]
    for _ in range(cfg.newton_steps):
        active = np.flatnonzero(np.isfinite(res) & (res >= cfg.tol))
        if active.size == 0:
            break
        ya = y[active]
        g = ya - coords.logit_map(ya, alpha)
        jac = np.eye(D)[None] - coords.jacobian(ya, alpha)
        try:
            delta = np.linalg.solve(jac, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            delta = np.einsum("pij,pj->pi", np.linalg.pinv(jac), g)
        scale = np.maximum(1.0, np.abs(delta).max(axis=1, keepdims=True) / cfg.max_newton_step)
        y[active] = np.clip(ya - delta / scale, -bound, bound)
        res[active] = np.abs(y[active] - coords.logit_map(y[active], alpha)).max(axis=1)
    return y, res


def _dedup(coords: LogitCoordinates, y: np.ndarray, res: np.ndarray, tol: float) -> list[tuple[np.ndarray, int]]:
    order = np.argsort(res)
    pols = coords.to_policy(y)
    flat = np.concatenate([p.reshape(len(y), -1) for p in pols], axis=1)
    kept: list[int] = []
    basin: list[int] = []
    # near a singular (bifurcating) root Newton converges slowly: a residual r leaves an error ~ sqrt(r)
    radius = np.maximum(tol, 100.0 * np.sqrt(np.maximum(res, 0.0)))
    for k in order:
        dist = [np.abs(flat[k] - flat[j]).max() for j in kept]
        hit = int(np.argmin(dist)) if dist else -1
        if hit >= 0 and dist[hit] < max(radius[k], radius[kept[hit]]):
            basin[hit] += 1
        else:
            kept.append(int(k))
            basin.append(1)
    return [(y[k], b) for k, b in zip(kept, basin)]


def solve_fixed_points(tree: HistoryTree, alpha: float, config: SolverConfig | None = None,
                       warm_starts: np.ndarray | None = None) -> FixedPointSet:
    """Find Boltzmann fixed points at temperature ``alpha`` (see module docstring)."""
    cfg = config or SolverConfig()
    start = time.perf_counter()
    coords = LogitCoordinates(tree)
    bound = logit_bound(tree, alpha)
    y0 = _starts(coords, cfg, warm_starts)
    y1 = _damped(coords, np.clip(y0, -bound, bound), alpha, cfg)
    y, res = _newton(coords, y1, alpha, cfg, bound)
    ok = np.isfinite(res) & (res < cfg.tol)
    found = _dedup(coords, y[ok], res[ok], cfg.dedup_tol)
    complete, completeness = False, "multistart only: no proof that the list is complete"
    if cfg.complete_search:
        search = enumerate_all(coords, alpha, max_dim=cfg.max_complete_dim)
        completeness = search.note
        if search.complete:
            # boxes were inflated, so one root may sit in two certified boxes: polish and de-duplicate
            y_r, res_r = _newton(coords, np.array(search.roots).reshape(-1, coords.dim), alpha, cfg, bound)
            roots = _dedup(coords, y_r[res_r < cfg.tol], res_r[res_r < cfg.tol], cfg.dedup_tol)
            n_multistart = len(found)
            flat = [np.concatenate([p.ravel() for p in coords.to_policy(f[0])]) for f in found]
            for root, _ in roots:
                rp = np.concatenate([p.ravel() for p in coords.to_policy(root)])
                if not any(np.abs(rp - fp).max() < cfg.dedup_tol for fp in flat):
                    found.append((root, 0))
            complete = len(found) == len(roots)
            completeness += f"; it holds {len(roots)} fixed point(s), multistart found {n_multistart}"
    points = _describe(coords, found, alpha, cfg)
    return FixedPointSet(game=tree.game.name, horizon=tree.game.horizon, alpha=float(alpha), points=points,
                         config=cfg, n_starts=len(y0), converged_starts=int(ok.sum()), complete=complete,
                         completeness=completeness, seconds=time.perf_counter() - start)


def _describe(coords: LogitCoordinates, found: list[tuple[np.ndarray, int]], alpha: float,
              cfg: SolverConfig) -> tuple[FixedPoint, ...]:
    if not found:
        return ()
    ys = np.array([f[0] for f in found])
    pols = coords.to_policy(ys)
    J = np.atleast_1d(expected_return(coords.tree, pols))
    res = np.atleast_1d(boltzmann_residual(coords.tree, pols, alpha))
    rho = np.array([np.abs(np.linalg.eigvals(j)).max() if j.size else 0.0
                    for j in coords.jacobian(ys, alpha)])
    j_star = J.max()
    points = []
    for k, (yk, basin) in enumerate(found):
        cert = None
        if cfg.certify and coords.dim <= cfg.max_certify_dim:
            cert = certify_point(coords, yk, alpha)
        points.append(FixedPoint(policy=tuple(p[k] for p in pols), y=yk, J=float(J[k]), residual=float(res[k]),
                                 spectral_radius=float(rho[k]), stable=bool(rho[k] < 1 - cfg.stable_margin),
                                 certified=cert, optimal=bool(J[k] >= j_star - cfg.optimal_tol), basin=basin))
    points.sort(key=lambda p: (-p.J, p.spectral_radius))
    return tuple(points)
