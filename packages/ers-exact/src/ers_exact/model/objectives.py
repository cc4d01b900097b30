"""Cross-play, other-play and the symmetriser (paper eqs. XP and other-play), exact and batched.

* XP(pi_1, pi_2) = 1/2 (J(pi_1^1, pi_2^2) + J(pi_2^1, pi_1^2)) for n = 2. For n > 2 the average runs over
  every seat assignment sigma in {1, 2}^n that uses both policies (2^n - 2 assignments); for n = 2 this is
  exactly eq. XP. For n = 1, XP(pi_1, pi_2) = (J(pi_1) + J(pi_2)) / 2 (no partner to mix).
* OP^Phi(pi) = mean_{phi in Phi} XP(pi, phi(pi)). When Phi is a group this equals the paper's average
  over the equivalence class [pi] (every class member is hit |Stab(pi)| times).
* S(pi) = mean_{phi in Phi} phi(pi), per agent and local history.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.model.values import Policy, check_policy, expected_return

__all__ = ["cross_play", "other_play", "seat_assignments", "symmetrise"]


def seat_assignments(n_agents: int) -> np.ndarray:
    """Seat assignments used by XP: rows in {0, 1}^n using both policies (all rows for n = 1).  # [M, n]"""
    rows = np.array(list(itertools.product((0, 1), repeat=n_agents)), dtype=np.int64)
    if n_agents == 1:
        return rows
    return rows[(rows.min(axis=1) == 0) & (rows.max(axis=1) == 1)]


def cross_play(tree: HistoryTree, policy_1: Policy, policy_2: Policy) -> np.ndarray | float:
    """XP(pi_1, pi_2) (eq. XP); batched inputs of equal batch size P give [P]."""
    p1, batched1 = check_policy(tree, policy_1)
    p2, batched2 = check_policy(tree, policy_2)
    if p1[0].shape[0] != p2[0].shape[0]:
        raise ValueError(f"batch sizes differ: {p1[0].shape[0]} and {p2[0].shape[0]}")
    seats = seat_assignments(tree.game.n_agents)  # [M, n]
    P, M = p1[0].shape[0], seats.shape[0]
    mixed = tuple(
        np.where(seats[:, i][:, None, None, None] == 0, p1[i][None], p2[i][None]).reshape(
            M * P, *p1[i].shape[1:]
        )
        for i in range(tree.game.n_agents)
    )
    values = np.asarray(expected_return(tree, mixed)).reshape(M, P).mean(axis=0)
    return values if (batched1 or batched2) else float(values[0])


def _images(
    tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """(pi repeated, phi(pi)) stacked over phi: [F * P, K_i, A_i] per agent, phi-major."""
    pols, _ = check_policy(tree, policy)
    if len(phis) == 0:
        raise ValueError("the set of transformations Phi is empty")
    images = [apply_to_policy(tree, phi, pols) for phi in phis]
    stacked = tuple(np.concatenate([img[i] for img in images]) for i in range(tree.game.n_agents))
    repeated = tuple(np.concatenate([p] * len(phis)) for p in pols)
    return repeated, stacked


def other_play(tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]) -> np.ndarray | float:
    """OP^Phi(pi) = mean_{phi in Phi} XP(pi, phi(pi)) (eq. other-play); [P] for a batch."""
    _, batched = check_policy(tree, policy)
    repeated, stacked = _images(tree, policy, phis)
    xp = np.asarray(cross_play(tree, repeated, stacked)).reshape(len(phis), -1).mean(axis=0)
    return xp if batched else float(xp[0])


def symmetrise(tree: HistoryTree, policy: Policy, phis: Sequence[Transformation]) -> tuple[np.ndarray, ...]:
    """S(pi) = mean_{phi in Phi} phi(pi), per agent (batched in, batched out)."""
    pols, batched = check_policy(tree, policy)
    _, stacked = _images(tree, policy, phis)
    P = pols[0].shape[0]
    out = tuple(s.reshape(len(phis), P, *s.shape[1:]).mean(axis=0) for s in stacked)
    return out if batched else tuple(o[0] for o in out)
