"""Batched Newton on g(y) = y - M(y) in logit coordinates with the exact Jacobian, and de-duplication of
the roots it finds (shared by multistart in :mod:`ers_exact.solve.fixed_points` and branch switching in
:mod:`ers_exact.solve.continuation`)."""

from __future__ import annotations

import numpy as np

from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import NewtonSettings
from ers_exact.util.progress import Progress

__all__ = [
    "DENSE_COPIES",
    "MAX_STEP_RADIUS",
    "STALL_RESIDUAL",
    "NewtonSettings",
    "dedup",
    "flat_policies",
    "newton",
    "newton_steps",
    "policy_bytes",
    "polish",
    "scaled_residual",
    "step_radius",
]

#: dense D x D float arrays alive beside one policy's evaluation: DM, I - DM and LAPACK's copy in Newton;
#: H_z, [H_z; t], its inverse and the determinant's copy in continuation (the larger of the two)
DENSE_COPIES = 6


def policy_bytes(coords: LogitCoordinates) -> int:
    """Peak working bytes per policy of a Newton step or a continuation step: the evaluation of M and DM
    (:meth:`~ers_exact.solve.derivatives.LogitDerivatives.bytes_per_policy`) and the dense copies."""
    return coords.derivatives.bytes_per_policy(True) + 8 * DENSE_COPIES * coords.dim**2


def scaled_residual(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    """||g||_inf / max(1, ||y||_inf) per row (logits of size B carry rounding errors of size B * eps)."""
    if g.shape[1] == 0:
        return np.zeros(g.shape[0])
    return np.abs(g).max(axis=1) / np.maximum(1.0, np.abs(y).max(axis=1))


def _solve_batched(jac: np.ndarray, g: np.ndarray) -> np.ndarray:
    """jac^{-1} g for a batch [P, D, D], [P, D]; least squares where a matrix is singular."""
    try:
        return np.linalg.solve(jac, g[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        return np.stack([_solve_one(j, v) for j, v in zip(jac, g)])


def _solve_one(jac: np.ndarray, g: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(jac, g)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(jac, g, rcond=None)[0]


def newton(
    coords: LogitCoordinates,
    y: np.ndarray,
    alpha: float,
    cfg: NewtonSettings,
    bound: float,
    bar: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Batched Newton on g(y) = y - M(y) with the exact Jacobian and a backtracking line search on
    ||g||_inf (the full step first, then every halving at once in one batch); a start whose residual has
    not halved in ``stall_steps`` iterations is given up. Returns (y, scaled ||g||_inf)."""
    y = np.clip(np.array(y, dtype=np.float64), -bound, bound)
    if len(y) == 0:
        return y, np.zeros(0)
    res = scaled_residual(y - coords.logit_map(y, alpha), y)
    D = y.shape[1]
    history = [res.copy()]
    alive = np.ones(len(y), dtype=bool)
    halvings = 0.5 ** np.arange(1, cfg.line_search + 1)
    chunk = max(1, coords.memory_budget // policy_bytes(coords))
    for it in range(cfg.steps):
        if bar is not None:
            bar.update()
        if it >= cfg.stall_steps:  # give up on starts that stopped making progress
            alive &= ~(res > 0.5 * history[-cfg.stall_steps])
        active = np.flatnonzero(alive & np.isfinite(res) & (res >= cfg.tol))
        if active.size == 0:
            break
        ya = y[active]
        g, delta = np.empty_like(ya), np.empty_like(ya)
        for lo in range(0, len(ya), chunk):  # the Jacobians [chunk, D, D] under the memory budget
            part = slice(lo, lo + chunk)
            ev = coords.evaluate(ya[part], alpha, jacobian=True)
            assert ev.jacobian is not None
            g[part] = ya[part] - ev.values
            delta[part] = _solve_batched(np.eye(D)[None] - ev.jacobian, g[part])
            del ev
        r0 = np.abs(g).max(axis=1)
        delta[~np.isfinite(delta)] = 0.0
        cap = np.maximum(cfg.max_step, r0)[:, None]  # Newton may move as far as g is large
        delta /= np.maximum(1.0, np.abs(delta).max(axis=1, keepdims=True) / cap)
        y_try = np.clip(ya - delta, -bound, bound)
        g_try = y_try - coords.logit_map(y_try, alpha)
        r_try = np.abs(g_try).max(axis=1)
        need = np.flatnonzero(~np.isfinite(r_try) | (r_try > (1 - 1e-4) * r0))
        if need.size and len(halvings):
            cand = np.clip(ya[need, None] - halvings[None, :, None] * delta[need, None], -bound, bound)
            cand = cand.reshape(-1, D)
            g_c = (cand - coords.logit_map(cand, alpha)).reshape(len(need), len(halvings), D)
            r_c = np.abs(g_c).max(axis=2)
            r_c[~np.isfinite(r_c)] = np.inf
            ok = r_c <= (1 - 1e-4 * halvings[None]) * r0[need, None]
            # the longest step that decreases ||g||, else the shortest one (to move on)
            pick = np.where(ok.any(axis=1), np.argmax(ok, axis=1), len(halvings) - 1)
            rows = np.arange(len(need))
            y_try[need] = cand.reshape(len(need), len(halvings), D)[rows, pick]
            g_try[need] = g_c[rows, pick]
        y[active] = y_try
        res[active] = scaled_residual(g_try, y_try)
        history.append(res.copy())
    return y, res


def newton_steps(
    coords: LogitCoordinates, y: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The full Newton step delta = (I - DM)^{-1} g at each row (chunked under the memory budget), its scaled
    size ||delta||_inf / max(1, ||y||_inf) and the scaled residual: ``(delta, step, res)``. At a simple root
    the step estimates the distance to the root; at a singular one (a bifurcation at this alpha) Newton
    converges only linearly and the step stays of the order of that distance while the residual is tiny."""
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    delta, g = np.zeros_like(y), np.zeros_like(y)
    if len(y) == 0 or y.shape[1] == 0:
        return delta, np.zeros(len(y)), np.zeros(len(y))
    chunk = max(1, coords.memory_budget // policy_bytes(coords))
    eye = np.eye(y.shape[1])[None]
    for lo in range(0, len(y), chunk):
        part = slice(lo, lo + chunk)
        ev = coords.evaluate(y[part], alpha, jacobian=True)
        assert ev.jacobian is not None
        g[part] = y[part] - ev.values
        delta[part] = _solve_batched(eye - ev.jacobian, g[part])
        del ev
    delta[~np.isfinite(delta)] = np.inf
    return delta, scaled_residual(delta, y), scaled_residual(g, y)


def polish(
    coords: LogitCoordinates, y: np.ndarray, res: np.ndarray, alpha: float, cfg: NewtonSettings, bound: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decide convergence by Newton's step: the rows with a residual below ``cfg.tol`` take up to
    ``cfg.polish_steps`` full Newton steps while their step is above ``cfg.step_tol`` (one step brings a simple
    root to rounding level; a step that would take the residual to ``tol`` or above is not taken). Returns
    (y, res, step, converged), res and step measured at the returned y (``step`` inf where the given residual
    was not below tol). A row is converged when its step is at most ``step_tol``, or when its residual *stalled*:
    a full step that did not halve it, at rounding level (``STALL_RESIDUAL``). Near a singular root (a bifurcation at this alpha) the residual shrinks
    like the distance squared (fold) or cubed (pitchfork), so a small residual alone accepts points far from it;
    there every step divides the residual by ~4 or ~27/8 and the step stays of the order of the distance. At an
    ill-conditioned simple root (near, not at, a bifurcation) the step is rounding noise amplified by the
    condition number of I - DM (~1e-8 at 1e8) while the residual stays at rounding level: it stalls."""
    y, res = np.array(y, dtype=np.float64), np.array(res, dtype=np.float64)
    step = np.full(len(y), np.inf)
    stalled = np.zeros(len(y), dtype=bool)
    rows = np.flatnonzero(np.isfinite(res) & (res < cfg.tol))  # the others keep step = inf
    for it in range(cfg.polish_steps + 1):
        if rows.size == 0:
            break
        delta, step[rows], res[rows] = newton_steps(coords, y[rows], alpha)
        if it == cfg.polish_steps:
            break
        far = (step[rows] > cfg.step_tol) & ~stalled[rows]
        rows, delta = rows[far], delta[far]
        if rows.size == 0:
            break
        y_try = np.clip(y[rows] - delta, -bound, bound)
        better = np.isfinite(delta).all(axis=1)
        r_try = np.full(len(rows), np.inf)
        if better.any():
            yb = y_try[better]
            r_try[better] = scaled_residual(yb - coords.logit_map(yb, alpha), yb)
        better &= r_try < cfg.tol  # a step that leaves the converged region is not taken
        # stalled: at rounding level and no more progress (near a singular root the steps keep dividing it)
        stalled[rows[better]] = (r_try[better] > 0.5 * res[rows[better]]) & (r_try[better] <= STALL_RESIDUAL)
        y[rows[better]] = y_try[better]
        rows = rows[better]
    return y, res, step, np.isfinite(step) & ((step <= cfg.step_tol) | stalled)


def flat_policies(coords: LogitCoordinates, y: np.ndarray) -> np.ndarray:
    """The joint policies of logits y [K, D] (or [D]), every agent's pi^i flattened and concatenated: [K, sum_i
    n_histories_i * n_actions_i]."""
    y = np.atleast_2d(y)
    return np.concatenate([p.reshape(len(y), -1) for p in coords.to_policy(y)], axis=1)


#: a scaled residual at rounding level: a polish step that leaves it there without halving it has stalled
#: (ill-conditioned roots near a bifurcation sit at 2-7e-16; points 1e-4 from a singular root at ~1e-13)
STALL_RESIDUAL = 64 * np.finfo(np.float64).eps

#: the largest policy distance (max abs) a Newton step's size may merge over (dedup, the near-roots' basins)
MAX_STEP_RADIUS = 1e-2


def step_radius(y: np.ndarray, step: np.ndarray, factor: float) -> np.ndarray:
    """[R] the policy distance within which a run whose (scaled) Newton step is ``step`` may lie from the root it
    approaches: ``factor`` x its step in logits (a logit step moves a policy by at most half as much), capped
    at :data:`MAX_STEP_RADIUS`."""
    y = np.atleast_2d(y)
    scale = np.maximum(1.0, np.abs(y).max(axis=1, initial=0.0))
    return np.minimum(factor * np.asarray(step, dtype=float) * scale, MAX_STEP_RADIUS)


def dedup(
    coords: LogitCoordinates,
    y: np.ndarray,
    res: np.ndarray,
    tol: float,
    step: np.ndarray | None = None,
    step_factor: float = 0.0,
) -> list[tuple[np.ndarray, int]]:
    """The distinct points of ``y`` (policies within the larger of two points' radii are one; the point kept is
    the one with the smaller Newton ``step``, then residual) with their basins. A radius is ``tol``, or
    100 sqrt(res), or ``step_radius(step, step_factor)`` where larger."""
    if len(y) == 0:
        return []
    order = np.lexsort((res, step)) if step is not None else np.argsort(res)
    flat = flat_policies(coords, y)
    kept: list[int] = []
    basin: list[int] = []
    # near a singular (bifurcating) root Newton converges slowly: a residual r leaves an error ~ sqrt(r)
    radius = np.maximum(tol, 100.0 * np.sqrt(np.maximum(res, 0.0)))
    if step is not None:  # a stalled run near a singular root: as far from it as its step is long
        radius = np.maximum(radius, step_radius(y, step, step_factor))
    for k in order:
        dist = np.abs(flat[kept] - flat[k]).max(axis=1) if kept else np.zeros(0)
        hit = int(np.argmin(dist)) if len(dist) else -1
        if hit >= 0 and dist[hit] < max(radius[k], radius[kept[hit]]):
            basin[hit] += 1
        else:
            kept.append(int(k))
            basin.append(1)
    return [(y[k], b) for k, b in zip(kept, basin)]
