"""Deterministic policies as policy trees: agent i's action after each of its observation sequences.

``trees[i][t]`` [|O^i|^t] holds the action after o^i_1..o^i_t (mixed radix, the last observation fastest),
-1 where the policy never reaches that sequence. Such a policy is evaluated here without any history tree --
forward over the joint observation sequences it reaches, each with its state weights -- which is the
independent check of :func:`~ers_exact.model.ice.ice_search`'s value, and converted to one-hot arrays over
the local histories of a :class:`~ers_exact.model.histories.HistoryTree` where one is enumerated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.histories import HistoryTree

__all__ = ["PolicyTrees", "evaluate_policy_trees", "policy_trees_to_local"]

PolicyTrees = Sequence[Sequence[np.ndarray]]


def evaluate_policy_trees(game: Game, trees: PolicyTrees) -> float:
    """J(pi) = sum_t gamma^t sum_{reached joint histories} sum_s w(s) E[R | s, pi(history)]; raises
    ``ValueError`` when the policy has no (legal) action at a reached observation sequence."""
    n, S = game.n_agents, game.n_states
    stride = np.cumprod((1, *tuple(reversed(game.n_actions))))[:-1][::-1]
    jo = game.joint_observations
    seq = np.zeros((1, n), dtype=np.int64)  # observation-sequence index per agent at each reached node
    last_obs = np.full((1, n), -1, dtype=np.int64)
    weight = game.initial_belief[None].copy()  # [N, S]
    total = 0.0
    for t in range(game.horizon):
        ja = np.zeros(len(seq), dtype=np.int64)
        for i in range(n):
            acts = np.asarray(trees[i][t])[seq[:, i]]
            legal = game.legal_mask(i)[last_obs[:, i] + 1]
            if np.any(acts < 0) or not np.all(legal[np.arange(len(acts)), np.maximum(acts, 0)]):
                raise ValueError(
                    f"agent {i} has no legal action at a reached observation sequence of stage {t}"
                )
            ja += acts * stride[i]
        total += game.discount**t * float(np.einsum("ns,ns->", weight, game.expected_reward[:, ja].T))
        if t + 1 == game.horizon:
            break
        nxt = np.einsum("ns,nst->nt", weight, game.transition[:, ja, :].transpose(1, 0, 2))  # [N, S']
        w = nxt[:, :, None] * game.observation[ja]  # [N, S', O]
        node, o = np.nonzero(w.sum(axis=1) > 0)
        weight = w[node, :, o].reshape(len(node), S)
        seq = seq[node] * np.array(game.n_observations)[None] + jo[o]
        last_obs = jo[o]
    return total


def policy_trees_to_local(tree: HistoryTree, trees: PolicyTrees) -> tuple[np.ndarray, ...]:
    """One-hot [K_i, |A^i|] per agent: each local history gets the action of its observation sequence; a
    history the policy never reaches (or whose sequence it leaves open) gets its first legal action."""
    out = []
    for i, hist in enumerate(tree.local):
        n_o = tree.game.n_observations[i]
        seq = np.zeros(len(hist), dtype=np.int64)
        act = np.full(len(hist), -1, dtype=np.int64)
        for t in range(len(hist.offsets) - 1):
            lo, hi = hist.offsets[t], hist.offsets[t + 1]
            if t > 0:
                seq[lo:hi] = seq[hist.parent[lo:hi]] * n_o + hist.observation[lo:hi]
            act[lo:hi] = np.asarray(trees[i][t])[seq[lo:hi]]
        rows = np.arange(len(hist))
        ok = act >= 0
        ok[ok] = hist.legal[rows[ok], act[ok]]
        act = np.where(ok, act, np.argmax(hist.legal, axis=1))
        pol = np.zeros(hist.legal.shape)
        pol[rows, act] = 1.0
        out.append(pol)
    return tuple(out)
