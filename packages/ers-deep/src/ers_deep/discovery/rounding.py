"""Action candidates for learned symmetries, and rounding a learned phi_O to the nearest permutation.

* :func:`action_candidates` -- the fixed action maps phi_A a candidate may carry (the official code uses one
  hand-picked transposition; here they are drawn from those that keep the legal structure): Hanabi:
  transpositions of two moves of the same kind and target (discard i <-> j, play i <-> j, two colour hints, two
  rank hints); tabular games: transpositions (or all permutations) of actions whose legality agrees on
  every local history of every agent; Overcooked V2: the identity (the official code's frozen phi_A; the
  learned part is phi_O).
* :func:`nearest_permutation` -- the index permutation pi minimising sum_n ||phi_O(o_n) - o_n[pi]||^2 over
  sample observations (a linear assignment problem, solved exactly by ``scipy.optimize.linear_sum_assignment``),
  with the relative distance sum ||phi(o) - o[pi]||^2 / sum ||o||^2.
* :func:`round_tabular` -- on a tabular env, where phi_O acts on single observations and is lifted to local
  histories, the ers-exact transformation a learned symmetry rounds to.
* :func:`match_known` -- on an env with known Dec-POMDP symmetries (Hanabi's colour permutations, Overcooked
  V2's vertical flip: ``crossplay.env_symmetries``), the one nearest a rounding and whether the rounding is it,
  compared on the features that vary in the sampled observations (a ``SymmetryMatch``).

Convention: ers-deep's phi(pi)(a | o) = pi(A(a) | phi_O(o)) (``LearnedSymmetry``) is ers-exact's phi^-1
(``phi(pi)(phi(a) | phi(tau)) = pi(a | tau)``), so the exact transformation is the inverse of the one whose
action permutation is A and whose history map is the rounded phi_O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from ers_deep.discovery.net import LearnedSymmetry, observation_rows
from ers_deep.envs.base import BatchedEnv
from ers_deep.envs.symmetry import IndexSymmetry
from ers_exact.interface import SymmetryMatch, Transformation
from ers_exact.model.transformation import is_admissible

__all__ = ["action_candidates", "match_known", "nearest_permutation", "round_tabular"]


def _transpositions(groups: list[list[int]], A: int) -> list[tuple[int, ...]]:
    out = []
    for group in groups:
        for a, b in itertools.combinations(group, 2):
            perm = list(range(A))
            perm[a], perm[b] = b, a
            out.append(tuple(perm))
    return out


def action_candidates(env: BatchedEnv, action_set: str = "transpositions") -> list[tuple[int, ...]]:
    """Non-identity action maps that keep the legal structure (see the module docstring)."""
    A = env.num_actions
    config = getattr(env, "config", None)
    table = getattr(env, "legal_table", None)
    if config is not None and hasattr(config, "move_table"):  # Hanabi: moves of one kind and target
        moves = config.move_table()
        keys: dict[tuple[int, int], list[int]] = {}
        for m, row in enumerate(moves):
            keys.setdefault((int(row[0]), int(row[2])), []).append(m)
        return _transpositions(list(keys.values()), A)
    if table is None:  # Overcooked V2: the identity action map, frozen, as the official code
        return [tuple(range(A))]
    legal = table().cpu().numpy()  # [K, A]
    groups: dict[bytes, list[int]] = {}
    for a in range(A):
        groups.setdefault(legal[:, a].tobytes(), []).append(a)
    if action_set == "transpositions":
        return _transpositions(list(groups.values()), A)
    out = set()
    blocks = list(groups.values())
    for images in itertools.product(*(itertools.permutations(g) for g in blocks)):
        perm = list(range(A))
        for g, img in zip(blocks, images):
            for a, b in zip(g, img):
                perm[a] = b
        if perm != list(range(A)):
            out.add(tuple(perm))
    return sorted(out)


@torch.no_grad()
def nearest_permutation(symmetry: LearnedSymmetry, obs: Tensor) -> tuple[tuple[int, ...], float]:
    """(pi, relative distance) with phi_O(o)[k] ~ o[pi[k]] over the observations ``obs`` [n, *O]."""
    x = obs.reshape(obs.shape[0], -1).double()
    y = symmetry.apply_obs(obs.float()).reshape(obs.shape[0], -1).double()
    cost = (y * y).sum(0)[:, None] - 2.0 * (y.T @ x) + (x * x).sum(0)[None, :]  # [n_out, n_in]
    rows, cols = linear_sum_assignment(cost.cpu().numpy())
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols
    total = float(cost.cpu().numpy()[rows, cols].sum())
    return tuple(int(p) for p in perm), max(0.0, total) / max(float((x * x).sum()), 1e-12)


@torch.no_grad()
def match_known(
    perm: Sequence[int], action_map: Tensor, obs: Tensor, group: Sequence[IndexSymmetry]
) -> SymmetryMatch | None:
    """The element of ``group`` (known symmetries, identity first) nearest the rounding of a learned phi: its
    observation permutation ``perm`` (``nearest_permutation``: phi_O(o)[k] ~ o[perm[k]]) and ``action_map``,
    compared on the observations ``obs`` [n, *O] it was rounded on. None for an empty group.

    The comparison uses the features that vary in ``obs``. The rounding cannot tell two features apart whose
    sampled columns are equal (every constant-zero feature, say: Hanabi's cards no one drew): swapping them
    costs nothing, so ``perm`` is arbitrary among them. So the rounding and element g agree at output feature k
    when they read equal columns, o[:, perm[k]] == o[:, g.obs_index[k]]; ``agreement`` is the fraction of the k
    where g reads a varying feature on which they agree (agreement 1 means phi_O rounds to g on every feature
    the samples constrain). Nearest: equal first, then the highest agreement, then equal action maps, then
    the lowest index."""
    if not group:
        return None
    x = obs.reshape(obs.shape[0], -1)
    idx = torch.stack([g.obs_index.to(x.device) for g in group])  # [G, N]
    if len(perm) != x.shape[1] or idx.shape[1] != x.shape[1]:
        raise ValueError(
            f"a rounding of {len(perm)} features, observations of {x.shape[1]}, group {idx.shape[1]}"
        )
    column = torch.unique(x.T, dim=0, return_inverse=True)[1]  # [N]: equal sampled columns share an id
    varying = (x != x[:1]).any(0)  # [N]
    reads = varying[idx]  # [G, N]: g reads a varying feature at k
    agree = (column[torch.as_tensor(perm, device=x.device)][None] == column[idx]) & reads
    n_varying = int(varying.sum())
    fraction = (agree.sum(1).double() / n_varying).tolist() if n_varying else [math.nan] * len(group)
    same = [torch.equal(g.action_map.cpu(), action_map.cpu()) for g in group]

    def key(i: int) -> tuple[bool, float, bool, int]:
        whole = fraction[i] == 1.0
        return (whole and same[i], -1.0 if math.isnan(fraction[i]) else fraction[i], same[i], -i)

    best = max(range(len(group)), key=key)
    g = group[best]
    name = "identity" if g.is_identity() else g.name
    return SymmetryMatch(best, name, float(fraction[best]), same[best], n_varying)


#: the most observations whose every permutation ``round_tabular`` scores (8! = 40,320 candidates, ~20 MB)
MAX_ENUMERATED_OBSERVATIONS = 8


@torch.no_grad()
def round_tabular(env: Any, symmetry: LearnedSymmetry) -> tuple[tuple[int, ...], float, Transformation]:
    """(observation map, its relative distance, the exact transformation) on a tabular env.

    There phi_O is a network on one observation (one-hot over O) read as a distribution per observation
    (``observation_rows``) and lifted to local histories as Psi acts (``TabularEnv.history_lift``). Every
    observation permutation sigma (o -> sigma[o]) is scored by sum_o ||row_o - e_sigma[o]||^2; the nearest
    one whose transformation T = (identity phi_S, phi_A, sigma) is admissible (acts on policies, DESIGN.md)
    is returned, or the nearest overall when none is. The distance is that sum over |O|. ers-deep's
    phi(pi)(a | tau) = pi(phi_A(a) | T(tau)) is ers-exact's T^-1(pi) (module docstring), so the exact
    transformation returned is T^-1. The objective constrains phi_O only where it changes J, so on
    observations no policy's return depends on (the toy game's second step) the admissible choice is what
    decides. Beyond :data:`MAX_ENUMERATED_OBSERVATIONS` observations (|O|! candidates) only the nearest
    permutation is scored (a linear assignment: the sum is constant - 2 sum_o row_o[sigma[o]]), admissible or
    not."""
    n_o = env.n_observations
    eye = torch.eye(n_o, device=symmetry.obs_map.weights[0].device)[
        None
    ]  # the map's device (a CUDA learner's)
    rows = observation_rows(symmetry.obs_map, eye)[0].double().cpu().numpy()
    if n_o <= MAX_ENUMERATED_OBSERVATIONS:
        perms = np.array(list(itertools.permutations(range(n_o))), dtype=np.int64)  # [M, O]
    else:
        perms = linear_sum_assignment(-rows)[1][None].astype(np.int64)  # [1, O]: sigma[o], row o's column
    target = np.eye(n_o)[perms]  # [M, O, O]: row o of candidate m is e_perms[m, o]
    cost = ((rows[None] - target) ** 2).sum(axis=(1, 2))
    amap = symmetry.action_map.cpu().numpy()
    acts = tuple(tuple(int(a) for a in amap[:n_a]) for n_a in env.game.n_actions)
    states = tuple(range(env.game.n_states))
    chosen = None
    for m in np.argsort(cost, kind="stable"):
        T = Transformation(states, acts, tuple(tuple(int(o) for o in perms[m]) for _ in acts))
        if is_admissible(env.tree, T):
            chosen = int(m)
            break
    m = int(np.argmin(cost)) if chosen is None else chosen
    T = Transformation(states, acts, tuple(tuple(int(o) for o in perms[m]) for _ in acts))
    return tuple(int(o) for o in perms[m]), float(cost[m]) / n_o, T.inverse()
