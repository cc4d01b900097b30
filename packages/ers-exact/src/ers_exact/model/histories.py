"""Exact enumeration of histories: every possible local history tau^i_t of every agent and the joint
history tree, as flat arrays built once per game.

A joint history node at time t stands for a joint action-observation history tau_t = (tau^1_t, ...,
tau^n_t); it carries the chance weight over states

    w[s] = P(s_t = s, o_1, ..., o_t | a_0, ..., a_{t-1})   (b_0, T and U multiplied along the path),

which does not depend on the policy. Nodes with zero chance weight are pruned, so every local history in
:class:`LocalHistories` is *possible* (it occurs under any full-support joint policy over legal actions).
Only decision layers t = 0 .. H-1 are stored: histories at t = H carry no decision.

Ordering is deterministic: children are sorted by (parent, joint action, joint observation) and local
histories at t + 1 by (parent local history, local action, local observation).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from ers_exact.model.config import DEFAULT_MAX_NODES, HistoryBudgetError
from ers_exact.model.game import Game, check_game
from ers_exact.util.budget import check_memory
from ers_exact.util.sparse import SparseMatrix

__all__ = [
    "DEFAULT_MAX_NODES",
    "HistoryBudgetError",
    "HistoryTree",
    "JointLayer",
    "LocalHistories",
    "check_tree",
    "describe_count",
    "enumerate_histories",
    "estimate_history_count",
    "history_count_log10",
]

_CHUNK_FLOATS = 8_000_000

_T = TypeVar("_T")


@dataclass(frozen=True, eq=False)
class LocalHistories:
    """All possible local histories tau^i_t of one agent, t = 0 .. H-1, as flat arrays [K_i]."""

    agent: int
    time: np.ndarray  # [K] t of tau^i_t
    parent: np.ndarray  # [K] index of tau^i_{t-1}; -1 for the empty history
    action: np.ndarray  # [K] a^i_{t-1}; -1 for the empty history
    observation: np.ndarray  # [K] o^i_t; -1 for the empty history
    legal: np.ndarray  # [K, |A^i|] legal actions A^i(tau^i)

    def __len__(self) -> int:
        return int(self.time.shape[0])

    @cached_property
    def offsets(self) -> np.ndarray:
        """Histories at time t occupy [offsets[t], offsets[t+1]).  # [H + 1]"""
        horizon = int(self.time.max()) + 1
        return np.searchsorted(self.time, np.arange(horizon + 1))

    def as_tuple(self, k: int) -> tuple[int, ...]:
        """tau^i = (a_0, o_1, ..., a_{t-1}, o_t) of history ``k`` as a tuple of indices."""
        out: list[int] = []
        while self.parent[k] >= 0:
            out[:0] = [int(self.action[k]), int(self.observation[k])]
            k = int(self.parent[k])
        return tuple(out)

    @cached_property
    def index(self) -> dict[tuple[int, ...], int]:
        """Inverse of :meth:`as_tuple` (built on first use; for tests and user look-ups)."""
        return {self.as_tuple(k): k for k in range(len(self))}


@dataclass(frozen=True, eq=False)
class JointLayer:
    """Joint history nodes at one time t, as flat arrays [N_t]."""

    t: int
    parent: np.ndarray  # [N] node index at t-1; -1 at t = 0
    action: np.ndarray  # [N] joint action a_{t-1}; -1 at t = 0
    observation: np.ndarray  # [N] joint observation o_t; -1 at t = 0
    weight: np.ndarray  # [N, S] chance weight P(s_t, o_{1:t} | a_{0:t-1})
    local: np.ndarray  # [N, n] local history index of each agent
    legal: np.ndarray  # [N, A] legal joint actions

    def __len__(self) -> int:
        return int(self.parent.shape[0])

    @cached_property
    def probability(self) -> np.ndarray:
        """Chance weight summed over states, P(o_{1:t} | a_{0:t-1}).  # [N]"""
        return self.weight.sum(axis=1)


@dataclass(frozen=True, eq=False)
class HistoryTree:
    """The enumerated histories of a game: decision layers t = 0..H-1 and per-agent local histories."""

    game: Game
    layers: tuple[JointLayer, ...]
    local: tuple[LocalHistories, ...]
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def derived(self, key: str, build: Callable[[], _T]) -> _T:
        """Memoised arrays derived from the tree: ``build()`` runs on the first call with ``key``, and its
        result is returned by every later call. The tree is frozen, so entries never go stale. Keys are
        namespaced by the module that builds them (``"histories.child"``, ``"certify.interval"``, ...)."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]

    def has_derived(self, key: str) -> bool:
        """Whether :meth:`derived` holds an entry ``key`` (built and not forgotten)."""
        return key in self._derived

    def forget(self, key: str) -> None:
        """Drop the memoised entry ``key`` of :meth:`derived` (to free its memory; rebuilt on the next call)."""
        self._derived.pop(key, None)

    @property
    def n_histories(self) -> tuple[int, ...]:
        """|local histories| of each agent (the row count of its policy array)."""
        return tuple(len(h) for h in self.local)

    @property
    def n_joint_nodes(self) -> int:
        return int(sum(len(layer) for layer in self.layers))

    def child_matrix(self, t: int) -> SparseMatrix:
        """Sparse 0/1 matrix [N_t * A, N_{t+1}] mapping each child to its (parent, joint action) row."""
        return self.derived("histories.child", lambda: _child_matrices(self))[t]

    def local_matrix(self, t: int, agent: int) -> SparseMatrix:
        """Sparse 0/1 matrix [K^i_t, N_t]: which joint nodes at t project onto each local history."""
        return self.derived("histories.local", lambda: _local_matrices(self))[t][agent]

    def counts(self) -> dict[str, object]:
        """Sizes for reports: joint nodes per t and local histories per agent per t."""
        return {
            "joint_nodes_per_t": [len(layer) for layer in self.layers],
            "joint_nodes": self.n_joint_nodes,
            "local_histories": list(self.n_histories),
            "local_histories_per_t": [np.diff(h.offsets).tolist() for h in self.local],
        }


def _branching(game: Game) -> int:
    """|A| |O_eff|: |O_eff| counts joint observations with positive probability for some (a, s')."""
    reachable_obs = int(np.count_nonzero(game.observation.max(axis=(0, 1)) > 0))
    return game.n_joint_actions * max(reachable_obs, 1)


def estimate_history_count(game: Game, limit: int | None = None) -> int:
    """Upper bound on joint history nodes, sum_{t < H} (|A| |O_eff|)^t, before any enumeration.

    With ``limit`` the sum stops as soon as it exceeds ``limit`` and returns that partial sum (some number
    > ``limit``): cheap for any horizon, where the full sum of a long horizon has millions of digits."""
    branching = _branching(game)
    total, layer = 0, 1
    for _ in range(game.horizon):
        total += layer
        if limit is not None and total > limit:
            break
        layer *= branching
    return total


def history_count_log10(game: Game) -> float:
    """log10 of :func:`estimate_history_count`, in floating point (finite for any horizon)."""
    b, h = _branching(game), game.horizon
    if b == 1:
        return math.log10(h)
    # sum_{t<H} b^t = (b^H - 1) / (b - 1)
    return h * math.log10(b) + math.log10(-math.expm1(-h * math.log(b))) - math.log10(b - 1)


def describe_count(game: Game, limit: int) -> str:
    """The upper bound of :func:`estimate_history_count` for messages: exact with thousands separators when
    it is at most ``limit`` or small, else as a power of ten."""
    count = estimate_history_count(game, limit=max(limit, 10**15))
    return f"{count:,}" if count <= max(limit, 10**15) else f"about 10^{history_count_log10(game):.1f}"


def check_tree(tree: object) -> HistoryTree:
    """``tree`` itself when it is a :class:`HistoryTree`; else a ``TypeError`` naming the ``tree`` argument
    (every function of the exact values, solvers and pipelines takes the enumerated histories, not the
    game: a :class:`~ers_exact.model.game.Game` there failed on a missing attribute deep inside)."""
    if isinstance(tree, HistoryTree):
        return tree
    if isinstance(tree, Game):
        raise TypeError(
            f"tree must be a HistoryTree, got the Game {tree.name!r}: pass enumerate_histories(game)"
        )
    raise TypeError(f"tree must be a HistoryTree (enumerate_histories(game)), got {type(tree).__name__}")


def enumerate_histories(game: Game, max_nodes: int = DEFAULT_MAX_NODES) -> HistoryTree:
    """Enumerate the joint history tree and every agent's possible local histories.

    Raises :class:`HistoryBudgetError` (with the estimated count) before a layer whose candidate count
    exceeds ``max_nodes``."""
    n = check_game(game).n_agents
    local_legal = [game.legal_mask(i) for i in range(n)]
    root_local = np.zeros((1, n), dtype=np.int64)
    layers = [
        _make_layer(
            game,
            0,
            np.array([-1]),
            np.array([-1]),
            np.array([-1]),
            game.initial_belief[None, :].copy(),
            root_local,
            local_legal,
            None,
        )
    ]
    loc_parent = [[np.array([-1])] for _ in range(n)]
    loc_action = [[np.array([-1])] for _ in range(n)]
    loc_obs = [[np.array([-1])] for _ in range(n)]
    loc_last_obs = [np.array([-1]) for _ in range(n)]
    offsets = [0] * n
    total = 1
    for t in range(1, game.horizon):
        prev = layers[-1]
        candidates = int(prev.legal.sum()) * game.n_joint_observations
        if total + candidates > max_nodes:
            raise HistoryBudgetError(
                f"{game.name}: enumerating horizon {game.horizon} needs up to {total + candidates:,} joint "
                f"history nodes by t={t} (upper bound for all t: {describe_count(game, max_nodes)}); the "
                f"budget is max_nodes = {max_nodes:,}. Raise max_nodes or lower the horizon."
            )
        check_memory(
            f"{game.name} H={game.horizon}: {total + candidates:,} joint history nodes by t={t}",
            (total + candidates) * node_bytes(game),
            "lower the horizon",
        )
        parent, action, obs, weight = _expand(game, prev)
        local = np.empty((parent.shape[0], n), dtype=np.int64)
        for i in range(n):
            a_i = game.joint_actions[action, i]
            o_i = game.joint_observations[obs, i]
            par_i = prev.local[parent, i] - offsets[i]
            key = (par_i * game.n_actions[i] + a_i) * game.n_observations[i] + o_i
            uniq, inv = np.unique(key, return_inverse=True)
            start = offsets[i] + len(loc_parent[i][-1])
            local[:, i] = start + inv
            u_obs = uniq % game.n_observations[i]
            u_rest = uniq // game.n_observations[i]
            loc_parent[i].append(offsets[i] + u_rest // game.n_actions[i])
            loc_action[i].append(u_rest % game.n_actions[i])
            loc_obs[i].append(u_obs)
            loc_last_obs[i] = u_obs
            offsets[i] = start
        layers.append(
            _make_layer(game, t, parent, action, obs, weight, local, local_legal, loc_last_obs, offsets)
        )
        total += len(parent)
    local_histories = tuple(
        _make_local(i, loc_parent[i], loc_action[i], loc_obs[i], local_legal[i]) for i in range(n)
    )
    return HistoryTree(game=game, layers=tuple(layers), local=local_histories)


def node_bytes(game: Game) -> int:
    """Memory of one joint history node: its chance weight over states [S], indices, legal mask and the
    enumeration's temporaries (x2).  # bytes"""
    return 2 * (8 * game.n_states + 8 * (4 + 2 * game.n_agents) + game.n_joint_actions)


def _expand(game: Game, prev: JointLayer) -> tuple[np.ndarray, ...]:
    """Children of every node: (parent, joint action, joint observation, chance weight), zero-weight pruned."""
    S, A, O = game.n_states, game.n_joint_actions, game.n_joint_observations
    chunk = max(1, _CHUNK_FLOATS // max(1, A * O * S))
    parts: list[tuple[np.ndarray, ...]] = []
    for lo in range(0, len(prev), chunk):
        w = prev.weight[lo : lo + chunk]  # [C, S]
        nxt = np.einsum("cs,sap->cap", w, game.transition)  # [C, A, S']
        full = nxt[:, :, None, :] * game.observation.transpose(0, 2, 1)[None]  # [C, A, O, S']
        full *= prev.legal[lo : lo + chunk, :, None, None]
        c, a, o = np.nonzero(full.sum(axis=3) > 0)
        parts.append((c + lo, a, o, full[c, a, o]))
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))


def _make_layer(
    game: Game,
    t: int,
    parent: np.ndarray,
    action: np.ndarray,
    obs: np.ndarray,
    weight: np.ndarray,
    local: np.ndarray,
    local_legal: list[np.ndarray],
    last_obs: list[np.ndarray] | None,
    local_offsets: list[int] | None = None,
) -> JointLayer:
    legal = np.ones((len(parent), game.n_joint_actions), dtype=bool)
    for i in range(game.n_agents):
        if t == 0:
            rows = np.zeros(len(parent), dtype=np.int64)
        else:
            assert last_obs is not None and local_offsets is not None  # given for every t > 0
            rows = 1 + last_obs[i][local[:, i] - local_offsets[i]]
        legal &= local_legal[i][rows][:, game.joint_actions[:, i]]
    for arr in (parent, action, obs, weight, local, legal):
        arr.setflags(write=False)
    return JointLayer(
        t=t, parent=parent, action=action, observation=obs, weight=weight, local=local, legal=legal
    )


def _make_local(
    agent: int,
    parents: list[np.ndarray],
    actions: list[np.ndarray],
    obs: list[np.ndarray],
    legal_table: np.ndarray,
) -> LocalHistories:
    time = np.concatenate([np.full(len(p), t, dtype=np.int64) for t, p in enumerate(parents)])
    observation = np.concatenate(obs).astype(np.int64)
    legal = legal_table[np.where(observation < 0, 0, observation + 1)]
    arrays = dict(
        time=time,
        parent=np.concatenate(parents).astype(np.int64),
        action=np.concatenate(actions).astype(np.int64),
        observation=observation,
        legal=legal,
    )
    for arr in arrays.values():
        arr.setflags(write=False)
    return LocalHistories(agent=agent, **arrays)


def _child_matrices(tree: HistoryTree) -> list[SparseMatrix]:
    """Per t, the sparse child matrix of :meth:`HistoryTree.child_matrix`."""
    A = tree.game.n_joint_actions
    mats = []
    for t in range(len(tree.layers) - 1):
        nxt = tree.layers[t + 1]
        rows = nxt.parent * A + nxt.action
        mats.append(SparseMatrix(1.0, rows, np.arange(len(nxt)), (len(tree.layers[t]) * A, len(nxt))))
    return mats


def _local_matrices(tree: HistoryTree) -> list[list[SparseMatrix]]:
    """Per t and agent, the sparse projection matrix of :meth:`HistoryTree.local_matrix`."""
    mats = []
    for t, layer in enumerate(tree.layers):
        per_agent = []
        for i, hist in enumerate(tree.local):
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            per_agent.append(
                SparseMatrix(1.0, layer.local[:, i] - lo, np.arange(len(layer)), (hi - lo, len(layer)))
            )
        mats.append(per_agent)
    return mats
