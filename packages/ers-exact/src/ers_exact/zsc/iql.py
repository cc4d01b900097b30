"""Tabular independent Q-learning (IQL) on local histories, as in the paper's appendix (three-lever game:
k = 20 self-play policies, 10,000 episodes, epsilon = 0.1 epsilon-greedy behaviour, learning rate 0.1),
turned into Boltzmann policies softmax(Q / alpha).

All k runs advance together (vectorised over runs); each episode samples s_0 ~ b_0, s' ~ T, o ~ U along
the way. With ``shared=True`` (the paper's "shared Q-values") agents whose local history trees coincide
use one Q-table per run. Greedy ties are broken uniformly at random, otherwise every run would pick the
lowest-index convention of a symmetric game.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import softmax_policy

__all__ = ["IQLConfig", "child_table", "iql_pool", "same_local_trees", "train_iql"]


@dataclass(frozen=True)
class IQLConfig:
    """Hyper-parameters of tabular IQL (defaults: the paper's three-lever appendix)."""

    runs: int = 20  # k independent self-play policies
    episodes: int = 10_000
    epsilon: float = 0.1
    learning_rate: float = 0.1
    shared: bool = True  # one Q-table for agents with identical local history trees
    seed: int = 0


def child_table(tree: HistoryTree, agent: int) -> np.ndarray:
    """child[k, a, o] = index of the local history (tau_k, a, o), -1 when impossible.  # [K, A, O]"""
    hist = tree.local[agent]
    out = np.full(
        (len(hist), tree.game.n_actions[agent], tree.game.n_observations[agent]), -1, dtype=np.int64
    )
    k = np.arange(1, len(hist))
    out[hist.parent[k], hist.action[k], hist.observation[k]] = k
    return out


def same_local_trees(tree: HistoryTree) -> bool:
    """Every agent has the same local history tree (same indices, actions, observations, legal sets)."""
    first = tree.local[0]
    return all(
        len(h) == len(first)
        and np.array_equal(h.parent, first.parent)
        and np.array_equal(h.action, first.action)
        and np.array_equal(h.observation, first.observation)
        and np.array_equal(h.legal, first.legal)
        for h in tree.local[1:]
    )


def _sample(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of ``probs`` [R, K]."""
    return (
        (rng.random((probs.shape[0], 1)) > np.cumsum(probs, axis=1)).sum(axis=1).clip(max=probs.shape[1] - 1)
    )


def train_iql(tree: HistoryTree, config: IQLConfig = IQLConfig()) -> tuple[np.ndarray, ...]:
    """Q-tables per agent, [runs, K_i, |A^i|] (the same array for agents sharing Q-values)."""
    game, R = tree.game, config.runs
    rng = np.random.default_rng(config.seed)
    n = game.n_agents
    shared = config.shared and n > 1 and same_local_trees(tree)
    tables = [np.zeros((R,) + (len(h), game.n_actions[h.agent])) for h in tree.local]
    if shared:
        tables = [tables[0]] * n
    children = [child_table(tree, i) for i in range(n)]
    runs = np.arange(R)
    for _ in range(config.episodes):
        s = _sample(rng, np.broadcast_to(game.initial_belief, (R, game.n_states)))
        hist = [np.zeros(R, dtype=np.int64) for _ in range(n)]
        for t in range(game.horizon):
            acts = []
            for i in range(n):
                legal = tree.local[i].legal[hist[i]]
                q = np.where(legal, tables[i][runs, hist[i]], -np.inf) + 1e-9 * rng.random(legal.shape)
                explore = rng.random(R) < config.epsilon
                random_legal = _sample(rng, legal / legal.sum(axis=1, keepdims=True))
                acts.append(np.where(explore, random_legal, np.argmax(q, axis=1)))
            a = np.ravel_multi_index(tuple(acts), game.n_actions)
            s_next = _sample(rng, game.transition[s, a])
            o = _sample(rng, game.observation[a, s_next])
            r = game.reward[s, a, s_next]
            for i in range(n):
                target = r.copy()
                if t + 1 < game.horizon:
                    nxt = children[i][hist[i], acts[i], game.joint_observations[o, i]]
                    target += game.discount * np.where(
                        tree.local[i].legal[nxt], tables[i][runs, nxt], -np.inf
                    ).max(axis=1)
                    hist_next = nxt
                td = target - tables[i][runs, hist[i], acts[i]]
                np.add.at(tables[i], (runs, hist[i], acts[i]), config.learning_rate * td)
                if t + 1 < game.horizon:
                    hist[i] = hist_next
            s = s_next
    return tuple(tables)


def iql_pool(
    tree: HistoryTree, alpha: float, config: IQLConfig = IQLConfig()
) -> list[tuple[np.ndarray, ...]]:
    """k IQL runs turned into Boltzmann policies softmax(Q / alpha): a list of joint policies."""
    tables = train_iql(tree, config)
    batched = softmax_policy(tree, tables, alpha)
    return [tuple(p[r] for p in batched) for r in range(config.runs)]
