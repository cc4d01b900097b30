"""Exact self-play optimum over deterministic joint policies, by exhaustive search (tiny games only).

Every deterministic policy of agents 0..n-2 is enumerated as a policy *tree* (one action per
observation sequence o_1..o_t, the only histories a deterministic agent can reach); agent n-1 answers
each with an exact best response (backward induction over its local histories, see
:func:`ers_exact.model.values.best_response`). Since an optimal deterministic joint policy exists for finite-
horizon Dec-POMDPs, the maximum over this search is the optimal value J*.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.values import best_response, uniform_policy
from ers_exact.util.progress import Progress

__all__ = ["OptimalResult", "PolicyBudgetError", "count_policy_trees", "self_play_optimum"]

DEFAULT_MAX_POLICIES = 2_000_000
_CHUNK_FLOATS = 20_000_000


class PolicyBudgetError(RuntimeError):
    """Exhaustive search would enumerate more deterministic policies than the budget allows."""


@dataclass(frozen=True)
class OptimalResult:
    """The optimal value J* with one optimal deterministic joint policy and how it was found."""

    game: str
    horizon: int
    discount: float
    value: float
    policy: tuple[np.ndarray, ...] = field(repr=False)
    n_candidates: int
    seconds: float
    method: str = "exhaustive policy trees of agents 0..n-2 + exact best response of agent n-1"

    def to_json(self) -> dict[str, Any]:
        return {"game": self.game, "horizon": self.horizon, "discount": self.discount, "value": self.value,
                "n_candidates": self.n_candidates, "seconds": round(self.seconds, 4), "method": self.method,
                "policy": [np.argmax(p, axis=1).tolist() for p in self.policy]}


def _observation_sequences(tree: HistoryTree, agent: int) -> tuple[np.ndarray, np.ndarray]:
    """For each local history, the id of its observation sequence (o_1..o_t); and for each sequence the
    legal-action row it uses. Returns (seq_of_history [K], legal_of_seq [Q, |A^i|])."""
    hist = tree.local[agent]
    n_o = tree.game.n_observations[agent]
    seq = np.zeros(len(hist), dtype=np.int64)
    legal = [hist.legal[:1]]
    count = 1
    for t in range(1, len(hist.offsets) - 1):
        lo, hi = hist.offsets[t], hist.offsets[t + 1]
        key = seq[hist.parent[lo:hi]] * n_o + hist.observation[lo:hi]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        seq[lo:hi] = count + inv
        legal.append(hist.legal[lo + first])
        count += len(uniq)
    return seq, np.concatenate(legal)


def count_policy_trees(tree: HistoryTree, agents: list[int]) -> int:
    """Number of deterministic policy trees of the given agents (product of legal counts per sequence)."""
    total = 1
    for i in agents:
        _, legal = _observation_sequences(tree, i)
        total *= int(np.prod(legal.sum(axis=1).astype(object)))
    return total


def _decode(tree: HistoryTree, agent: int, indices: np.ndarray) -> np.ndarray:
    """Deterministic policies of ``agent`` for mixed-radix indices [P] -> one-hot [P, K, |A^i|]."""
    seq, legal = _observation_sequences(tree, agent)
    radix = legal.sum(axis=1)
    digits = np.empty((len(indices), len(radix)), dtype=np.int64)
    rest = indices.copy()
    for q, r in enumerate(radix):
        digits[:, q] = rest % r
        rest //= r
    legal_ids = np.argsort(~legal, axis=1, kind="stable")  # legal actions first, in index order
    chosen = legal_ids[np.arange(len(radix))[None, :], digits]  # [P, Q] action per sequence
    out = np.zeros((len(indices), len(seq), tree.game.n_actions[agent]))
    np.put_along_axis(out, chosen[:, seq][:, :, None], 1.0, axis=2)
    return out


def self_play_optimum(tree: HistoryTree, max_policies: int = DEFAULT_MAX_POLICIES,
                      progress: bool | None = None) -> OptimalResult:
    """max_pi J(pi) over deterministic joint policies, exactly. Raises :class:`PolicyBudgetError`
    (with the count) when agents 0..n-2 have more than ``max_policies`` policy trees."""
    start = time.perf_counter()
    game = tree.game
    n = game.n_agents
    responder = n - 1
    enumerated = list(range(n - 1))
    sizes = [count_policy_trees(tree, [i]) for i in enumerated]
    total = int(np.prod(np.array(sizes, dtype=object))) if sizes else 1
    if total > max_policies:
        raise PolicyBudgetError(
            f"{game.name} (H={game.horizon}): exhaustive search needs {total:,} deterministic policy trees "
            f"of agents {enumerated}; the budget is {max_policies:,} (raise max_policies or lower H)")
    base = uniform_policy(tree)
    width = tree.n_joint_nodes * game.n_joint_actions * (n + 3)
    chunk = int(max(1, _CHUNK_FLOATS // max(width, 1)))
    best_value, best_policy = -np.inf, None
    with Progress(total, f"optimal {game.name} H={game.horizon}", enabled=progress) as bar:
        for lo in range(0, total, chunk):
            idx = np.arange(lo, min(total, lo + chunk), dtype=np.int64)
            policy = list(np.broadcast_to(p, (len(idx),) + p.shape) for p in base)
            rest = idx
            for i, size in zip(enumerated, sizes):
                policy[i] = _decode(tree, i, rest % size)
                rest = rest // size
            br, values = best_response(tree, tuple(policy), responder)
            k = int(np.argmax(values))
            if values[k] > best_value + 1e-12:
                best_value = float(values[k])
                best_policy = tuple(p[k].copy() for p in policy[:-1]) + (br[k],)
            bar.update(len(idx))
    assert best_policy is not None
    return OptimalResult(game=game.name, horizon=game.horizon, discount=game.discount, value=best_value,
                         policy=best_policy, n_candidates=total, seconds=time.perf_counter() - start)
