"""Property tests (Hypothesis) for the algebra of transformations on random games:
a Dec-POMDP symmetry preserves J and Q (paper, Appendix "Group Properties"), XP(pi, pi) = J(pi),
transformations compose as a group action on policies."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ers_exact.games.random import planted_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.objectives import cross_play
from ers_exact.model.transformation import (
    Transformation,
    apply_to_policy,
    history_map,
    is_admissible,
    is_decpomdp_symmetry,
)
from ers_exact.model.values import expected_return, local_q_values

from ..strategies import game_specs, random_policy

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@SETTINGS
@given(spec=game_specs(max_nodes=150).map(lambda s: replace(s, legal=False)), seed=st.integers(0, 2**31))
def test_decpomdp_symmetry_preserves_j_and_q(spec, seed) -> None:
    rng = np.random.default_rng(seed)
    base = spec.build()
    phi = Transformation.random(base, rng)
    game = planted_game(base, phi)
    assert is_decpomdp_symmetry(game, phi, atol=1e-9)
    tree = enumerate_histories(game)
    assert is_admissible(tree, phi)
    pol = random_policy(rng, tree, "full")
    image = apply_to_policy(tree, phi, pol)
    assert abs(expected_return(tree, image) - expected_return(tree, pol)) < 1e-9
    # Q_{phi(pi)}(phi(tau), phi(a)) = Q_pi(tau, a) for every agent (lemma in the paper's Appendix)
    for i, (q, q_img) in enumerate(zip(local_q_values(tree, pol), local_q_values(tree, image))):
        hmap = history_map(tree, phi, i)
        np.testing.assert_allclose(q_img[hmap][:, list(phi.actions[i])], q, atol=1e-9)


@SETTINGS
@given(spec=game_specs(max_nodes=150), seed=st.integers(0, 2**31))
def test_cross_play_with_itself_is_self_play(spec, seed) -> None:
    tree = enumerate_histories(spec.build())
    pol = random_policy(np.random.default_rng(seed), tree, "full")
    assert abs(cross_play(tree, pol, pol) - expected_return(tree, pol)) < 1e-10


@SETTINGS
@given(spec=game_specs(max_nodes=150).map(lambda s: replace(s, legal=False)), seed=st.integers(0, 2**31))
def test_transformations_act_as_a_group_on_policies(spec, seed) -> None:
    rng = np.random.default_rng(seed)
    base = spec.build()
    phi = Transformation.random(base, rng)
    game = planted_game(base, phi)
    tree = enumerate_histories(game)
    psi = phi.compose(phi)  # also a symmetry, so admissible
    pol = random_policy(rng, tree, "full")
    for a, b in zip(
        apply_to_policy(tree, psi, pol), apply_to_policy(tree, phi, apply_to_policy(tree, phi, pol))
    ):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(apply_to_policy(tree, phi.inverse(), apply_to_policy(tree, phi, pol)), pol):
        np.testing.assert_array_equal(a, b)
