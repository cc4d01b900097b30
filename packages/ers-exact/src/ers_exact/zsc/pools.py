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
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import softmax_policy
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.zsc.config import POOL_SOURCES, UNSEEN_POOL_SEED_OFFSET, PoolConfig
from ers_exact.zsc.iql import IQLConfig, train_iql_batch

__all__ = ["POOL_SOURCES", "UNSEEN_POOL_SEED_OFFSET", "Pool", "PoolConfig", "build_pool", "build_pools"]

#: a pool Pi' of self-play policies (per policy, per agent [K_i, |A^i|]) and the policy its agent deploys for SP
Pool = tuple[list[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def build_pool(tree: HistoryTree, config: PoolConfig, seed: int) -> Pool:
    """(k Boltzmann pool policies, the agent's SP deployment), all seeded by ``seed``.

    ``"iql"``: k IQL runs as softmax(Q / alpha); the SP deployment is the best-J greedy policy (ties
    split evenly). ``"exact"``: k distinct points of Pi*_alpha sampled from a multistart solve (as many as
    it finds where Pi*_alpha holds fewer: three-lever's at alpha 0.25 is one point); the SP deployment is the
    first of them. Raises ``ValueError`` for another ``config.source``."""
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
        return [_exact_pool(tree, cfg, s) for s in seeds]
    raise ValueError(f"unknown pool {cfg.source!r}: 'iql' or 'exact'")


def _iql_pool(tree: HistoryTree, tables: tuple[np.ndarray, ...], cfg: PoolConfig) -> Pool:
    boltz = softmax_policy(tree, tables, cfg.alpha)
    pool = [tuple(p[r] for p in boltz) for r in range(cfg.k)]
    greedy = softmax_policy(tree, tables, 1e-9)  # ties split evenly
    J = np.asarray(expected_return(tree, greedy))
    best = int(np.argmax(J))
    return pool, tuple(p[best] for p in greedy)


def _exact_pool(tree: HistoryTree, cfg: PoolConfig, seed: int) -> Pool:
    # the solve command's starts at least: 16 missed three-lever's optimum at alpha 0.25 (J 1.8807 against
    # J* 1.8964), so the "optimal" pool was a suboptimal fixed point
    starts = max(SolverConfig().n_starts, 2 * cfg.k)
    fs = solve_fixed_points(
        tree, cfg.alpha, SolverConfig(n_starts=starts, seed=seed, complete_search=False, certify=False)
    )
    optimal = list(fs.optimal_points)
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(optimal), size=min(cfg.k, len(optimal)), replace=False)
    pool = [optimal[int(p)].policy for p in picks]
    return pool, pool[0]
