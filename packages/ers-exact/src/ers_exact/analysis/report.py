"""Symmetry reports: Phi_MDP and Phi_ER of a game at one alpha (``symmetry_report``) and over a grid of
alphas (``atlas``), with the group checks of the paper (closure, Phi_MDP <= Phi_ER)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.transformation import (
    Transformation,
    apply_to_log_policy,
    distinct_on_policies,
    with_images,
)
from ers_exact.solve.boltzmann import LogitCoordinates, TemperatureError
from ers_exact.solve.config import repeated_alpha
from ers_exact.solve.fixed_points import FixedPointSet, SolverConfig, solve_fixed_points
from ers_exact.symmetry.er import MAX_EXHAUSTIVE, er_symmetries
from ers_exact.symmetry.groups import is_subset, summarise
from ers_exact.symmetry.mdp_group import MdpGroup, decpomdp_group, format_order
from ers_exact.symmetry.search import policy_part_order, psi_order

__all__ = ["ER_MAX_SECONDS", "atlas", "symmetry_report"]

#: Time budget of Phi_ER's generator search in a report; past it the order is reported as a lower bound.
ER_MAX_SECONDS = 120.0


def symmetry_report(
    tree: HistoryTree,
    alpha: float,
    config: SolverConfig | None = None,
    max_elements: int = 10_000,
    tol: float = 1e-8,
    er_method: str = "auto",
    prove_seconds: float = 0.0,
    prove_workers: int = 1,
) -> dict[str, Any]:
    """Phi_MDP (by generators and order, listed only up to ``max_elements``), Phi_ER (against the solver's
    whole optimal set) and how they relate.

    ``prove_seconds`` > 0: first prove Pi*_alpha complete by the certified branch-and-bound of
    :func:`~ers_exact.solve.optimal_set.certified_optimal_set` (the solver's points as its candidates, Phi_MDP's
    relabellings as its fundamental domain) within that many seconds; where it is proven, the pool is every
    fixed point it lists within ``tol`` of J*, so Phi_ER is the paper's group against all of Pi*_alpha (also
    where the solver missed the optimum). Where it is not, the solver's pool is used and the report says so.
    ``prove_workers``: that search's worker processes (``OptimalSetConfig.workers``).

    ``er_method``: 'exhaustive' (test every admissible candidate of Psi's policy part, then summarise the
    members as a group), 'generators' (:func:`~ers_exact.symmetry.er_group.er_group`: by generators and
    order, no listing) or 'auto' (exhaustive while Psi's policy part has at most
    :data:`~ers_exact.symmetry.er.MAX_EXHAUSTIVE` elements)."""
    game = check_tree(tree).game
    cfg = config or SolverConfig()
    if er_method == "auto":
        er_method = "exhaustive" if policy_part_order(game) <= MAX_EXHAUSTIVE else "generators"
    if er_method not in ("exhaustive", "generators"):
        raise ValueError(f"unknown er_method {er_method!r}: use 'exhaustive', 'generators' or 'auto'")
    group = decpomdp_group(game)
    mdp = list(group.policy_parts)  # what acts on policies: one element per distinct policy part
    fps = solve_fixed_points(tree, alpha, cfg)
    found = _log_policies(tree, [p.y for p in fps.optimal_points])  # log pi: exact where pi underflows
    complete, J_star, proof, n_listed = fps.complete, fps.J_star, None, None
    if prove_seconds > 0:
        proven, proof = _proven_optimal_set(
            tree, alpha, fps, mdp, prove_seconds, tol, cfg.progress, prove_workers
        )
        if proven is not None:
            found, J_star, complete = proven[0], proven[1], True
            n_listed = len(found)
    log_pool = _close_under(tree, found, mdp)  # Phi_MDP maps Pi*_alpha onto itself (paper, appendix)
    test = _PoolTest(tree, log_pool, alpha, J_star, tol, complete, cfg.progress)
    if er_method == "generators":
        er = _er_by_generators(test, group, mdp, max_elements)
    else:
        er = _er_exhaustive(test, mdp, proof is not None and proof["complete"], max_elements)
    listed = list(group.elements(max_elements)) if group.order <= max_elements else []
    return {
        "game": game.name,
        "horizon": game.horizon,
        "alpha": alpha,
        "psi_order": _big(psi_order(game)),
        "psi_order_text": format_order(psi_order(game)),
        "psi_order_on_policies": policy_part_order(game),
        "pool_size": len(log_pool),
        "pool_found_by_solver": len(fps.optimal_points),
        "pool_listed_by_optimal_set": n_listed,
        "pool_added_by_mdp_images": len(log_pool) - len(found),
        "er_method": er_method,
        "J_star": J_star,
        "n_fixed_points": len(fps.points),
        "fixed_points_complete": fps.complete,
        "completeness": fps.completeness,
        "optimal_set_complete": complete,
        "optimal_set": proof,
        "mdp": {
            **group.to_json(),
            "elements": [m.to_json() for m in listed],
            "elements_listed": group.order <= max_elements,
            "max_elements": max_elements,
            "distinct_on_policies": distinct_on_policies(tree, mdp),
        },
        "er": er.json,
        "mdp_subgroup_of_er": er.mdp_in_er,
        "er_not_mdp_on_policies": er.n_extra,
        "er_not_mdp_examples": [m.to_json() for m in er.extra[:5]],
        "convention": "admissible transformations only (DESIGN.md); Phi_ER = S_|S| x policy part",
    }


@dataclass(frozen=True)
class _PoolTest:
    """What Phi_ER is tested against: the pool Pi' of optimal fixed points at alpha (their log-policies
    ``log_pool``: the ER test's input, exact where probabilities underflow), J*, the tolerance and whether Pi'
    is certified to be all of Pi*_alpha."""

    tree: HistoryTree
    log_pool: list[tuple[np.ndarray, ...]]
    alpha: float
    J_star: float
    tol: float
    complete: bool
    progress: bool | None


@dataclass(frozen=True)
class _ERPart:
    """Phi_ER's part of a report: its JSON, whether Phi_MDP lies in it, how many of its policy parts are not
    Phi_MDP's and some of those (generators, when found by generators)."""

    json: dict[str, Any]
    mdp_in_er: bool
    n_extra: int
    extra: list[Transformation]


def _er_by_generators(t: _PoolTest, group: MdpGroup, mdp: list[Transformation], max_elements: int) -> _ERPart:
    """Phi_ER by generators and order (:func:`~ers_exact.symmetry.er_group.er_group`, Phi_MDP's generators as
    its seeds), never listed."""
    from ers_exact.symmetry.er_group import er_group

    erg = er_group(
        t.tree, None, t.alpha, t.J_star, tol=t.tol, pool_complete=t.complete, seeds=group.generators,
        max_seconds=ER_MAX_SECONDS, progress=t.progress, log_pool=t.log_pool,
    )  # fmt: skip
    mdp_keys = {(m.actions, m.observations) for m in mdp}
    return _ERPart(
        {**erg.to_json(max_elements), "closed": True, "distinct_on_policies": None},  # not listed
        all(erg.contains(m) for m in group.generators),
        erg.order_on_policies - len(mdp),
        [g for g in erg.generators if (g.actions, g.observations) not in mdp_keys],
    )


def _er_exhaustive(
    t: _PoolTest, mdp: list[Transformation], by_optimal_set: bool, max_elements: int
) -> _ERPart:
    """Phi_ER by testing every admissible candidate of Psi's policy part, its members summarised as a group
    (``by_optimal_set``: the pool is Pi*_alpha as optimal-set proved it)."""
    game = t.tree.game
    er = er_symmetries(
        t.tree,
        None,
        t.alpha,
        t.J_star,
        tol=t.tol,
        pool_complete=t.complete,
        progress=t.progress,
        log_pool=t.log_pool,
    )
    er_json = er.to_json(game.n_states, max_elements)
    order = er.order(game.n_states)
    er_json["order_text"] = f"{game.n_states}! * {len(er.members):,} ({format_order(order)})"
    if order >= 2**53:
        er_json["order"] = str(er_json["order"])
    if er.members:
        from ers_exact.symmetry.er_group import label_orbits

        summary = summarise(er.members, include_states=False)
        er_json.update(summary.to_json())
        er_json["n_generators"] = len(summary.generators)
        er_json["orbits"] = label_orbits(summary.generators, tuple(zip(game.n_actions, game.n_observations)))
    er_json["complete"] = True
    er_json["order_is_lower_bound"] = False
    er_json["distinct_on_policies"] = distinct_on_policies(t.tree, er.members)
    er_json["claim"] = (
        f"Phi_ER relative to the pool Pi' (certified all of Pi*_alpha: {t.complete}"
        f"{' by optimal-set' if by_optimal_set else ''}) = S_|S| x the "
        f"{len(er.members):,} admissible policy parts phi with every phi(pi), pi in Pi', an optimal "
        f"Boltzmann fixed point: all {er.n_candidates:,} candidates of Psi's policy part tested"
    )
    mdp_keys = {(m.actions, m.observations) for m in mdp}
    extra = [m for m in er.members if (m.actions, m.observations) not in mdp_keys]
    return _ERPart(er_json, is_subset(mdp, er.members), len(extra), extra)


def _proven_optimal_set(
    tree: HistoryTree,
    alpha: float,
    fps: FixedPointSet,
    relabellings: Sequence[Transformation],
    seconds: float,
    tol: float,
    progress: bool | None,
    workers: int = 1,
) -> tuple[tuple[list[tuple[np.ndarray, ...]], float] | None, dict[str, Any]]:
    """((pool, J*) where Pi*_alpha is proven complete within ``seconds``, else None; the proof's summary)."""
    from ers_exact.solve.config import OptimalSetConfig
    from ers_exact.solve.optimal_set import certified_optimal_set

    cfg = OptimalSetConfig(max_seconds=seconds, progress=progress, workers=workers)
    res = certified_optimal_set(tree, alpha, cfg, candidates=fps, relabellings=relabellings)
    proof = {
        "complete": res.complete,
        "eps": res.eps,
        "J_star": [res.J_star_lo, res.J_star_hi],
        "n_optimal_within_eps": len(res.optimal_points),
        "boxes": res.boxes,
        "workers": res.config.workers,
        "seconds": round(res.seconds, 3),
        "note": res.note,
    }
    if not res.complete or not res.optimal_points:
        return None, proof
    best = max(p.J for p in res.optimal_points)
    pool = _log_policies(tree, [p.y for p in res.optimal_points if best - tol <= p.J])
    return (pool, best), proof


def _big(n: int) -> int | str:
    """An integer for JSON: exact digits as a string beyond float precision (2^53)."""
    return n if n < 2**53 else str(n)


def _log_policies(tree: HistoryTree, ys: Sequence[np.ndarray]) -> list[tuple[np.ndarray, ...]]:
    """log pi(y) of each point, per agent [K_i, |A^i|] (finite on legal actions at any temperature)."""
    return LogitCoordinates(tree).log_pool(np.stack(ys)) if len(ys) else []


def _close_under(
    tree: HistoryTree, pool: list[tuple[np.ndarray, ...]], group: Sequence[Transformation], tol: float = 1e-9
) -> list[tuple[np.ndarray, ...]]:
    """The pool of log-policies with the images of its points under every element of ``group`` (Dec-POMDP
    symmetries map self-play-optimal Boltzmann fixed points onto self-play-optimal Boltzmann fixed points),
    de-duplicated on probabilities (within ``tol``; ``with_images``)."""
    parts = {(g.actions, g.observations): g for g in group}
    return with_images(
        pool,
        parts.values(),
        lambda phi, pi: tuple(lp[0] for lp in apply_to_log_policy(tree, phi, [lp[None] for lp in pi])),
        lambda pi: np.concatenate([np.exp(p).ravel() for p in pi]),
        tol,
    )


#: an atlas row's entries besides alpha (None where the ER test is undefined at that alpha)
_ATLAS_ENTRIES = (
    "pool_size",
    "er_order",
    "er_order_on_policies",
    "mdp_order",
    "mdp_subgroup_of_er",
    "fixed_points_complete",
    "optimal_set_complete",
)


def atlas(
    tree: HistoryTree,
    alphas: Sequence[float],
    config: SolverConfig | None = None,
    prove_seconds: float = 0.0,
    prove_workers: int = 1,
) -> dict[str, Any]:
    """|Pi*_alpha| (found, or proven complete where ``prove_seconds`` allows: :func:`symmetry_report`),
    |Phi_ER(alpha)| and |Phi_MDP| over a grid of alphas. The ER test runs on the fixed points' log-policies, so
    it stays defined where their probabilities underflow; at an alpha where it is undefined all the same (a
    ``TemperatureError``: the solver's temperature check, or a Boltzmann map not finite even in log space) the
    row says so in ``er_undefined`` and its other entries are None (|Phi_MDP|, which does not depend on alpha,
    aside); the other alphas go on."""
    cfg = config or SolverConfig()
    if (repeated := repeated_alpha(alphas)) is not None:
        raise ValueError(f"atlas: alpha {repeated!r} is given more than once; give each once")
    rows = []
    for k, alpha in enumerate(sorted(alphas)):
        try:
            rep = symmetry_report(
                tree,
                alpha,
                replace(cfg, seed=cfg.seed + k),
                max_elements=0,
                prove_seconds=prove_seconds,
                prove_workers=prove_workers,
            )
        except TemperatureError as e:
            rows.append({"alpha": alpha, **dict.fromkeys(_ATLAS_ENTRIES), "er_undefined": str(e)})
            continue
        rows.append(
            {
                "alpha": alpha,
                "pool_size": rep["pool_size"],
                "er_order": rep["er"]["order"],
                "er_order_on_policies": rep["er"]["order_on_policies"],
                "mdp_order": rep["mdp"]["order"],
                "mdp_subgroup_of_er": rep["mdp_subgroup_of_er"],
                "fixed_points_complete": rep["fixed_points_complete"],
                "optimal_set_complete": rep["optimal_set_complete"],
            }
        )
    orders = [r["mdp_order"] for r in rows if r["mdp_order"] is not None]
    for r in rows:  # |Phi_MDP| does not depend on alpha
        r["mdp_order"] = orders[0] if orders else None
    return {
        "game": tree.game.name,
        "horizon": tree.game.horizon,
        "psi_order": _big(psi_order(tree.game)),  # as symmetry_report's: exact digits as a string past 2^53
        "psi_order_on_policies": policy_part_order(tree.game),
        "rows": rows,
    }
