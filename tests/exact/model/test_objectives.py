"""Cross-play, other-play, symmetriser and transformations on closed-form cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.objectives import cross_play, other_play, seat_assignments, symmetrise
from ers_exact.model.transformation import (
    InadmissibleError,
    Transformation,
    apply_to_log_policy,
    apply_to_policy,
    is_admissible,
    is_decpomdp_symmetry,
)
from ers_exact.model.values import expected_return, uniform_policy


def lever_relabelings(levers: int) -> list[Transformation]:
    """The |levers|! Dec-POMDP symmetries of the iterated lever game: one permutation on both agents'
    actions and observations (the observation is the partner's lever)."""
    out = []
    for p in itertools.permutations(range(levers)):
        out.append(Transformation((0,), (p, p), (p, p)))
    return out


def random_policy(tree, rng, batch=None):
    def shape(h):
        return ((batch,) if batch else ()) + (len(h),)

    return tuple(rng.dirichlet(np.ones(tree.game.n_actions[h.agent]), size=shape(h)) for h in tree.local)


def op_optimal_three_lever(tree) -> tuple[np.ndarray, ...]:
    """Uniform first lever; repeat after a match, otherwise the unique unused lever (paper, Sec. 5.1)."""
    pols = []
    for hist in tree.local:
        pol = np.full((len(hist), 3), 1 / 3)
        for k in range(1, len(hist)):
            a0, o1 = hist.as_tuple(k)
            pol[k] = np.eye(3)[a0 if a0 == o1 else 3 - a0 - o1]
        pols.append(pol)
    return tuple(pols)


@pytest.fixture(scope="module")
def lever3():
    return enumerate_histories(get_game("three-lever"))


def test_op_optimum_of_three_lever_is_four_thirds(lever3) -> None:
    phis = lever_relabelings(3)
    assert all(is_decpomdp_symmetry(lever3.game, phi) for phi in phis)
    pol = op_optimal_three_lever(lever3)
    assert expected_return(lever3, pol) == pytest.approx(4 / 3, abs=1e-12)
    assert other_play(lever3, pol, phis) == pytest.approx(4 / 3, abs=1e-12)


def test_arbitrary_convention_loses_under_other_play(lever3) -> None:
    # both always pull lever 0: J = 2; against a random relabelling only 1/3 of partners agree -> 2/3
    pol = tuple(np.tile(np.eye(3)[0], (len(h), 1)) for h in lever3.local)
    assert expected_return(lever3, pol) == pytest.approx(2.0)
    assert other_play(lever3, pol, lever_relabelings(3)) == pytest.approx(2 / 3, abs=1e-12)


def test_cross_play_with_itself_is_self_play(lever3) -> None:
    rng = np.random.default_rng(0)
    pol = random_policy(lever3, rng, batch=4)
    np.testing.assert_allclose(cross_play(lever3, pol, pol), expected_return(lever3, pol), atol=1e-12)


def test_cross_play_is_the_mean_of_the_two_mixed_profiles(lever3) -> None:
    rng = np.random.default_rng(1)
    p1, p2 = random_policy(lever3, rng), random_policy(lever3, rng)
    expected = 0.5 * (expected_return(lever3, (p1[0], p2[1])) + expected_return(lever3, (p2[0], p1[1])))
    assert cross_play(lever3, p1, p2) == pytest.approx(expected, abs=1e-12)


def test_seat_assignments() -> None:
    assert seat_assignments(2).tolist() == [[0, 1], [1, 0]]
    assert len(seat_assignments(3)) == 6


def test_symmetriser_is_invariant(lever3) -> None:
    rng = np.random.default_rng(2)
    phis = lever_relabelings(3)
    sym = symmetrise(lever3, random_policy(lever3, rng), phis)
    for phi in phis:
        for a, b in zip(apply_to_policy(lever3, phi, sym), sym):
            np.testing.assert_allclose(a, b, atol=1e-12)


def test_transformation_algebra(lever3) -> None:
    rng = np.random.default_rng(3)
    phis = lever_relabelings(3)
    ident = Transformation.identity(lever3.game)
    pol = random_policy(lever3, rng)
    for f, g in itertools.product(phis, phis):
        assert f.compose(f.inverse()) == ident
        lhs = apply_to_policy(lever3, f.compose(g), pol)
        rhs = apply_to_policy(lever3, f, apply_to_policy(lever3, g, pol))
        for a, b in zip(lhs, rhs):
            np.testing.assert_array_equal(a, b)


def test_log_policy_relabelling_is_the_relabelled_log_policy(lever3) -> None:
    """apply_to_log_policy permutes log pi exactly as apply_to_policy permutes pi (bit for bit), and stays finite
    where pi underflows."""
    pol = random_policy(lever3, np.random.default_rng(4))
    for phi in lever_relabelings(3):
        got = apply_to_log_policy(lever3, phi, [np.log(p)[None] for p in pol])
        for a, b in zip(got, apply_to_policy(lever3, phi, pol)):
            np.testing.assert_array_equal(a[0], np.log(b))
        cold = apply_to_log_policy(lever3, phi, [3000.0 * np.log(p)[None] for p in pol])
        assert all(np.isfinite(c).all() for c in cold)  # exp(3000 log p) underflows to 0


def test_toy_game_action_swap_needs_observation_swap() -> None:
    game = get_game("toy-coordination")
    tree = enumerate_histories(game)
    swap = (1, 0)
    obs_names = game.observation_names[0]
    identity_obs = tuple(range(len(obs_names)))
    # the paper's phi: swap both agents' actions, fix states and observations -> maps (0, x) to (1, x)
    paper_phi = Transformation(tuple(range(game.n_states)), (swap, swap), (identity_obs, identity_obs))
    assert not is_admissible(tree, paper_phi)
    with pytest.raises(InadmissibleError):
        apply_to_policy(tree, paper_phi, uniform_policy(tree))
    with pytest.raises(InadmissibleError):
        apply_to_log_policy(tree, paper_phi, [np.log(p)[None] for p in uniform_policy(tree)])
    # its admissible twin also swaps the observations x and m
    x, m = obs_names.index("x"), obs_names.index("m")
    twin_obs = list(identity_obs)
    twin_obs[x], twin_obs[m] = m, x
    twin = Transformation(tuple(range(game.n_states)), (swap, swap), (tuple(twin_obs), tuple(twin_obs)))
    assert is_admissible(tree, twin)
    assert not is_decpomdp_symmetry(game, twin)
