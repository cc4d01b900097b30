"""Exhaustive search for Dec-POMDP symmetries Phi_MDP and expected-return symmetries Phi_ER over Psi.

Psi = S_{|S|} x prod_i S_{|A^i|} x prod_i S_{|O^i|} (no agent permutations). A Dec-POMDP symmetry leaves
T, U and R invariant (paper, eq. decpomdp-invariance); ers also requires b_0 and the legal-action sets to
be invariant, without which the paper's lemma J(phi(pi)) = J(pi) fails.

Two searches for Phi_MDP that must agree (tests check it):
* ``exhaustive``: every candidate of Psi, vectorised in chunks (T, R, b_0 on (state, action) pairs; U and
  legal sets on the survivors) -- for Psi up to ~10^6-10^7 candidates;
* ``pruned``: for each joint action permutation, state permutations by backtracking over signature-
  compatible images (checking T and R on the assigned block), then observation permutations vectorised.
The invariants that prune it (signatures, colour refinement, candidate sets; :data:`ATOL`) live in
:mod:`ers_exact.symmetry.refinement`, the graph-automorphism method in :mod:`ers_exact.symmetry.graph`.

ER membership (DESIGN.md): phi is in Phi_ER w.r.t. a pool when for every pi in the pool phi(pi) is a
Boltzmann fixed point (residual <= tol) and J(phi(pi)) = J* (within tol). A transformation acts on
policies only through its action and observation parts, so Phi_ER = S_{|S|} x (its policy part).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

from ers_exact.model.game import Game, check_game
from ers_exact.model.transformation import Transformation, is_decpomdp_symmetry
from ers_exact.symmetry.refinement import (
    ATOL,
    colour_candidates,
    entries_equal,
    joint_colours,
    permutations_within,
    refine_colours,
    signature_candidates,
    state_colours_under,
    value_classes,
)
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
    good_s = np.flatnonzero(entries_equal(game.initial_belief[states], game.initial_belief[None], axis=(1,)))
    S, A = game.n_states, game.n_joint_actions
    chunk = max(1, _CHUNK // max(1, S * A * S * len(joint_a)))
    for lo in range(0, len(good_s), chunk):
        ps = states[good_s[lo : lo + chunk]]  # [c, S]
        idx = (ps[:, None, :, None, None], joint_a[None, :, None, :, None], ps[:, None, None, None, :])
        ok = entries_equal(T[idx], T, axis=(2, 3, 4)) & entries_equal(R[idx], R, axis=(2, 3, 4))  # [c, M_a]
        for c, m in zip(*np.nonzero(ok)):
            yield int(good_s[lo + c]), int(m)


def _observation_combos(game: Game, ps: np.ndarray, pa_joint: np.ndarray, joint_o: np.ndarray) -> np.ndarray:
    """Indices of the observation combos with U invariant for a fixed state and joint action map."""
    U = game.observation
    image = U[pa_joint[None, :, None, None], ps[None, None, :, None], joint_o[:, None, None, :]]
    return np.flatnonzero(entries_equal(image, U[None], axis=(1, 2, 3)))


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
    per_agent = [list(permutations_within(colour_candidates(c))) for c in colours]
    strides = [int(np.prod(game.n_actions[i + 1 :])) for i in range(game.n_agents)]
    for combo in itertools.product(*per_agent):
        joint = sum(combo[i][ja[:, i]] * strides[i] for i in range(game.n_agents))
        if entries_equal(joint_sig[joint], joint_sig, axis=(0, 1)):
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
        cands = signature_candidates(game)
    perm = np.full(S, -1, dtype=np.int64)
    used = np.zeros(S, dtype=bool)
    Tp, Rp = T[:, pa, :], R[:, pa, :]  # Tp[x, a, y] = T[x, pa(a), y]

    def consistent(k: int) -> bool:
        img = perm[: k + 1]
        t = perm[k]
        return bool(
            entries_equal(Tp[t][:, img], T[k][:, : k + 1], axis=(0, 1))
            and entries_equal(Tp[img, :, t], T[: k + 1, :, k], axis=(0, 1))
            and entries_equal(Rp[t][:, img], R[k][:, : k + 1], axis=(0, 1))
            and entries_equal(Rp[img, :, t], R[: k + 1, :, k], axis=(0, 1))
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
    ok = entries_equal(
        image.reshape(-1, O).T[None, :, :], U.reshape(-1, O).T[:, None, :], axis=(2,)
    )  # [o, o']
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
        per_agent.append(list(permutations_within([np.flatnonzero(r) for r in allowed])))
    strides = [int(np.prod(game.n_observations[i + 1 :])) for i in range(game.n_agents)]
    for combo in itertools.product(*per_agent):
        joint = sum(combo[i][jo[:, i]] * strides[i] for i in range(game.n_agents))
        if ok[np.arange(O), joint].all():
            yield combo


def _pruned(game: Game, prev_twin: np.ndarray | None = None) -> list[Transformation]:
    out = []
    _, act_cols, obs_cols = refine_colours(game)
    classes = (value_classes(game.transition), value_classes(game.reward), value_classes(game.observation))
    jo_h = joint_colours(obs_cols, game.joint_observations)
    for acts, joint_a in _action_combos(game, act_cols):
        colours = state_colours_under(game, joint_a, jo_h, classes)
        if colours is None:
            continue
        for ps in _state_perms(game, joint_a, colours, prev_twin):
            if not entries_equal(game.initial_belief[ps], game.initial_belief, axis=(0,)):
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
    state_col, _, _ = refine_colours(game)
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
                    and entries_equal(T[x][:, p], T[s_], axis=(0, 1))
                    and entries_equal(T[p][:, :, x], T[:, :, s_], axis=(0, 1))
                    and entries_equal(R[x][:, p], R[s_], axis=(0, 1))
                    and entries_equal(R[p][:, :, x], R[:, :, s_], axis=(0, 1))
                    and entries_equal(U[:, x], U[:, s_], axis=(0, 1))
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
    if max_elements is not None and check_game(game).n_states > 1:
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
