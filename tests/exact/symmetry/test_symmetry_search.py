"""Phi_MDP (two exhaustive searches) and Phi_ER (exact membership against the optimal pool), as groups."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ers_exact.games import GAMES, get_game
from ers_exact.games.random import planted_game, random_small_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.transformation import (
    InadmissibleError,
    Transformation,
    apply_to_policy,
    is_decpomdp_symmetry,
)
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import boltzmann_residual
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.symmetry.er import er_symmetries
from ers_exact.symmetry.groups import is_subset, summarise
from ers_exact.symmetry.search import decpomdp_symmetries, psi_order


def keyset(phis):
    return {(p.states, p.actions, p.observations) for p in phis}


@pytest.mark.parametrize("name", list(GAMES))
def test_exhaustive_and_pruned_searches_agree_on_builtin_games(name: str) -> None:
    game = get_game(name)
    assert keyset(decpomdp_symmetries(game, "exhaustive")) == keyset(decpomdp_symmetries(game, "pruned"))


@pytest.mark.parametrize("seed", range(12))
def test_searches_agree_on_random_and_planted_games(seed: int) -> None:
    rng = np.random.default_rng(seed)
    game = random_small_game(rng, f"r{seed}")
    if seed % 2:
        phi = Transformation.random(game, rng)
        game = planted_game(game, phi)
        assert is_decpomdp_symmetry(game, phi, atol=1e-12)
    exhaustive = decpomdp_symmetries(game, "exhaustive")
    assert keyset(exhaustive) == keyset(decpomdp_symmetries(game, "pruned"))
    if seed % 2:
        assert (phi.states, phi.actions, phi.observations) in keyset(exhaustive)
    assert summarise(exhaustive).closed  # a group: closed under composition


def test_a_transition_within_the_tolerance_of_zero_keeps_its_symmetry() -> None:
    """T(s1 | s0, (a, a)) = 1e-13 against T(s1 | s0, (b, b)) = 0: the swap a <-> b of both agents is a
    symmetry within the 1e-12 tolerance, and every method finds it (the pruned search and the group once
    lost it: colour refinement tested T against exact zero)."""
    from ers_exact.model.game import make_game
    from ers_exact.symmetry.graph import decpomdp_symmetries_graph
    from ers_exact.symmetry.mdp_group import decpomdp_group

    T = np.zeros((2, 4, 2))
    T[:, :, 0] = 1.0
    T[0, 0] = 1 - 1e-13, 1e-13
    R = np.zeros((2, 4))
    R[:, [0, 3]] = 1.0
    game = make_game(
        "tiny-leak",
        ["s0", "s1"],
        [["a", "b"], ["a", "b"]],
        [["o"], ["o"]],
        T,
        np.ones((4, 2, 1)),
        R,
        np.array([1.0, 0.0]),
        horizon=1,
    )
    swap = Transformation((0, 1), ((1, 0), (1, 0)), ((0,), (0,)))
    assert is_decpomdp_symmetry(game, swap)
    assert len(decpomdp_symmetries(game, method="exhaustive")) == 2
    assert len(decpomdp_symmetries(game, method="pruned")) == 2
    assert decpomdp_group(game).order == 2 and len(decpomdp_symmetries_graph(game)) == 2


def test_three_lever_mdp_symmetries_are_the_six_lever_relabelings() -> None:
    expected = {((0,), (p, p), (p, p)) for p in itertools.permutations(range(3))}
    assert keyset(decpomdp_symmetries(get_game("three-lever"))) == expected
    assert psi_order(get_game("three-lever")) == 6**4


@pytest.fixture(scope="module")
def toy():
    return enumerate_histories(get_game("toy-coordination"))


def test_er_members_really_preserve_the_optimal_pool(toy) -> None:
    fs = solve_fixed_points(toy, 0.3)
    pool = [p.policy for p in fs.optimal_points]
    er = er_symmetries(toy, pool, 0.3, fs.J_star)
    assert len(er.members) == 2 and er.orbits == ((0, 1),) and er.images_outside_pool == 0
    for phi in er.members:
        for pi in pool:
            image = apply_to_policy(toy, phi, pi)
            assert boltzmann_residual(toy, image, 0.3) < 1e-8
            assert expected_return(toy, image) == pytest.approx(fs.J_star, abs=1e-8)


def test_a_pool_with_a_repeated_point_lists_each_member_once(toy) -> None:
    """Matching found each member once per copy of pi_0 in the pool (3 members for the toy's 2); both
    methods must give the brute force over every policy part of Psi, each element once."""
    fs = solve_fixed_points(toy, 0.3)
    pool = [p.policy for p in fs.optimal_points]
    pool = pool + [pool[0]]
    game = toy.game
    brute = set()
    for parts in itertools.product(
        *[itertools.product(itertools.permutations(range(a)), itertools.permutations(range(o)))
          for a, o in zip(game.n_actions, game.n_observations)]
    ):  # fmt: skip
        phi = Transformation(
            tuple(range(game.n_states)), tuple(a for a, _ in parts), tuple(o for _, o in parts)
        )
        try:
            images = [apply_to_policy(toy, phi, pi) for pi in pool]
        except InadmissibleError:
            continue
        if all(
            boltzmann_residual(toy, im, 0.3) <= 1e-8 and abs(expected_return(toy, im) - fs.J_star) <= 1e-8
            for im in images
        ):
            brute.add(phi)
    assert len(brute) == 2
    for method in ("exhaustive", "matching"):
        er = er_symmetries(toy, pool, 0.3, fs.J_star, method=method, progress=False)
        assert len(er.members) == len(set(er.members)) == er.order_on_policies
        assert set(er.members) == brute


@pytest.mark.parametrize("name", list(GAMES))
@pytest.mark.parametrize("alpha", [0.25, 1.0])
def test_mdp_is_a_subgroup_of_er(name: str, alpha: float) -> None:
    tree = enumerate_histories(get_game(name))
    fs = solve_fixed_points(tree, alpha, SolverConfig(n_starts=8, complete_search=False, certify=False))
    er = er_symmetries(tree, [p.policy for p in fs.optimal_points], alpha, fs.J_star)
    mdp = decpomdp_symmetries(tree.game)
    assert is_subset(mdp, er.members)
    if er.members:
        assert summarise(er.members, include_states=False).closed
