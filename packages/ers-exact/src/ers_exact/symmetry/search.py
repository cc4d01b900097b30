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
from collections.abc import Iterator
from typing import Any

import numpy as np

from ers_exact.model.game import Game
from ers_exact.model.transformation import Transformation, is_decpomdp_symmetry
from ers_exact.util.errors import InputError

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "SymmetryBudgetError",
    "coset_representatives",
    "decpomdp_symmetries",
    "permutation_table",
    "policy_part_order",
    "psi_order",
    "twin_classes",
    "twin_order",
]

_CHUNK = 2_000_000
#: Phi_MDP listings above this many elements are refused (see :func:`decpomdp_symmetries`).
DEFAULT_MAX_ELEMENTS = 100_000
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
        ps = states[good_s[lo : lo + chunk]]  # [c, S]
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
            if _legal_ok(game, act_combo[a_idx : a_idx + 1], obs_combo[o_idx : o_idx + 1])[0]:
                out.append(_build(game, states[s_idx], act_combo[a_idx], obs_combo[o_idx]))
    return out


def _build(game: Game, ps: np.ndarray, act: np.ndarray, obs: np.ndarray) -> Transformation:
    return Transformation(
        tuple(int(v) for v in ps),
        tuple(tuple(int(v) for v in permutation_table(k)[c]) for k, c in zip(game.n_actions, act)),
        tuple(tuple(int(v) for v in permutation_table(k)[c]) for k, c in zip(game.n_observations, obs)),
    )


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
    return [np.flatnonzero(_same(sig, sig[k][None], axis=(1,))) for k in range(len(sig))]


def _value_classes(values: np.ndarray) -> np.ndarray:
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


def _refine(game: Game, rounds: int = 50) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Colour refinement (1-WL) of states, local actions and local observations over T, R, U, b_0 and the
    legal sets: two elements with different colours are never mapped onto each other by a symmetry, so
    colour classes are candidate sets. Multisets are hashed as sums of 64-bit hashes."""
    n = game.n_agents
    Tc, Rc, Uc = (_value_classes(x) for x in (game.transition, game.reward, game.observation))
    ja, jo = game.joint_actions, game.joint_observations
    Tpos = game.transition != 0
    state = _value_classes(game.initial_belief)
    # legal sets: an action keeps its flag at t = 0 and how many observations allow it; an observation keeps
    # how many actions it allows
    masks = [game.legal_mask(i).astype(np.int64) for i in range(n)]
    acts = [_relabel(_mix(m[0], m[1:].sum(axis=0))) for m in masks]
    obs = [_relabel(_mix(m[1:].sum(axis=1))) for m in masks]
    count = -1
    for _ in range(rounds):
        ja_h = _mix(*[acts[i][ja[:, i]] for i in range(n)])  # [A]
        jo_h = _mix(*[obs[i][jo[:, i]] for i in range(n)])  # [O]
        # (s, a, s') facts; zero-T entries still carry R (R must be invariant everywhere)
        tr = _mix(Tc, Rc, ja_h[None, :, None], Tpos)
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


def _state_colours_under(
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
    b0 = _value_classes(game.initial_belief)
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


def _classes_as_candidates(colour: np.ndarray) -> list[np.ndarray]:
    return [np.flatnonzero(colour == c) for c in colour]


def _perms_within(cands: list[np.ndarray]) -> Iterator[np.ndarray]:
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


def _action_combos(
    game: Game, colours: list[np.ndarray]
) -> Iterator[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    """Per-agent action permutations within colour classes (and the joint map they induce) under which every
    joint action keeps its sorted T, R and U entries."""
    T, R, U = game.transition, game.reward, game.observation
    ja = game.joint_actions
    joint_sig = np.concatenate(
        [
            np.sort(T.transpose(1, 0, 2).reshape(game.n_joint_actions, -1), axis=1),
            np.sort(R.transpose(1, 0, 2).reshape(game.n_joint_actions, -1), axis=1),
            np.sort(U.reshape(game.n_joint_actions, -1), axis=1),
        ],
        axis=1,
    )
    per_agent = [list(_perms_within(_classes_as_candidates(c))) for c in colours]
    strides = [int(np.prod(game.n_actions[i + 1 :])) for i in range(game.n_agents)]
    for combo in itertools.product(*per_agent):
        joint = sum(combo[i][ja[:, i]] * strides[i] for i in range(game.n_agents))
        if _same(joint_sig[joint], joint_sig, axis=(0, 1)):
            yield combo, joint


def _state_perms(
    game: Game,
    pa: np.ndarray,
    colours: tuple[np.ndarray, np.ndarray] | None = None,
    prev_twin: np.ndarray | None = None,
) -> Iterator[np.ndarray]:
    """Backtracking over state permutations with T and R invariant under the joint action map ``pa``
    (each new state checked against the states assigned before it: O(|S|^2 |A|) per full assignment);
    candidates: equal signatures and, when given, equal colours (state s of copy A onto t of copy B).
    ``prev_twin[k]``: the previous member of k's twin class (-1: none); when given, only permutations
    increasing on every twin class are yielded -- one per coset ps o tau of the twins' group."""
    T, R, S = game.transition, game.reward, game.n_states
    if colours is not None:  # the refined colours subsume the signatures
        col_a, col_b = colours
        cands = [np.flatnonzero(col_b == col_a[k]) for k in range(S)]
    else:
        cands = _candidates(np.stack(_signatures(game)))
    perm = np.full(S, -1, dtype=np.int64)
    used = np.zeros(S, dtype=bool)
    Tp, Rp = T[:, pa, :], R[:, pa, :]  # Tp[x, a, y] = T[x, pa(a), y]

    def consistent(k: int) -> bool:
        img = perm[: k + 1]
        t = perm[k]
        return bool(
            _same(Tp[t][:, img], T[k][:, : k + 1], axis=(0, 1))
            and _same(Tp[img, :, t], T[: k + 1, :, k], axis=(0, 1))
            and _same(Rp[t][:, img], R[k][:, : k + 1], axis=(0, 1))
            and _same(Rp[img, :, t], R[: k + 1, :, k], axis=(0, 1))
        )

    def rec(k: int) -> Iterator[np.ndarray]:
        if k == S:
            yield perm.copy()
            return
        low = -1 if prev_twin is None or prev_twin[k] < 0 else perm[prev_twin[k]]
        for t in cands[k]:
            if not used[t] and t > low:
                perm[k], used[t] = t, True
                if consistent(k):
                    yield from rec(k + 1)
                used[t], perm[k] = False, -1

    yield from rec(0)


def _observation_perms(
    game: Game, ps: np.ndarray, pa_joint: np.ndarray, colours: list[np.ndarray] | None = None
) -> Iterator[tuple[np.ndarray, ...]]:
    """Per-agent observation permutations with U invariant for fixed state and joint action maps: each joint
    observation o may go to the o' with U[pa(a), ps(s'), o'] = U[a, s', o] everywhere; per-agent
    candidates are read off those, then joint combinations are checked."""
    U = game.observation
    O = game.n_joint_observations
    image = U[pa_joint][:, ps]  # image[a, s', o'] = U[pa(a), ps(s'), o']
    ok = _same(image.reshape(-1, O).T[None, :, :], U.reshape(-1, O).T[:, None, :], axis=(2,))  # [o, o']
    jo = game.joint_observations
    per_agent = []
    for i, k in enumerate(game.n_observations):
        allowed = np.zeros((k, k), dtype=bool)
        for o in range(k):
            rows = ok[jo[:, i] == o]
            for o2 in range(k):
                allowed[o, o2] = bool(rows[:, jo[:, i] == o2].any(axis=1).all())
        if colours is not None:
            allowed &= colours[i][:, None] == colours[i][None, :]
        per_agent.append(list(_perms_within([np.flatnonzero(r) for r in allowed])))
    strides = [int(np.prod(game.n_observations[i + 1 :])) for i in range(game.n_agents)]
    for combo in itertools.product(*per_agent):
        joint = sum(combo[i][jo[:, i]] * strides[i] for i in range(game.n_agents))
        if ok[np.arange(O), joint].all():
            yield combo


def _pruned(game: Game, prev_twin: np.ndarray | None = None) -> list[Transformation]:
    out = []
    _, act_cols, obs_cols = _refine(game)
    classes = (_value_classes(game.transition), _value_classes(game.reward), _value_classes(game.observation))
    jo = game.joint_observations
    jo_h = _mix(*[obs_cols[i][jo[:, i]] for i in range(game.n_agents)])
    for acts, joint_a in _action_combos(game, act_cols):
        colours = _state_colours_under(game, joint_a, jo_h, classes)
        if colours is None:
            continue
        for ps in _state_perms(game, joint_a, colours, prev_twin):
            if not _same(game.initial_belief[ps], game.initial_belief, axis=(0,)):
                continue
            for obs in _observation_perms(game, ps, joint_a, obs_cols):
                if _legal_perms_ok(game, acts, obs):
                    out.append(
                        Transformation(
                            tuple(int(v) for v in ps),
                            tuple(tuple(int(v) for v in p) for p in acts),
                            tuple(tuple(int(v) for v in p) for p in obs),
                        )
                    )
    return out


def coset_representatives(game: Game, prev_twin: np.ndarray) -> list[Transformation]:
    """The pruned search restricted to state permutations increasing on every twin class (``prev_twin[k]``:
    the previous member of k's twin class, -1 for none): one element of Phi_MDP per coset of the twins'
    group (see :mod:`ers_exact.symmetry.mdp_group`)."""
    return _pruned(game, prev_twin)


def _legal_perms_ok(game: Game, acts: tuple[np.ndarray, ...], obs: tuple[np.ndarray, ...]) -> bool:
    """Legal-action tables invariant under per-agent action and observation permutations."""
    if game.legal_actions is None:
        return True
    for mask, pa, po in zip(game.legal_actions, acts, obs):
        rows = np.concatenate([[0], 1 + np.asarray(po)])
        if not np.array_equal(mask[rows][:, pa], mask):
            return False
    return True


def twin_classes(game: Game) -> list[np.ndarray]:
    """Classes (size >= 2) of interchangeable states: s and x are twins when the transposition (s x), with
    every action and observation fixed, is a Dec-POMDP symmetry. Twins multiply |Phi_MDP| by prod k_c!."""
    T, R, U, b0 = game.transition, game.reward, game.observation, game.initial_belief
    state_col, _, _ = _refine(game)
    out = []
    for c in np.unique(state_col):
        members = [int(v) for v in np.flatnonzero(state_col == c)]
        parent = {m: m for m in members}
        for pos, s_ in enumerate(members):
            for x in members[pos + 1 :]:
                if _find(parent, s_) == _find(parent, x):
                    continue
                p = np.arange(game.n_states)
                p[s_], p[x] = x, s_
                if (
                    abs(b0[s_] - b0[x]) <= ATOL
                    and _same(T[x][:, p], T[s_], axis=(0, 1))
                    and _same(T[p][:, :, x], T[:, :, s_], axis=(0, 1))
                    and _same(R[x][:, p], R[s_], axis=(0, 1))
                    and _same(R[p][:, :, x], R[:, :, s_], axis=(0, 1))
                    and _same(U[:, x], U[:, s_], axis=(0, 1))
                ):
                    parent[_find(parent, x)] = _find(parent, s_)
        groups: dict[int, list[int]] = {}
        for m in members:
            groups.setdefault(_find(parent, m), []).append(m)
        out += [np.array(g) for g in groups.values() if len(g) > 1]
    return out


def _find(parent: dict[int, int], v: int) -> int:
    while parent[v] != v:
        v = parent[v]
    return v


def twin_order(game: Game) -> int:
    """prod over twin classes of k_c!: a lower bound on |Phi_MDP| (the twins' permutations alone)."""
    return math.prod(math.factorial(len(c)) for c in twin_classes(game))


class SymmetryBudgetError(InputError, RuntimeError):
    """Phi_MDP has more elements than the budget allows listing."""


def decpomdp_symmetries(
    game: Game,
    method: str = "auto",
    max_exhaustive: int = 10**7,
    max_elements: int | None = DEFAULT_MAX_ELEMENTS,
) -> list[Transformation]:
    """Phi_MDP: every phi in Psi leaving T, U, R, b_0 and legal sets invariant (entries equal within ATOL).

    ``method``: 'exhaustive', 'pruned' or 'auto' (exhaustive when |Psi| <= ``max_exhaustive``). When
    interchangeable states alone (:func:`twin_classes`) give more than ``max_elements`` symmetries, raises
    :class:`SymmetryBudgetError` at once, naming that count."""
    if max_elements is not None and game.n_states > 1:
        twins = twin_classes(game)
        order = math.prod(math.factorial(len(c)) for c in twins)
        if order > max_elements:
            sizes = sorted((len(c) for c in twins), reverse=True)
            shown = ", ".join(map(str, sizes[:12])) + (", ..." if len(sizes) > 12 else "")
            raise SymmetryBudgetError(
                f"{game.name}: Phi_MDP has at least {order:.3g} elements ({len(twins)} classes of interchangeable "
                f"states of sizes {shown}; their permutations alone), more than max_elements = {max_elements:,} "
                "can list (every state permutation acts trivially on policies, so Phi_ER is not affected)"
            )
    if method == "auto":
        method = "exhaustive" if psi_order(game) <= max_exhaustive else "pruned"
    if method not in ("exhaustive", "pruned"):
        raise ValueError(f"unknown method {method!r}: use 'exhaustive', 'pruned' or 'auto'")
    found = _exhaustive(game) if method == "exhaustive" else _pruned(game)
    assert all(is_decpomdp_symmetry(game, phi, atol=ATOL) for phi in found)
    return sorted(found, key=lambda p: (p.actions, p.observations, p.states))
