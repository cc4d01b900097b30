"""Pools Pi' of self-play policies, the input of ER-symmetry discovery (paper, Section "Learning ER
symmetries"): k Boltzmann policies softmax(Q / alpha) from independent IQL runs (the paper's recipe), or
k self-play-optimal Boltzmann fixed points picked from the exact solver's Pi*_alpha. Each pool comes with
the policy its agent deploys for self-play (SP) in the zero-shot-coordination pipeline.
"""

from __future__ import annotations

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import softmax_policy
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.zsc.config import POOL_SOURCES, UNSEEN_POOL_SEED_OFFSET, PoolConfig
from ers_exact.zsc.iql import IQLConfig, train_iql

__all__ = ["POOL_SOURCES", "UNSEEN_POOL_SEED_OFFSET", "PoolConfig", "build_pool"]


def build_pool(
    tree: HistoryTree, config: PoolConfig, seed: int
) -> tuple[list[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]:
    """(k Boltzmann pool policies, the agent's SP deployment), all seeded by ``seed``.

    ``"iql"``: k IQL runs as softmax(Q / alpha); the SP deployment is the best-J greedy policy (ties
    split evenly). ``"exact"``: k distinct points of Pi*_alpha sampled from a multistart solve; the SP
    deployment is the first of them. Raises ``ValueError`` for another ``config.source``."""
    cfg = config
    if cfg.source == "iql":
        tables = train_iql(
            tree,
            IQLConfig(
                runs=cfg.k,
                episodes=cfg.episodes,
                epsilon=cfg.epsilon,
                learning_rate=cfg.learning_rate,
                seed=seed,
            ),
        )
        boltz = softmax_policy(tree, tables, cfg.alpha)
        pool = [tuple(p[r] for p in boltz) for r in range(cfg.k)]
        greedy = softmax_policy(tree, tables, 1e-9)  # ties split evenly
        J = np.asarray(expected_return(tree, greedy))
        best = int(np.argmax(J))
        return pool, tuple(p[best] for p in greedy)
    if cfg.source == "exact":
        fs = solve_fixed_points(
            tree,
            cfg.alpha,
            SolverConfig(n_starts=max(16, 2 * cfg.k), seed=seed, complete_search=False, certify=False),
        )
        optimal = list(fs.optimal_points)
        rng = np.random.default_rng(seed)
        picks = rng.choice(len(optimal), size=min(cfg.k, len(optimal)), replace=False)
        pool = [optimal[int(p)].policy for p in picks]
        return pool, pool[0]
    raise ValueError(f"unknown pool {cfg.source!r}: 'iql' or 'exact'")
