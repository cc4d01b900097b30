"""Pools Pi' of self-play policies, the input of ER-symmetry discovery (paper, Section "Learning ER
symmetries"): k Boltzmann policies softmax(Q / alpha) from independent IQL runs (the paper's recipe), or
k self-play-optimal Boltzmann fixed points picked from the exact solver's Pi*_alpha. Each pool comes with
the policy its agent deploys for self-play (SP) in the zero-shot-coordination pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ers_exact.model.histories import HistoryTree, check_tree
from ers_exact.model.transformation import apply_to_policy, with_images
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import softmax_policy
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.symmetry.mdp_group import decpomdp_group
from ers_exact.zsc.config import POOL_SOURCES, UNSEEN_POOL_SEED_OFFSET, PoolConfig
from ers_exact.zsc.iql import IQLConfig, train_iql_batch

__all__ = [
    "EXACT_POOL_SOLVE_SEED",
    "POOL_SOURCES",
    "UNSEEN_POOL_SEED_OFFSET",
    "Pool",
    "PoolConfig",
    "build_pool",
    "build_pools",
    "optimal_points",
]

#: a pool Pi' of self-play policies (per policy, per agent [K_i, |A^i|]) and the policy its agent deploys for SP
Pool = tuple[list[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def build_pool(tree: HistoryTree, config: PoolConfig, seed: int) -> Pool:
    """(k Boltzmann pool policies, the agent's SP deployment), all seeded by ``seed``.

    ``"iql"``: k IQL runs as softmax(Q / alpha); the SP deployment is the best-J greedy policy (ties
    split evenly). ``"exact"``: k distinct points of Pi*_alpha (``optimal_points``; as many as there are where
    Pi*_alpha holds fewer), ``seed`` choosing which; the SP deployment is the first of them. Raises
    ``ValueError`` for another ``config.source``."""
    return build_pools(tree, config, [seed])[0]


def build_pools(
    tree: HistoryTree, config: PoolConfig, seeds: Sequence[int], progress: bool | None = False
) -> list[Pool]:
    """:func:`build_pool` for each seed; the IQL pools train together as one batch of runs
    (:func:`~ers_exact.zsc.iql.train_iql_batch`: each the same as alone; ``progress``: its bar)."""
    check_tree(tree)
    cfg = config
    if cfg.source == "iql":
        base = IQLConfig(
            runs=cfg.k, episodes=cfg.episodes, epsilon=cfg.epsilon, learning_rate=cfg.learning_rate
        )
        trained = train_iql_batch(tree, [replace(base, seed=s) for s in seeds], progress=progress)
        return [_iql_pool(tree, tables, cfg) for tables in trained]
    if cfg.source == "exact":
        optimal = optimal_points(tree, cfg.alpha, cfg.k)
        return [_exact_pool(optimal, cfg, s) for s in seeds]
    raise ValueError(f"unknown pool {cfg.source!r}: 'iql' or 'exact'")


def _iql_pool(tree: HistoryTree, tables: tuple[np.ndarray, ...], cfg: PoolConfig) -> Pool:
    boltz = softmax_policy(tree, tables, cfg.alpha)
    pool = [tuple(p[r] for p in boltz) for r in range(cfg.k)]
    greedy = softmax_policy(tree, tables, 1e-9)  # ties split evenly
    J = np.asarray(expected_return(tree, greedy))
    best = int(np.argmax(J))
    return pool, tuple(p[best] for p in greedy)


#: the seed of the multistart solve behind every exact pool: one solve for all of a config's pools, so every
#: agent's points share one J (each pool's own seed missed the optimum by 3e-5 to 7e-5 on three-lever at alpha
#: 0.25 for some seeds, 500, 1000 and 1001 among them)
EXACT_POOL_SOLVE_SEED = 0


def optimal_points(tree: HistoryTree, alpha: float, k: int = 1) -> list[tuple[np.ndarray, ...]]:
    """The self-play-optimal Boltzmann fixed points at ``alpha`` that exact pools draw from: those of one
    multistart solve (seed ``EXACT_POOL_SOLVE_SEED``, at least 2 k starts), with their images under every
    Dec-POMDP symmetry (which map Pi*_alpha onto itself: paper, appendix; the solve alone returned one of
    three-lever's 6 optimal points at alpha 0.25), distinct within 1e-9. Not certified complete
    (``ers-exact symmetries --prove-optimal-set`` proves a set)."""
    # the solve command's starts at least: 16 missed three-lever's optimum at alpha 0.25 (J 1.8807 against
    # J* 1.8964), so the "optimal" pool was a suboptimal fixed point
    starts = max(SolverConfig().n_starts, 2 * k)
    fs = solve_fixed_points(
        tree,
        alpha,
        SolverConfig(n_starts=starts, seed=EXACT_POOL_SOLVE_SEED, complete_search=False, certify=False),
    )
    return with_images(
        [p.policy for p in fs.optimal_points],
        decpomdp_group(tree.game).policy_parts,
        lambda phi, pi: apply_to_policy(tree, phi, pi),
        lambda pi: np.concatenate([a.ravel() for a in pi]),
    )


def _exact_pool(optimal: list[tuple[np.ndarray, ...]], cfg: PoolConfig, seed: int) -> Pool:
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(optimal), size=min(cfg.k, len(optimal)), replace=False)
    pool = [optimal[int(p)] for p in picks]
    return pool, pool[0]
