"""The plain IQL loop that ``ers_exact.zsc.iql`` replaced (one training at a time, the generator called at
every draw, ``np.add.at`` updates): the slow reference that the batched, chunk-drawn ``train_iql_batch`` must
equal bit for bit.  It shares no code with the module under test: the child of a local history is found by
looking up the tuple ``tau + (a, o)`` in the tree's local index, and whether the agents share one Q-table is
decided by comparing their local histories as tuples (with their legal sets) directly."""

from __future__ import annotations

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.zsc.iql import IQLConfig

__all__ = ["ref_train_iql"]


def _sample(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of ``probs`` [R, K]."""
    return (
        (rng.random((probs.shape[0], 1)) > np.cumsum(probs, axis=1)).sum(axis=1).clip(max=probs.shape[1] - 1)
    )


def _children(tree: HistoryTree, agent: int) -> np.ndarray:
    """child[k, a, o] = index of the local history tau_k + (a, o), -1 when the tree has no such history."""
    hist, game = tree.local[agent], tree.game
    n_act, n_obs = game.n_actions[agent], game.n_observations[agent]
    out = np.full((len(hist), n_act, n_obs), -1, dtype=np.int64)
    for k in range(len(hist)):
        tau = hist.as_tuple(k)
        for a in range(n_act):
            for o in range(n_obs):
                out[k, a, o] = hist.index.get(tau + (a, o), -1)
    return out


def _identical_local_trees(tree: HistoryTree) -> bool:
    """Every agent's local histories, in index order as tuples, and their legal sets equal agent 0's."""
    first = tree.local[0]
    want = [first.as_tuple(k) for k in range(len(first))]
    return all(
        [h.as_tuple(k) for k in range(len(h))] == want and np.array_equal(h.legal, first.legal)
        for h in tree.local[1:]
    )


def ref_train_iql(tree: HistoryTree, config: IQLConfig) -> tuple[np.ndarray, ...]:
    """Q-tables per agent, [runs, K_i, |A^i|] (the same array for agents sharing Q-values)."""
    game, R = tree.game, config.runs
    rng = np.random.default_rng(config.seed)
    n = game.n_agents
    shared = config.shared and n > 1 and _identical_local_trees(tree)
    tables = [np.zeros((R,) + (len(h), game.n_actions[h.agent])) for h in tree.local]
    if shared:
        tables = [tables[0]] * n
    children = [_children(tree, i) for i in range(n)]
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
