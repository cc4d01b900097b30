"""What a Dec-POMDP symmetry must preserve, as candidate sets for the pruned search of Phi_MDP.

A symmetry phi in Psi maps a state s only onto a state with the same invariants, and likewise local actions
and observations. Two kinds of invariant narrow the images the search (:mod:`ers_exact.symmetry.search`)
backtracks over:

* **signatures** (:func:`signature_candidates`): b_0(s) and the sorted T and R entries of s's row and column;
* **colour refinement** (1-WL, :func:`refine_colours`) of states, local actions and local observations over
  T, R, U, b_0 and the legal sets, multisets hashed as sums of 64-bit hashes (:func:`joint_colours`); and
  its two-copy form for a fixed joint action map pa (:func:`state_colours_under`), whose colours pair the
  states of the game with those of the game with its joint actions renamed by pa.

Colour classes become candidate sets (:func:`colour_candidates`), and :func:`permutations_within` lists the
permutations that map every element into its candidate set. Entries of T, R, U and b_0 are equal when they
differ by at most :data:`ATOL` (:func:`entries_equal`, :func:`value_classes`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ers_exact.model.game import Game

__all__ = [
    "ATOL",
    "colour_candidates",
    "entries_equal",
    "joint_colours",
    "permutations_within",
    "refine_colours",
    "signature_candidates",
    "state_colours_under",
    "value_classes",
]

ATOL = 1e-12  # entries are equal when they differ by at most this (averaged games are not bit-exact)


def entries_equal(x: np.ndarray, y: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    """|x - y| <= ATOL at every entry along ``axis`` (broadcast)."""
    return np.all(np.abs(x - y) <= ATOL, axis=axis)


def _signatures(game: Game) -> list[np.ndarray]:
    """Invariants of a state under any symmetry: b_0 and the sorted T and R entries of its row and column."""
    T, R = game.transition, game.reward
    return [
        np.concatenate(
            [
                [game.initial_belief[s]],
                np.sort(T[s].ravel()),
                np.sort(R[s].ravel()),
                np.sort(T[:, :, s].ravel()),
                np.sort(R[:, :, s].ravel()),
            ]
        )
        for s in range(game.n_states)
    ]


def _candidates(sig: np.ndarray) -> list[np.ndarray]:
    """For each row of ``sig`` [n, m], the rows equal to it within ATOL (the possible images)."""
    return [np.flatnonzero(entries_equal(sig, sig[k][None], axis=(1,))) for k in range(len(sig))]


def signature_candidates(game: Game) -> list[np.ndarray]:
    """For each state s, the states with the same signature (:func:`_signatures`): its possible images."""
    return _candidates(np.stack(_signatures(game)))


def value_classes(values: np.ndarray) -> np.ndarray:
    """Integer class of every entry; entries within ATOL of a neighbour in sorted order share a class."""
    flat = values.ravel()
    order = np.argsort(flat, kind="stable")
    ids = np.empty(len(flat), dtype=np.int64)
    ids[order] = np.concatenate([[0], np.cumsum(np.diff(flat[order]) > ATOL)]) if len(flat) else []
    return ids.reshape(values.shape)


_M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)


def _mix(*parts: Any) -> np.ndarray:
    """A 64-bit hash of aligned integer arrays (order matters); sums of hashes encode multisets."""
    with np.errstate(over="ignore"):
        h = np.zeros(np.broadcast(*parts).shape, dtype=np.uint64) + np.uint64(0x51ED270B27FD8A73)
        for x in parts:
            h = (h ^ np.asarray(x).astype(np.uint64)) * _M1
            h = (h ^ (h >> np.uint64(31))) * _M2
            h ^= h >> np.uint64(29)
    return h


def _relabel(h: np.ndarray) -> np.ndarray:
    return np.unique(h, return_inverse=True)[1].astype(np.int64).reshape(h.shape)


def joint_colours(colours: Sequence[np.ndarray], joint: np.ndarray) -> np.ndarray:
    """The hash of each joint element from its agents' colours: joint [J, n] local indices -> [J]."""
    return _mix(*[colours[i][joint[:, i]] for i in range(joint.shape[1])])


def refine_colours(game: Game, rounds: int = 50) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Colour refinement (1-WL) of states, local actions and local observations over T, R, U, b_0 and the
    legal sets: two elements with different colours are never mapped onto each other by a symmetry, so
    colour classes are candidate sets. Multisets are hashed as sums of 64-bit hashes."""
    n = game.n_agents
    Tc, Rc, Uc = (value_classes(x) for x in (game.transition, game.reward, game.observation))
    ja, jo = game.joint_actions, game.joint_observations
    state = value_classes(game.initial_belief)
    # legal sets: an action keeps its flag at t = 0 and how many observations allow it; an observation keeps
    # how many actions it allows
    masks = [game.legal_mask(i).astype(np.int64) for i in range(n)]
    acts = [_relabel(_mix(m[0], m[1:].sum(axis=0))) for m in masks]
    obs = [_relabel(_mix(m[1:].sum(axis=1))) for m in masks]
    count = -1
    for _ in range(rounds):
        ja_h = joint_colours(acts, ja)  # [A]
        jo_h = joint_colours(obs, jo)  # [O]
        # (s, a, s') facts; zero-T entries still carry R (R must be invariant everywhere). T enters by its
        # ATOL classes only (an exact-zero test split a 1e-13 entry from a 0 one, which the symmetry check
        # counts equal, and lost that symmetry)
        tr = _mix(Tc, Rc, ja_h[None, :, None])
        out_h = (_mix(tr, state[None, None, :])).sum(axis=(1, 2))
        in_h = (_mix(tr, state[:, None, None], np.uint64(7))).sum(axis=(0, 1))
        uo = _mix(Uc, ja_h[:, None, None], jo_h[None, None, :])  # [A, S', O]
        u_state = uo.sum(axis=(0, 2))
        fact = _mix(tr, state[:, None, None], state[None, None, :])  # [S, A, S']
        new_state = _relabel(_mix(state, out_h, in_h, u_state))
        u_fact = _mix(uo, state[None, :, None])
        new_acts, new_obs = [], []
        per_a = _mix(fact.sum(axis=(0, 2)), u_fact.sum(axis=(1, 2)))  # [A]
        per_o = u_fact.sum(axis=(0, 1))  # [O]
        for i in range(n):
            h = np.zeros(game.n_actions[i], dtype=np.uint64)
            with np.errstate(over="ignore"):
                np.add.at(h, ja[:, i], per_a)
            new_acts.append(_relabel(_mix(acts[i], h)))
            g = np.zeros(game.n_observations[i], dtype=np.uint64)
            with np.errstate(over="ignore"):
                np.add.at(g, jo[:, i], per_o)
            new_obs.append(_relabel(_mix(obs[i], g)))
        state, acts, obs = new_state, new_acts, new_obs
        total = (
            len(np.unique(state)) + sum(len(np.unique(a)) for a in acts) + sum(len(np.unique(o)) for o in obs)
        )
        if total == count:
            break
        count = total
    return state, acts, obs


def state_colours_under(
    game: Game,
    pa: np.ndarray,
    jo_h: np.ndarray,
    classes: tuple[np.ndarray, np.ndarray, np.ndarray],
    rounds: int = 50,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Colour refinement of the states of the game (copy A) and of the game with its joint actions renamed
    by ``pa`` (copy B, T_B[s, a, s'] = T[s, pa(a), s']), with joint action *indices* as labels: a state map
    with T, R and U invariant under ``pa`` sends each state of A to a state of B with the same colour.
    Returns (colours of A, colours of B), or None when the colour histograms differ (no such map)."""
    Tc, Rc, Uc = classes  # value classes of T, R, U
    a_idx = np.arange(game.n_joint_actions)
    copies = [(Tc, Rc, Uc), (Tc[:, pa, :], Rc[:, pa, :], Uc[pa])]
    b0 = value_classes(game.initial_belief)
    cols = [b0, b0]
    facts = [_mix(tc, rc, a_idx[None, :, None]) for tc, rc, _ in copies]  # [S, A, S'] per copy
    u_hash = [_mix(uc, a_idx[:, None, None], jo_h[None, None, :]).sum(axis=(0, 2)) for _, _, uc in copies]
    count = -1
    for _ in range(rounds):
        hashes = []
        for tr, u_h, col in zip(facts, u_hash, cols):
            out_h = _mix(tr, col[None, None, :]).sum(axis=(1, 2))
            in_h = _mix(tr, col[:, None, None], np.uint64(7)).sum(axis=(0, 1))
            hashes.append(_mix(col, out_h, in_h, u_h))
        both = _relabel(np.concatenate(hashes))
        S = game.n_states
        cols = [both[:S], both[S:]]
        if not np.array_equal(
            np.bincount(cols[0], minlength=both.max() + 1), np.bincount(cols[1], minlength=both.max() + 1)
        ):
            return None
        total = len(np.unique(both))
        if total == count:
            break
        count = total
    return cols[0], cols[1]


def colour_candidates(colour: np.ndarray) -> list[np.ndarray]:
    """For each element k, the elements with k's colour (its possible images)."""
    return [np.flatnonzero(colour == c) for c in colour]


def permutations_within(cands: list[np.ndarray]) -> Iterator[np.ndarray]:
    """Every permutation p of range(n) with p[k] in cands[k] (backtracking)."""
    n = len(cands)
    perm = np.full(n, -1, dtype=np.int64)
    used = np.zeros(n, dtype=bool)

    def rec(k: int) -> Iterator[np.ndarray]:
        if k == n:
            yield perm.copy()
            return
        for c in cands[k]:
            if not used[c]:
                perm[k], used[c] = c, True
                yield from rec(k + 1)
                used[c], perm[k] = False, -1

    yield from rec(0)
