"""Other-play on tabular games: maximise OP^Phi(pi) = mean_{phi in Phi} XP(pi, phi(pi)) (eq. other-play).

OP is a polynomial in the policy entries with many local optima: in the three-lever game, Adam from one
random start stops at 1, 7/6 or 0.999 about three times in four (the optimum is 4/3). Each of the m
seeds ("trainings", as in the paper) therefore runs

* **Adam on the exact gradient** (:func:`op_gradient`; J is multilinear in the policy entries and the
  partner's phi(pi) is differentiated back through the history maps of phi) from ``restarts`` starts,
  all seeds' starts in one vectorised batch: random logits; *symmetrised* random starts (S(pi) =
  mean_phi phi(pi), e.g. a uniform first lever); and the seed's deterministic optimum (below) mixed
  with uniform play, so optima that need stochastic play are reached from the best deterministic point.
  An entropy bonus annealed to 0 over the first half keeps early policies mixed (with shared parameters
  a coordination term like u^2 has no first-order pull at u = 0); then a polish rounds rows above
  ``polish_threshold`` to one-hot when that does not lower OP, and a best-improvement local search sets
  single rows to pure actions while that raises OP (it finishes runs the softmax left at 0.98 on a
  wrong lever). The seed's result is its first start that reaches its best value (the restarts make a
  seed reliable; they are not a selection on J).
* **Exact OP over deterministic policies**, when there are at most ``exhaustive`` joint profiles: every
  deterministic policy *tree* (one legal action at each local history the agent's own earlier actions
  reach; histories it never reaches play uniformly and enter no XP value) is enumerated, one shared
  tree or one per agent, and OP^Phi of each profile is computed exactly in batches: the optimum over
  deterministic policies. Each seed draws one of the optimal profiles with the best J at random (the
  three relabelled conventions of the three-lever game), so independent seeds still break symmetries
  independently, and it replaces the seed's gradient result only when it is better by more than 1e-6
  (where OP is flat, e.g. the toy game under its learned swap, the trained policy stays).

The result's ``policy`` is the best OP value across seeds, ties (within 1e-6) broken by self-play J: the
OP optimum found, which ``ers-exact op`` reports (``ers_exact.deployment.deploy_index`` under
``"op_value"``). Every seed's policy is kept (``seed_policies``), so the population pipeline deploys by its
own rule (``PopulationConfig.select_by``; the paper keeps the best J, and with exact objectives OP-suboptimal
seeds can have a higher J). Parameter sharing (one policy for agents whose local history trees coincide) is the default and
an option: the two-lever OP^{Phi_MDP} optimum is 5/4 with it (and needs a mixed policy: deterministic
shared ones reach 1) and 3/2 without (tests/exact/zsc/test_other_play.py).

This module holds the training: the seeds, the exact search's picks, the deployment (:class:`OPResult`,
:func:`train_other_play`, :func:`solve_other_play`); the softmax parameterisation, the starts, Adam, the
budget check and the polish are :mod:`ers_exact.zsc.op_ascent`. The exact
OP^Phi values and gradients are :mod:`ers_exact.zsc.op_objective` (:func:`op_values`, :func:`op_gradient`,
:func:`symmetry_set` and :func:`played_histories` are re-exported here); the search over deterministic
policies and the row search are :mod:`ers_exact.zsc.op_search`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ers_exact.deployment import deploy_index
from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.transformation import Transformation
from ers_exact.util.progress import Progress
from ers_exact.zsc.config import DEFAULT_EXHAUSTIVE, SYMMETRY_SETS, OPConfig
from ers_exact.zsc.iql import same_local_trees
from ers_exact.zsc.op_ascent import ascent_work, check_budget, gradient_runs
from ers_exact.zsc.op_objective import (
    op_gradient,
    op_values,
    played_histories,
    symmetry_maps,
    symmetry_set,
)
from ers_exact.zsc.op_search import DeterministicProfiles, deterministic_search

__all__ = [
    "DEFAULT_EXHAUSTIVE",
    "SYMMETRY_SETS",
    "OPConfig",
    "OPResult",
    "op_gradient",
    "op_values",
    "played_histories",
    "solve_other_play",
    "symmetry_set",
    "train_other_play",
]

_TIE = 1e-6  # OP / J values within this are ties


@dataclass(frozen=True, eq=False)
class OPResult:
    """The deployed OP policy, what every seed reached, and how it was found."""

    policy: tuple[np.ndarray, ...]  # per agent [K_i, |A^i|]
    op_value: float  # OP^Phi of the deployed policy
    J: float  # its self-play return
    seed_op_values: tuple[float, ...]
    seed_J: tuple[float, ...]
    seed_methods: tuple[str, ...] = ()  # per seed: "deterministic" (exhaustive) or "gradient"
    method: str = ""
    share: bool = True  # parameters were shared (requested and every agent's history tree is the same)
    n_symmetries: int = 0  # |Phi|
    symmetries: str = "given"  # the set's name ("mdp", "none") or "given"
    deterministic_profiles: int = 0  # deterministic joint profiles enumerated (0: over the budget)
    deterministic_optimum: float | None = None  # max OP over them
    game: str = ""
    horizon: int = 0
    seconds: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)
    played: tuple[
        dict[str, Any], ...
    ] = ()  # the histories the deployed policy reaches: :func:`played_histories`
    seed_policies: tuple[tuple[np.ndarray, ...], ...] = ()  # every seed's policy, as ``policy``

    def to_json(self, with_policy: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "game": self.game,
            "horizon": self.horizon,
            "symmetries": self.symmetries,
            "n_symmetries": self.n_symmetries,
            "share": self.share,
            "op_value": self.op_value,
            "J": self.J,
            "method": self.method,
            "seed": self.config.get("seed"),
            "seeds": self.config.get("seeds"),
            "seed_op_values": list(self.seed_op_values),
            "seed_J": list(self.seed_J),
            "seed_methods": list(self.seed_methods),
            "deterministic_profiles": self.deterministic_profiles,
            "deterministic_optimum": self.deterministic_optimum,
            "seconds": round(self.seconds, 4),
            "config": self.config,
            "played": list(self.played),
        }
        if with_policy:
            out["policy"] = [p.tolist() for p in self.policy]  # usable by `ers-exact value --policy`
        return out


# --- deployment ----------------------------------------------------------------------------------------


def _pick(op: np.ndarray, J: np.ndarray, rng: np.random.Generator | None = None) -> int:
    """Best OP, ties by J; remaining ties drawn at random (or the first without ``rng``)."""
    best = np.flatnonzero(op >= op.max() - _TIE)
    best = best[J[best] >= J[best].max() - _TIE]
    return int(best[0] if rng is None else rng.choice(best))


# --- training ------------------------------------------------------------------------------------------

_Pick = tuple[tuple[np.ndarray, ...], float, float]  # a seed's policy, its OP value and its J
_SeedResult = tuple[tuple[np.ndarray, ...], float, float, str]  # ... and how it was found


def _exact_picks(
    tree: HistoryTree, det: DeterministicProfiles | None, shared: bool, rngs: Sequence[np.random.Generator]
) -> Sequence[_Pick | None]:
    """Each seed's draw among the deterministic profiles with the best OP, ties by J (None without a search)."""
    if det is None:
        return [None] * len(rngs)
    picks = [_pick(det.op, det.J, rng) for rng in rngs]
    return [(det.policy(tree, p, shared), float(det.op[p]), float(det.J[p])) for p in picks]


def _seed_results(
    exact: Sequence[_Pick | None], pols: tuple[np.ndarray, ...], op: np.ndarray, J: np.ndarray, restarts: int
) -> list[_SeedResult]:
    """Per seed: its first start at its best OP value, unless the exact search beats it by more than
    ``_TIE`` (the exact search rescues a stuck seed)."""
    results: list[_SeedResult] = []
    for s, pick in enumerate(exact):
        ops = op[s * restarts : (s + 1) * restarts]
        r = s * restarts + int(np.flatnonzero(ops >= ops.max() - _TIE)[0])  # the first start at the best
        if pick is not None and pick[1] > op[r] + _TIE:
            results.append((pick[0], pick[1], pick[2], "deterministic"))
        else:
            results.append((tuple(p[r] for p in pols), float(op[r]), float(J[r]), "gradient"))
    return results


def _method(config: OPConfig, n_det: int, searched: bool) -> str:
    """How the result was found, in words (``OPResult.method``)."""
    grad_desc = (
        f"Adam on the exact OP gradient from {config.restarts} starts per seed (random, symmetrised"
        + (", deterministic optimum + uniform" if searched and config.restarts > 2 else "")
        + f"), polish, {config.row_search} rounds of single-row local search"
    )
    if searched:
        return f"{grad_desc}; exact OP over all {n_det:,} deterministic policy profiles where it does better"
    over = f"{n_det:,} deterministic profiles > budget {config.exhaustive:,}"
    return f"{grad_desc}; no exhaustive search ({'disabled' if config.exhaustive == 0 else over})"


def _ascent_bar(
    tree: HistoryTree, config: OPConfig, progress: bool | Progress | None
) -> AbstractContextManager[Progress]:
    """The Adam phase's progress bar: the caller's (a :class:`Progress`, e.g. ``zsc``'s over every agent's
    runs), else one of its own over ``seeds x restarts`` starts x ``steps`` (shown when ``progress``, or for
    None when stderr is a terminal, as every bar of ers-exact)."""
    if isinstance(progress, Progress):
        return nullcontext(progress)
    desc = (
        f"other-play {tree.game.name}: {config.seeds} seeds x {config.restarts} starts, "
        f"{config.steps} Adam steps"
    )
    return Progress(ascent_work(config), desc, enabled=progress)


def train_other_play(
    tree: HistoryTree,
    phis: Sequence[Transformation],
    config: OPConfig = OPConfig(),
    progress: bool | Progress | None = None,
) -> OPResult:
    """Maximise OP^Phi for ``config.seeds`` seeds (each: exact over deterministic profiles when there are
    at most ``config.exhaustive``, and Adam from ``config.restarts`` starts); deploy the best.
    ``progress``: a bar over the Adam phase's starts x steps (None: when stderr is a terminal; a
    :class:`~ers_exact.util.progress.Progress` is advanced instead of drawing a bar of its own)."""
    start = time.perf_counter()
    check_tree(tree)
    # OP is a mean over Phi: a canonical order makes the result a function of the set, not of its listing
    maps = symmetry_maps(tree, sorted(phis, key=lambda p: (p.actions, p.observations, p.states)))
    shared = bool(config.share) and same_local_trees(tree)
    check_budget(tree, maps, shared, config)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(config.seeds)]
    n_det, det = (
        (0, None) if config.exhaustive == 0 else deterministic_search(tree, maps, shared, config.exhaustive)
    )
    exact = _exact_picks(tree, det, shared, rngs)
    warm = [e[0] if e else None for e in exact]
    with _ascent_bar(tree, config, progress) as bar:
        runs = gradient_runs(tree, maps, shared, config, rngs, warm, bar)
    results = _seed_results(exact, *runs, config.restarts)
    k = deploy_index([r[2] for r in results], [r[1] for r in results], "op_value", tie=_TIE)
    return OPResult(
        policy=results[k][0],
        op_value=results[k][1],
        J=results[k][2],
        seed_op_values=tuple(r[1] for r in results),
        seed_J=tuple(r[2] for r in results),
        seed_methods=tuple(r[3] for r in results),
        method=_method(config, n_det, det is not None),
        share=shared,
        n_symmetries=len(maps),
        deterministic_profiles=n_det if det is not None else 0,
        deterministic_optimum=float(det.op.max()) if det is not None else None,
        game=tree.game.name,
        horizon=tree.game.horizon,
        seconds=time.perf_counter() - start,
        config=config.to_json(),
        played=played_histories(tree, results[k][0], phis),
        seed_policies=tuple(r[0] for r in results),
    )


def solve_other_play(
    tree: HistoryTree,
    symmetries: str | Sequence[Transformation] = "mdp",
    config: OPConfig = OPConfig(),
    progress: bool | Progress | None = None,
) -> OPResult:
    """The library entry point of ``ers-exact op``: Phi by name (:data:`SYMMETRY_SETS`) or as a list of
    transformations, then :func:`train_other_play` (``progress``: its bar)."""
    name = symmetries if isinstance(symmetries, str) else "given"
    phis = symmetry_set(tree, symmetries) if isinstance(symmetries, str) else list(symmetries)
    return replace(train_other_play(tree, phis, config, progress), symmetries=name)
