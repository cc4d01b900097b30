"""Tabular independent Q-learning (IQL) on local histories, as in the paper's appendix (three-lever game:
k = 20 self-play policies, 10,000 episodes, epsilon = 0.1 epsilon-greedy behaviour, learning rate 0.1),
turned into Boltzmann policies softmax(Q / alpha).

All k runs advance together (vectorised over runs); each episode samples s_0 ~ b_0, s' ~ T, o ~ U along
the way. With ``shared=True`` (the paper's "shared Q-values") agents whose local history trees coincide
use one Q-table per run. Greedy ties are broken uniformly at random, otherwise every run would pick the
lowest-index convention of a symmetric game.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.solve.boltzmann import softmax_policy
from ers_exact.util.progress import Progress

__all__ = ["IQLConfig", "child_table", "iql_pool", "same_local_trees", "train_iql", "train_iql_batch"]


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


#: uniform draws held at once per training (episodes are drawn in chunks of about this many floats)
_CHUNK_FLOATS = 2_000_000


def _draw(u: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """One categorical draw per row: the first index whose cumulative probability reaches ``u``, as
    ``(u > cum).sum()`` clipped to the last index (rows of ``cum`` [R, K], u [R])."""
    return np.minimum((u[:, None] > cum).sum(axis=1), cum.shape[1] - 1)


def _layout(tree: HistoryTree, R: int) -> tuple[int, list[list[tuple[int, int, int]]], list[tuple[int, int]]]:
    """Where each draw of an episode sits in its uniform block, in the order the generator produced them
    for the reference loop (s_0; per step and agent: tie noise [R, A_i], explore [R], random legal [R];
    then s' and o): (floats per episode, per step per agent (noise, explore, legal) offsets, per step (s', o))."""
    game, off = tree.game, R
    agents, chance = [], []
    for _ in range(game.horizon):
        step = []
        for i in range(game.n_agents):
            A = game.n_actions[i]
            step.append((off, off + R * A, off + R * A + R))
            off += R * A + 2 * R
        agents.append(step)
        chance.append((off, off + R))
        off += 2 * R
    return off, agents, chance


def train_iql(tree: HistoryTree, config: IQLConfig = IQLConfig()) -> tuple[np.ndarray, ...]:
    """Q-tables per agent, [runs, K_i, |A^i|] (the same array for agents sharing Q-values)."""
    return train_iql_batch(tree, [config])[0]


def train_iql_batch(
    tree: HistoryTree, configs: Sequence[IQLConfig], progress: bool | None = None
) -> list[tuple[np.ndarray, ...]]:
    """Several IQL trainings that differ only in their seed, advanced together as one batch of runs: each
    result equals ``train_iql(tree, config)`` bit for bit (each training draws its own generator's uniforms
    in the same order, a chunk of episodes at a time, so the Python loop runs once per step, not once per
    step and training). ``progress``: a bar over episodes (None: when stderr is a terminal)."""
    if not configs:
        return []
    first = configs[0]
    if any(replace(c, seed=first.seed) != first for c in configs):
        raise ValueError("train_iql_batch: the configs may differ only in their seed")
    game, R, B, n = tree.game, first.runs, len(configs), tree.game.n_agents
    rngs = [np.random.default_rng(c.seed) for c in configs]
    shared = first.shared and n > 1 and same_local_trees(tree)
    tables = [np.zeros((B * R, len(h), game.n_actions[h.agent])) for h in tree.local]
    if shared:
        tables = [tables[0]] * n
    run = _Batch(tree, first, B)
    chunk = max(1, _CHUNK_FLOATS // (run.per * B))
    with Progress(first.episodes, f"IQL {game.name}: {B} x {R} runs", enabled=progress) as bar:
        for lo in range(0, first.episodes, chunk):
            E = min(chunk, first.episodes - lo)
            block = np.stack([rng.random(E * run.per).reshape(E, run.per) for rng in rngs])  # [B, E, per]
            for e in range(E):
                run.episode(block[:, e], tables)
            bar.update(E)
    if B == 1:
        return [tuple(tables)]
    return [tuple(tb[b * R : (b + 1) * R] for tb in tables) for b in range(B)]


class _Batch:
    """The fixed arrays of a batch of B trainings of R runs each, and one episode of all of them."""

    def __init__(self, tree: HistoryTree, config: IQLConfig, B: int) -> None:
        game = self.game = tree.game
        self.B, self.R, self.n = B, config.runs, game.n_agents
        self.eps, self.lr = config.epsilon, config.learning_rate
        self.children = [child_table(tree, i) for i in range(self.n)]
        self.legal = [h.legal for h in tree.local]
        self.cum_legal = [np.cumsum(lg / lg.sum(axis=1, keepdims=True), axis=1) for lg in self.legal]
        self.cum_b0 = np.cumsum(game.initial_belief)[None]
        self.cum_T, self.cum_U = np.cumsum(game.transition, axis=2), np.cumsum(game.observation, axis=2)
        self.per, self.agent_at, self.chance_at = _layout(tree, self.R)
        self.rows = np.arange(B * self.R)

    def _take(self, u: np.ndarray, at: int, width: int | None = None) -> np.ndarray:
        """The draws at ``at`` of an episode's uniforms u [B, per]: [B R] (one per run), or [B R, width]."""
        part = u[:, at : at + self.R * (width or 1)]
        return part.reshape(-1) if width is None else part.reshape(-1, width)

    def episode(self, u: np.ndarray, tables: list[np.ndarray]) -> None:
        """One episode of every run from its uniforms u [B, per], Q-tables updated in place."""
        game, rows, n, legal = self.game, self.rows, self.n, self.legal
        s = _draw(self._take(u, 0), self.cum_b0)
        hist = [np.zeros(len(rows), dtype=np.int64) for _ in range(n)]
        for t in range(game.horizon):
            acts = []
            for i in range(n):
                (o_noise, o_explore, o_legal), A = self.agent_at[t][i], game.n_actions[i]
                noise = 1e-9 * self._take(u, o_noise, A)
                q = np.where(legal[i][hist[i]], tables[i][rows, hist[i]], -np.inf) + noise
                random_legal = _draw(self._take(u, o_legal), self.cum_legal[i][hist[i]])
                greedy = np.argmax(q, axis=1)
                acts.append(np.where(self._take(u, o_explore) < self.eps, random_legal, greedy))
            a = np.ravel_multi_index(tuple(acts), game.n_actions)
            s_next = _draw(self._take(u, self.chance_at[t][0]), self.cum_T[s, a])
            o = _draw(self._take(u, self.chance_at[t][1]), self.cum_U[a, s_next])
            r = game.reward[s, a, s_next]
            last = t + 1 == game.horizon
            for i in range(n):  # in agent order: a shared table's update is seen by the next agent
                target = r.copy()
                if not last:
                    nxt = self.children[i][hist[i], acts[i], game.joint_observations[o, i]]
                    best = np.where(legal[i][nxt], tables[i][rows, nxt], -np.inf).max(axis=1)
                    target += game.discount * best
                cell = (rows, hist[i], acts[i])
                tables[i][cell] += self.lr * (target - tables[i][cell])
                if not last:
                    hist[i] = nxt
            s = s_next


def iql_pool(
    tree: HistoryTree, alpha: float, config: IQLConfig = IQLConfig()
) -> list[tuple[np.ndarray, ...]]:
    """k IQL runs turned into Boltzmann policies softmax(Q / alpha): a list of joint policies."""
    tables = train_iql(tree, config)
    batched = softmax_policy(tree, tables, alpha)
    return [tuple(p[r] for p in batched) for r in range(config.runs)]
