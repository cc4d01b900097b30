"""All Boltzmann fixed points Pi^alpha of a game that multistart and continuation can find, and the
self-play-optimal set Pi*_alpha = argmax_{pi in Pi^alpha} J(pi).

Method (recorded in every result). Multistart: seeded starts spread over the product of simplices
(uniform, Dirichlet and near-pure, the smoothed exact optimum when cheap, warm starts), a short damped
iteration pi <- (1 - eta) pi + eta F(pi) in probability space (pulls starts into the basins of stable
points), then Newton on g(y) = y - M(y) in logit coordinates with the EXACT Jacobian
(:mod:`ers_exact.solve.derivatives`) and a backtracking line search on ||g||_inf (reaches unstable points
too). Continuation (:mod:`ers_exact.solve.continuation`): the branches traced from the unique
high-temperature point at lambda = 0 and split off at bifurcations; every crossing of lambda = 1 / alpha is
a fixed point. A point is converged when its residual is below ``tol`` and the full Newton step there is
below ``step_tol`` or stalls (a step that no longer halves the residual: rounding level, as at an
ill-conditioned root near a bifurcation), after at most ``polish_steps`` more steps
(:func:`~ers_exact.solve.newton.polish`): at a singular root (a bifurcation at this alpha) the residual shrinks
like the distance squared or cubed, so a small residual alone would list points far from the root. Converged
points within ``near_radius`` x the larger step of the two are one. A run that converges only linearly belongs
to a listed point within ``near_radius`` x its step (its basin); others are counted (``unconverged``), never
listed. Both lists are merged (de-duplication in probability space); each point records the method that
found it and its continuation branch. Then per point: residual, J, spectral radius of DM (stable iff
< 1) and an interval Krawczyk certificate (:mod:`ers_exact.solve.certify`). ``memory_budget_bytes`` bounds
the whole process: work is chunked under what is left of it once the tree and the evaluator's index
structures are built (refused at once when one policy's step cannot fit); BLAS runs single-threaded
(many small systems; see :mod:`ers_exact.util.blas`).
Neither method is complete in general: ``complete`` is about *all* fixed points Pi^alpha, True only when a
certified subdivision search (:func:`ers_exact.solve.subdivision.enumerate_all`, a few effective coordinates)
proved that no other fixed point exists; otherwise the number of fixed points is a lower bound
(``n_fixed_points_is``). The optimal set Pi*_alpha alone is proven complete, on far larger games, by
:func:`ers_exact.solve.optimal_set.certified_optimal_set` (``ers-exact optimal-set``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.optimal import PolicyBudgetError, self_play_optimum
from ers_exact.solve.boltzmann import LogitCoordinates, check_temperature, logit_bound, reward_unit
from ers_exact.solve.certify import certify_points
from ers_exact.solve.config import SolverConfig
from ers_exact.solve.continuation import ContinuationResult, continuation
from ers_exact.solve.damped import damped
from ers_exact.solve.fixed_point_budget import (
    DENSE_BUILD_PEAK,
    START_BYTES_PER_COORDINATE,
    budget_base,
    budgeted_coordinates,
    certificate_coordinates,
    check_start_memory,
)
from ers_exact.solve.fixed_point_result import FixedPoint, FixedPointSet
from ers_exact.solve.newton import dedup, flat_policies, newton, policy_bytes, polish, step_radius
from ers_exact.solve.subdivision import enumerate_all
from ers_exact.util.blas import blas_threads
from ers_exact.util.progress import Progress

__all__ = [
    "DENSE_BUILD_PEAK",
    "START_BYTES_PER_COORDINATE",
    "FixedPoint",
    "FixedPointSet",
    "SolverConfig",
    "solve_fixed_points",
]


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


def _cluster(coords: LogitCoordinates, y: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Greedy clusters of points whose policies differ by less than ``tol`` (max abs): representative indices
    and each point's cluster."""
    flat = flat_policies(coords, y) if len(y) else np.zeros((0, 0))
    reps: list[int] = []
    label = np.empty(len(y), dtype=np.int64)
    for k in range(len(y)):
        if reps:
            dist = np.abs(flat[reps] - flat[k]).max(axis=1)
            hit = int(np.argmin(dist))
            if dist[hit] < tol:
                label[k] = hit
                continue
        label[k] = len(reps)
        reps.append(k)
    return np.array(reps, dtype=np.int64), label


@dataclass
class _Found:
    y: np.ndarray
    basin: int
    methods: set[str]
    branch: int | None = None


def _merge(
    coords: LogitCoordinates, found: list[_Found], y: np.ndarray, method: str, branch: int | None, tol: float
) -> bool:
    """Add a point found by ``method`` unless it is already listed (then label it); True when new."""
    fy = flat_policies(coords, y)[0]
    for f in found:
        if np.abs(flat_policies(coords, f.y)[0] - fy).max() < tol:
            f.methods.add(method)
            if f.branch is None:
                f.branch = branch
            return False
    found.append(_Found(y, 0, {method}, branch))
    return True


def _absorb(
    coords: LogitCoordinates,
    found: list[_Found],
    near: list[tuple[np.ndarray, float, str, int | None]],
    radius: float,
) -> tuple[np.ndarray, int]:
    """Near-roots (residual below tol, Newton step above step_tol and still shrinking: Newton converges only
    linearly to a singular root, at a bifurcation) belong to a listed point whose policy lies within ``radius``
    x their step (``newton.step_radius``, capped): a multistart run counts in its basin, a crossing labels
    it. Returns which were absorbed and how many distinct near-roots are left, listed nowhere (not fixed points:
    ``FixedPointSet.unconverged``)."""
    absorbed = np.zeros(len(near), dtype=bool)
    if not near:
        return absorbed, 0
    listed = flat_policies(coords, np.array([f.y for f in found])) if found else np.zeros((0, 0))
    left: list[tuple[np.ndarray, float]] = []
    for k in sorted(range(len(near)), key=lambda k: near[k][1]):
        yk, step, method, branch = near[k]
        fy, r = flat_policies(coords, yk)[0], float(step_radius(yk, np.array([step]), radius)[0])
        dist = np.abs(listed - fy).max(axis=1) if len(listed) else np.zeros(0)
        if len(dist) and dist.min() < r:
            absorbed[k] = True
            hit = found[int(np.argmin(dist))]
            if method == "multistart":
                hit.basin += 1
            else:
                hit.methods.add(method)
                hit.branch = branch if hit.branch is None else hit.branch
        elif not any(np.abs(fl - fy).max() < max(r, rl) for fl, rl in left):
            left.append((fy, r))
    return absorbed, len(left)


def solve_fixed_points(
    tree: HistoryTree, alpha: float, config: SolverConfig | None = None, warm_starts: np.ndarray | None = None
) -> FixedPointSet:
    """Find Boltzmann fixed points at temperature ``alpha`` (see module docstring)."""
    check_tree(tree)
    cfg = config or SolverConfig()
    with blas_threads(cfg.blas_threads):
        return _solve(tree, alpha, cfg, warm_starts)


def _solve(
    tree: HistoryTree, alpha: float, cfg: SolverConfig, warm_starts: np.ndarray | None
) -> FixedPointSet:
    """The solve in named steps: budget the coordinates, trace the continuation, run the multistart, add the
    continuation's crossings, absorb the near-roots, then the certified search and the per-point checks."""
    start = time.perf_counter()
    check_temperature(tree, alpha)
    base = budget_base(cfg)
    coords = budgeted_coordinates(tree, cfg, base)
    bound = logit_bound(tree, alpha)
    n_runs = cfg.n_starts + 2 + (0 if warm_starts is None else len(warm_starts))
    check_start_memory(tree, coords, cfg, n_runs)  # the starts and one batch (chunked under the budget)
    cont = (
        continuation(coords, alpha, cfg.continuation_config, progress=cfg.progress)
        if cfg.continuation
        else None
    )
    ms = _multistart(coords, alpha, cfg, bound, warm_starts)
    if cont is not None and len(cont.points):
        _add_crossings(coords, cont, alpha, cfg, bound, ms.found, ms.near)
    absorbed, unconverged = _absorb(coords, ms.found, ms.near, cfg.near_radius)
    ok = ms.conv.copy()
    ok[ms.near_runs] = absorbed[: len(ms.near_runs)]  # a run that converged (linearly) to a listed point
    ok = ok[: ms.n_starts] | ok[ms.n_starts :]  # a start converged when either of its two Newton runs did
    complete, completeness = _certified_search(coords, alpha, cfg, bound, ms.found)
    points = _describe(coords, ms.found, alpha, cfg, base)
    return FixedPointSet(
        game=tree.game.name,
        horizon=tree.game.horizon,
        alpha=float(alpha),
        points=points,
        config=cfg,
        n_starts=ms.n_starts,
        converged_starts=int(ok.sum()),
        unconverged=unconverged,
        complete=complete,
        completeness=completeness,
        seconds=time.perf_counter() - start,
        continuation=cont,
    )


@dataclass
class _Multistart:
    """What the multistart found: the distinct converged points, the near-roots (candidates for absorption),
    which runs converged, which of them are near-roots, and the number of starts (two Newton runs each)."""

    found: list[_Found]
    near: list[tuple[np.ndarray, float, str, int | None]]
    conv: np.ndarray
    near_runs: np.ndarray
    n_starts: int


def _multistart(
    coords: LogitCoordinates, alpha: float, cfg: SolverConfig, bound: float, warm_starts: np.ndarray | None
) -> _Multistart:
    """The starts, their damped iteration (two runs per start: short and long), one Newton run per cluster of
    coinciding runs and its polish; the converged runs de-duplicated (module docstring)."""
    tree = coords.tree
    y0 = _starts(coords, cfg, warm_starts)
    desc = f"multistart {tree.game.name} alpha={alpha:g} ({len(y0)} starts)"
    with Progress(cfg.damped_steps + cfg.newton_steps, desc, enabled=cfg.progress) as bar:
        short, long = damped(coords, np.clip(y0, -bound, bound), alpha, cfg, bound, bar)
        runs = np.concatenate([short, long])
        reps, label = _cluster(coords, runs, cfg.cluster_tol)  # runs that already coincide: one Newton run
        y_rep, res_rep = newton(coords, runs[reps], alpha, cfg.newton_settings, bound, bar)
        y_rep, res_rep, step_rep, conv_rep = polish(coords, y_rep, res_rep, alpha, cfg.newton_settings, bound)
        bar.update(max(0, bar.total - bar.done))  # the iterations stop early when every run has converged
        y, res, step, conv = y_rep[label], res_rep[label], step_rep[label], conv_rep[label]
    # converged: residual below tol, and Newton's step below step_tol or stalled at rounding level (polish)
    distinct = dedup(coords, y[conv], res[conv], cfg.dedup_tol, step[conv], cfg.near_radius)
    found = [_Found(yk, b, {"multistart"}) for yk, b in distinct]
    near_runs = np.flatnonzero(np.isfinite(step) & ~conv)
    near: list[tuple[np.ndarray, float, str, int | None]] = [
        (y[k], float(step[k]), "multistart", None) for k in near_runs
    ]
    return _Multistart(found, near, conv, near_runs, len(y0))


def _add_crossings(
    coords: LogitCoordinates,
    cont: ContinuationResult,
    alpha: float,
    cfg: SolverConfig,
    bound: float,
    found: list[_Found],
    near: list[tuple[np.ndarray, float, str, int | None]],
) -> None:
    """Polish the continuation's crossings of lambda = 1 / alpha and merge the converged ones into ``found``
    (labelled with their branch); the others join ``near``. A crossing is judged by its Newton step alone
    (its residual is the continuation's polish_tol)."""
    crossings = np.array(cont.points, dtype=float).reshape(len(cont.points), coords.dim)
    yc, _, step_c, conv_c = polish(
        coords, crossings, np.zeros(len(crossings)), alpha, cfg.newton_settings, bound
    )
    for k, b in enumerate(cont.point_branch):
        if conv_c[k]:
            _merge(coords, found, yc[k], "continuation", b, max(cfg.dedup_tol, 1e-6))
        else:
            near.append((yc[k], float(step_c[k]), "continuation", b))


def _certified_search(
    coords: LogitCoordinates, alpha: float, cfg: SolverConfig, bound: float, found: list[_Found]
) -> tuple[bool, str]:
    """(complete, completeness note): the certified subdivision search for all fixed points where asked and
    small enough, its roots polished, de-duplicated and merged into ``found``; complete when they are all the
    points listed."""
    complete, completeness = False, "multistart and continuation: no proof that the list is complete"
    if cfg.complete_search and coords.dim > cfg.max_complete_input_dim:
        completeness += f" (no certified search: {coords.dim} coordinates > {cfg.max_complete_input_dim})"
    elif cfg.complete_search:
        search = enumerate_all(coords, alpha, max_dim=cfg.max_complete_dim)
        completeness = search.note
        if search.complete:
            # boxes were inflated, so one root may sit in two certified boxes: polish and de-duplicate
            y_r, res_r = newton(
                coords,
                np.array(search.roots, dtype=float).reshape(len(search.roots), coords.dim),
                alpha,
                cfg.newton_settings,
                bound,
            )
            # each box is certified to hold exactly one root: none is dropped, however ill-conditioned
            y_r, res_r, step_r, _ = polish(coords, y_r, res_r, alpha, cfg.newton_settings, bound)
            keep = res_r < cfg.tol
            roots = dedup(coords, y_r[keep], res_r[keep], cfg.dedup_tol, step_r[keep], cfg.near_radius)
            n_before = len(found)
            for root, _ in roots:
                _merge(coords, found, root, "certified search", None, cfg.dedup_tol)
            complete = len(found) == len(roots)
            completeness += (
                f"; it holds {len(roots)} fixed point(s), multistart and continuation found {n_before}"
            )
    if not complete:
        completeness += "; for Pi*_alpha proven complete run `ers-exact optimal-set`"
    return complete, completeness


def _describe(
    coords: LogitCoordinates, found: list[_Found], alpha: float, cfg: SolverConfig, base: float
) -> tuple[FixedPoint, ...]:
    if not found:
        return ()
    n = len(found)
    ys = np.array([f.y for f in found]).reshape(n, coords.dim)
    pols = coords.to_policy(ys)
    J, res, rho = np.empty(n), np.empty(n), np.empty(n)
    step = max(1, coords.memory_budget // policy_bytes(coords))  # the Jacobians [step, D, D] under the budget
    certified: list[bool | None] = [None] * n
    certify = cfg.certify and coords.dim <= cfg.max_certify_dim
    with Progress(
        n * (2 if certify else 1), f"{n} fixed points: stability, certificates", cfg.progress
    ) as bar:
        for lo in range(0, n, step):
            part = slice(lo, lo + step)
            ev = coords.evaluate(ys[part], alpha, jacobian=True)
            assert ev.jacobian is not None
            J[part] = ev.J
            res[part] = coords.residual(ys[part], alpha, image=ev.values)
            rho[part] = [np.abs(np.linalg.eigvals(j)).max() if j.size else 0.0 for j in ev.jacobian]
            del ev
            bar.update(len(ys[part]))
        if certify:
            certified = list(
                certify_points(certificate_coordinates(coords, cfg, base), ys, alpha, on_certified=bar.update)
            )
            bar.update(n - sum(bool(c) for c in certified))  # the points no radius certified
    j_star = J.max()
    tol = cfg.optimal_tol * reward_unit(coords.tree)  # in the game's reward units
    points = []
    order = {"multistart": 0, "continuation": 1, "certified search": 2}
    for k, f in enumerate(found):
        cert = certified[k]
        method = "+".join(sorted(f.methods, key=order.__getitem__))
        points.append(
            FixedPoint(
                policy=tuple(p[k] for p in pols),
                y=f.y,
                J=float(J[k]),
                residual=float(res[k]),
                spectral_radius=float(rho[k]),
                stable=bool(rho[k] < 1 - cfg.stable_margin),
                certified=cert,
                optimal=bool(J[k] >= j_star - tol),
                basin=f.basin,
                method=method,
                branch=f.branch,
            )
        )
    points.sort(key=lambda p: (-p.J, p.spectral_radius))
    return tuple(points)
