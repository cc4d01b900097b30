"""Exhaustive search for Dec-POMDP symmetries Phi_MDP and expected-return symmetries Phi_ER over Psi.

Psi = S_{|S|} x prod_i S_{|A^i|} x prod_i S_{|O^i|} (no agent permutations). A Dec-POMDP symmetry leaves
T, U and R invariant (paper, eq. decpomdp-invariance); ers also requires b_0 and the legal-action sets to
be invariant, without which the paper's lemma J(phi(pi)) = J(pi) fails.

Two searches for Phi_MDP that must agree (tests check it):
* ``exhaustive``: every candidate of Psi, vectorised in chunks (T, R, b_0 on (state, action) pairs; U and
  legal sets on the survivors) -- for Psi up to ~10^6-10^7 candidates;
* ``pruned``: for each joint action permutation, state permutations by backtracking over signature-
  compatible images (checking T and R on the assigned block), then observation permutations vectorised.
The graph-automorphism method lives in :mod:`ers_exact.symmetry.graph`.

ER membership (DESIGN.md): phi is in Phi_ER w.r.t. a pool when for every pi in the pool phi(pi) is a
Boltzmann fixed point (residual <= tol) and J(phi(pi)) = J* (within tol). A transformation acts on
policies only through its action and observation parts, so Phi_ER = S_{|S|} x (its policy part).
"""

from __future__ import annotations

import itertools
import math
from typing import Iterator

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.transformation import Transformation, is_decpomdp_symmetry

__all__ = [
    "decpomdp_symmetries",
    "permutation_table",
    "policy_part_order",
    "psi_order",
]

_CHUNK = 2_000_000
ATOL = 1e-12  # entries are equal when they differ by at most this (averaged games are not bit-exact)


def _same(x: np.ndarray, y: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    return np.all(np.abs(x - y) <= ATOL, axis=axis)


def psi_order(game: Game) -> int:
    """|Psi| = |S|! prod_i |A^i|! |O^i|!"""
    return math.factorial(game.n_states) * policy_part_order(game)


def policy_part_order(game: Game) -> int:
    """prod_i |A^i|! |O^i|!: the transformations as they act on policies."""
    return math.prod(math.factorial(k) for k in game.n_actions + game.n_observations)


def permutation_table(k: int) -> np.ndarray:
    """All permutations of range(k) in lexicographic order (identity first).  # [k!, k]"""
    return np.array(list(itertools.permutations(range(k))), dtype=np.int64).reshape(-1, k)


def _joint_tables(sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per-agent permutation indices [M, n] and the joint-index maps they induce [M, prod sizes]."""
    tables = [permutation_table(k) for k in sizes]
    combos = np.array(list(itertools.product(*[range(len(t)) for t in tables])), dtype=np.int64)
    grid = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), -1).reshape(-1, len(sizes))
    images = np.stack([tables[i][combos[:, i]][:, grid[:, i]] for i in range(len(sizes))], axis=-1)
    joint = np.ravel_multi_index(tuple(np.moveaxis(images, -1, 0)), sizes)
    return combos, joint


def _legal_ok(game: Game, act_combo: np.ndarray, obs_combo: np.ndarray) -> np.ndarray:
    """Legal-action tables invariant under the per-agent action/observation permutations.  # [C] bool"""
    ok = np.ones(len(act_combo), dtype=bool)
    if game.legal_actions is None:
        return ok
    for i, mask in enumerate(game.legal_actions):
        pa = permutation_table(game.n_actions[i])[act_combo[:, i]]
        po = permutation_table(game.n_observations[i])[obs_combo[:, i]]
        rows = np.concatenate([np.zeros((len(po), 1), dtype=np.int64), 1 + po], axis=1)
        image = mask[rows[:, :, None], pa[:, None, :]]
        ok &= (image == mask[None]).all(axis=(1, 2))
    return ok


def _state_action_pairs(game: Game, states: np.ndarray, joint_a: np.ndarray) -> Iterator[tuple[int, int]]:
    """(state perm, action combo) pairs with T, R and b_0 invariant, vectorised over all pairs."""
    T, R = game.transition, game.reward
    good_s = np.flatnonzero(_same(game.initial_belief[states], game.initial_belief[None], axis=(1,)))
    S, A = game.n_states, game.n_joint_actions
    chunk = max(1, _CHUNK // max(1, S * A * S * len(joint_a)))
    for lo in range(0, len(good_s), chunk):
        ps = states[good_s[lo:lo + chunk]]  # [c, S]
        idx = (ps[:, None, :, None, None], joint_a[None, :, None, :, None], ps[:, None, None, None, :])
        ok = _same(T[idx], T, axis=(2, 3, 4)) & _same(R[idx], R, axis=(2, 3, 4))  # [c, M_a]
        for c, m in zip(*np.nonzero(ok)):
            yield int(good_s[lo + c]), int(m)


def _observation_combos(game: Game, ps: np.ndarray, pa_joint: np.ndarray, joint_o: np.ndarray) -> np.ndarray:
    """Indices of the observation combos with U invariant for a fixed state and joint action map."""
    U = game.observation
    image = U[pa_joint[None, :, None, None], ps[None, None, :, None], joint_o[:, None, None, :]]
    return np.flatnonzero(_same(image, U[None], axis=(1, 2, 3)))


def _exhaustive(game: Game) -> list[Transformation]:
    states = permutation_table(game.n_states)
    act_combo, joint_a = _joint_tables(game.n_actions)
    obs_combo, joint_o = _joint_tables(game.n_observations)
    out = []
    for s_idx, a_idx in _state_action_pairs(game, states, joint_a):
        for o_idx in _observation_combos(game, states[s_idx], joint_a[a_idx], joint_o):
            if _legal_ok(game, act_combo[a_idx:a_idx + 1], obs_combo[o_idx:o_idx + 1])[0]:
                out.append(_build(game, states[s_idx], act_combo[a_idx], obs_combo[o_idx]))
    return out


def _build(game: Game, ps: np.ndarray, act: np.ndarray, obs: np.ndarray) -> Transformation:
    return Transformation(tuple(int(v) for v in ps),
                          tuple(tuple(int(v) for v in permutation_table(k)[c]) for k, c in zip(game.n_actions, act)),
                          tuple(tuple(int(v) for v in permutation_table(k)[c])
                                for k, c in zip(game.n_observations, obs)))


def _signatures(game: Game) -> list[np.ndarray]:
    """Invariants of a state under any symmetry: b_0 and the sorted T and R entries of its row and column."""
    T, R = game.transition, game.reward
    return [np.concatenate([[game.initial_belief[s]], np.sort(T[s].ravel()), np.sort(R[s].ravel()),
                            np.sort(T[:, :, s].ravel()), np.sort(R[:, :, s].ravel())])
            for s in range(game.n_states)]


def _state_perms(game: Game, pa: np.ndarray) -> Iterator[np.ndarray]:
    """Backtracking over state permutations with T and R invariant under the joint action map ``pa``."""
    T, R, S = game.transition, game.reward, game.n_states
    sig = _signatures(game)
    cands = [[t for t in range(S) if np.all(np.abs(sig[t] - sig[s]) <= ATOL)] for s in range(S)]
    perm = np.full(S, -1, dtype=np.int64)
    used = np.zeros(S, dtype=bool)

    def consistent(k: int) -> bool:
        done = np.arange(k + 1)
        img = perm[done]
        block = np.ix_(done, np.arange(len(pa)), done)
        return bool(_same(T[np.ix_(img, pa, img)], T[block], axis=(0, 1, 2))
                    and _same(R[np.ix_(img, pa, img)], R[block], axis=(0, 1, 2)))

    def rec(k: int) -> Iterator[np.ndarray]:
        if k == S:
            yield perm.copy()
            return
        for t in cands[k]:
            if not used[t]:
                perm[k], used[t] = t, True
                if consistent(k):
                    yield from rec(k + 1)
                used[t], perm[k] = False, -1

    yield from rec(0)


def _pruned(game: Game) -> list[Transformation]:
    act_combo, joint_a = _joint_tables(game.n_actions)
    obs_combo, joint_o = _joint_tables(game.n_observations)
    out = []
    for a_idx in range(len(act_combo)):
        for ps in _state_perms(game, joint_a[a_idx]):
            if not _same(game.initial_belief[ps], game.initial_belief, axis=(0,)):
                continue
            for o_idx in _observation_combos(game, ps, joint_a[a_idx], joint_o):
                if _legal_ok(game, act_combo[a_idx:a_idx + 1], obs_combo[o_idx:o_idx + 1])[0]:
                    out.append(_build(game, ps, act_combo[a_idx], obs_combo[o_idx]))
    return out


def decpomdp_symmetries(game: Game, method: str = "auto", max_exhaustive: int = 10**7) -> list[Transformation]:
    """Phi_MDP: every phi in Psi leaving T, U, R, b_0 and legal sets invariant (entries equal within ATOL).

    ``method``: 'exhaustive', 'pruned' or 'auto' (exhaustive when |Psi| <= ``max_exhaustive``)."""
    if method == "auto":
        method = "exhaustive" if psi_order(game) <= max_exhaustive else "pruned"
    if method not in ("exhaustive", "pruned"):
        raise ValueError(f"unknown method {method!r}: use 'exhaustive', 'pruned' or 'auto'")
    found = _exhaustive(game) if method == "exhaustive" else _pruned(game)
    assert all(is_decpomdp_symmetry(game, phi, atol=ATOL) for phi in found)
    return sorted(found, key=lambda p: (p.actions, p.observations, p.states))
