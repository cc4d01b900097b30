"""Phi_MDP by graph automorphisms (ers_exact.symmetry.graph) against a brute force over all of Psi written
here, on the built-in games (with their known symmetry groups), random small games and random games with a
planted symmetry; and against the exhaustive search of ers_exact.symmetry.search."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from ers_exact.games import GAMES
from ers_exact.games.random import planted_game
from ers_exact.model.game import Game
from ers_exact.model.transformation import Transformation, is_decpomdp_symmetry
from ers_exact.symmetry.graph import (
    GraphTooLargeError,
    decpomdp_graph,
    decpomdp_symmetries_graph,
    graph_size,
)
from ers_exact.symmetry.search import decpomdp_symmetries

from ..strategies import random_game

ATOL = 1e-12


# ----- the independent oracle -----
def _joint_map(table: np.ndarray, perms: tuple[tuple[int, ...], ...], sizes: tuple[int, ...]) -> np.ndarray:
    images = [np.asarray(p)[table[:, i]] for i, p in enumerate(perms)]
    return np.ravel_multi_index(tuple(images), sizes)


def brute_force(game: Game) -> set[Transformation]:
    """Every phi in Psi with is_decpomdp_symmetry(game, phi). Staged only to save time: the b_0 and T/R
    conditions checked first are exactly the b_0 and T/R parts of is_decpomdp_symmetry (the image of x
    sits at phi(x), so invariance reads X[phi(x)] == X[x])."""
    T, R, b = game.transition, game.reward, game.initial_belief
    out = set()
    for ps in itertools.permutations(range(game.n_states)):
        s = np.array(ps)
        if not np.allclose(b[s], b, atol=ATOL, rtol=0):
            continue
        for pa in itertools.product(*[list(itertools.permutations(range(k))) for k in game.n_actions]):
            a = _joint_map(game.joint_actions, pa, game.n_actions)
            if not (
                np.allclose(T[np.ix_(s, a, s)], T, atol=ATOL, rtol=0)
                and np.allclose(R[np.ix_(s, a, s)], R, atol=ATOL, rtol=0)
            ):
                continue
            obs_perms = [list(itertools.permutations(range(k))) for k in game.n_observations]
            for po in itertools.product(*obs_perms):
                phi = Transformation(ps, pa, po)
                if is_decpomdp_symmetry(game, phi, atol=ATOL):
                    out.add(phi)
    return out


symmetrise = planted_game  # average over <phi>, legal sets united (ers_exact.games.random)


def _random_phi(game: Game, rng: np.random.Generator) -> Transformation:
    return Transformation(
        tuple(rng.permutation(game.n_states)),
        tuple(tuple(rng.permutation(k)) for k in game.n_actions),
        tuple(tuple(rng.permutation(k)) for k in game.n_observations),
    )


def _as_set(found: list[Transformation]) -> set[Transformation]:
    assert len(set(found)) == len(found), "duplicates in the result"
    return set(found)


# ----- built-in games -----
def _swap_both(k: int, i: int, j: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    p = list(range(k))
    p[i], p[j] = p[j], p[i]
    return tuple(p), tuple(p)


def _known(name: str, game: Game) -> set[Transformation] | None:
    ident = Transformation.identity(game)
    if name in ("three-lever", "two-lever"):
        L = game.n_actions[0]
        return {Transformation((0,), (p, p), (p, p)) for p in itertools.permutations(range(L))}
    if name == "dectiger":
        listen = game.action_names[0].index("listen")
        left, right = [k for k in range(3) if k != listen]
        return {ident, Transformation((1, 0), _swap_both(3, left, right), _swap_both(2, 0, 1))}
    if name == "handshake":
        return {ident, Transformation((0,), _swap_both(2, 0, 1), ((0,), (0,)))}
    if name == "toy-coordination":
        return {ident}  # the double action swap is in Phi_ER \ Phi_MDP, not here
    return None


@pytest.mark.parametrize("name", sorted(GAMES))
def test_builtin_games_match_brute_force_and_known_groups(name: str) -> None:
    game = GAMES[name]()
    found = _as_set(decpomdp_symmetries_graph(game))
    assert found == brute_force(game)
    known = _known(name, game)
    if known is not None:
        assert found == known
    assert decpomdp_symmetries_graph(game)[0] == Transformation.identity(game)
    assert decpomdp_symmetries_graph(game, method="enumerate") == decpomdp_symmetries_graph(game)


def test_known_group_orders() -> None:
    orders = {name: len(decpomdp_symmetries_graph(GAMES[name]())) for name in GAMES}
    assert orders["three-lever"] == 6 and orders["two-lever"] == 2
    assert orders["dectiger"] == 2 and orders["handshake"] == 2


# ----- random games -----
RANDOM_CONFIGS = [
    dict(n_agents=2, n_states=2, n_actions=2, n_observations=2),
    dict(n_agents=2, n_states=3, n_actions=(2, 3), n_observations=(3, 2)),
    dict(n_agents=1, n_states=3, n_actions=3, n_observations=3),
    dict(n_agents=3, n_states=2, n_actions=2, n_observations=2),
    dict(n_agents=2, n_states=2, n_actions=3, n_observations=2, sparsity=1.0),  # one-hot rows
]


@pytest.mark.parametrize("legal", [False, True])
@pytest.mark.parametrize("config", range(len(RANDOM_CONFIGS)))
def test_random_and_planted_games_match_brute_force(config: int, legal: bool) -> None:
    rng = np.random.default_rng(1000 * config + legal)
    for trial in range(3):
        base = random_game(
            rng, legal=legal, reward_kind="grid" if trial % 2 else "float", **RANDOM_CONFIGS[config]
        )
        assert _as_set(decpomdp_symmetries_graph(base)) == brute_force(base)
        phi = _random_phi(base, rng)
        planted = symmetrise(base, phi)
        assert is_decpomdp_symmetry(planted, phi, atol=ATOL)
        found = _as_set(decpomdp_symmetries_graph(planted))
        assert phi in found
        assert found == brute_force(planted)
        if config == 0:  # the direct VF2 enumeration too (slow beyond the smallest games)
            assert _as_set(decpomdp_symmetries_graph(planted, method="enumerate")) == found


@pytest.mark.parametrize("legal", [False, True])
def test_fully_symmetric_game_gives_all_of_psi(legal: bool) -> None:
    """Uniform T, U, b_0 and constant R: every phi in Psi is a symmetry (many twin element nodes)."""
    S, n, k_a, k_o = 2, 2, 2, 3
    A, O = k_a**n, k_o**n
    game = random_game(np.random.default_rng(0), n_agents=n, n_states=S, n_actions=k_a, n_observations=k_o)
    masks = tuple(np.ones((1 + k_o, k_a), dtype=bool) for _ in range(n)) if legal else None
    game = replace(
        game,
        transition=np.full((S, A, S), 1 / S),
        observation=np.full((A, S, O), 1 / O),
        reward=np.full((S, A, S), 0.5),
        initial_belief=np.full(S, 1 / S),
        legal_actions=masks,
    )
    found = _as_set(decpomdp_symmetries_graph(game))
    assert len(found) == 2 * (2 * 6) ** n
    assert found == brute_force(game)


def test_float_noise_within_atol_still_matches() -> None:
    """Values equal up to ~1 ulp (as averaging produces) share a colour class."""
    game = GAMES["handshake"]()
    R = game.reward.copy()
    R[0, 3, 0] += 1e-15  # (fist-bump, fist-bump) pays 1 + 1e-15
    noisy = replace(game, reward=R)
    assert _as_set(decpomdp_symmetries_graph(noisy)) == brute_force(noisy) == _known("handshake", game)


# ----- the encoding itself -----
def test_graph_size_and_combined_roles() -> None:
    game = GAMES["dectiger"]()
    G, ids = decpomdp_graph(game)
    assert G.number_of_nodes() == graph_size(game)
    S, A = game.n_states, game.n_joint_actions
    assert G.number_of_nodes() == S + 3 + 3 + 2 + 2 + S * A * S + int((game.observation > 0).sum())
    s0 = ids["states"][0]
    roles = {G.edges[s0, w]["role"] for w in G[s0]}
    assert ("from", "to") in roles  # the fact (s0, a, s0) joins s0 once, with both roles


def test_node_budget_guard() -> None:
    game = GAMES["dectiger"]()
    size = graph_size(game)
    with pytest.raises(GraphTooLargeError, match=f"{size} nodes"):
        decpomdp_symmetries_graph(game, max_nodes=size - 1)
    assert len(decpomdp_symmetries_graph(game, max_nodes=size)) == 2


# ----- agreement with the exhaustive search of ers_exact.symmetry.search -----
@pytest.mark.parametrize("name", sorted(GAMES))
def test_agrees_with_exhaustive_search_on_builtin_games(name: str) -> None:
    game = GAMES[name]()
    assert set(decpomdp_symmetries(game)) == _as_set(decpomdp_symmetries_graph(game))


def test_agrees_with_exhaustive_search_on_random_games() -> None:
    rng = np.random.default_rng(7)
    for config in RANDOM_CONFIGS:
        for legal in (False, True):
            base = random_game(rng, legal=legal, reward_kind="grid", **config)
            assert set(decpomdp_symmetries(base)) == _as_set(decpomdp_symmetries_graph(base))
            # the exhaustive search compares exactly, this module within atol: planted games (averages)
            # agree on these seeds because the averaged entries come out bit-identical
            planted = symmetrise(base, _random_phi(base, rng))
            assert set(decpomdp_symmetries(planted)) == _as_set(decpomdp_symmetries_graph(planted))
