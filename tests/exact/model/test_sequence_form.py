"""J, dJ/dpi and the local Q^i in sequence form (model/sequence_form.py) against the pass over the joint history tree
(model/values.py with ``sequence=False``) on random two-agent games (discount, illegal actions, sparse and
deterministic policies, batches) and the built-in games; games with one or three agents keep the tree pass.
The tree pass itself is checked against the plain recursion in test_values_reference.py and by finite
differences in test_return_gradient.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from ers_exact.games import GAMES, get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.model.sequence_form import SequenceForm, sequence_form
from ers_exact.model.values import expected_return, local_q_values, return_gradient, uniform_policy

from ..strategies import POLICY_KINDS, GameSpec, game_specs, random_game, random_policy


def _assert_same(tree, pols) -> None:
    want_J = np.asarray(expected_return(tree, pols, sequence=False))
    got_J = np.asarray(expected_return(tree, pols))
    scale = max(1.0, float(np.abs(want_J).max()))
    np.testing.assert_allclose(got_J, want_J, rtol=0, atol=1e-12 * scale)
    for got, want in zip(return_gradient(tree, pols), return_gradient(tree, pols, sequence=False)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(1.0, float(np.abs(want).max())))
    for got, want in zip(local_q_values(tree, pols), local_q_values(tree, pols, sequence=False)):
        assert got.shape == want.shape
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # undefined at the same entries
        scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale, equal_nan=True)


def _batch(tree, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    pols = [random_policy(rng, tree, POLICY_KINDS[b % len(POLICY_KINDS)]) for b in range(len(POLICY_KINDS))]
    return tuple(np.stack([p[i] for p in pols]) for i in range(tree.game.n_agents))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=game_specs(max_agents=2))
def test_sequence_form_equals_the_tree_pass_on_random_games(spec: GameSpec) -> None:
    tree = enumerate_histories(spec.build())
    pols = _batch(tree, spec.seed)
    _assert_same(tree, pols)
    _assert_same(tree, tuple(p[0] for p in pols))  # one policy: a float and unbatched gradients
    assert (sequence_form(tree) is not None) == (spec.n_agents == 2)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_sequence_form_equals_the_tree_pass_on_builtin_games(name: str) -> None:
    tree = enumerate_histories(get_game(name))
    _assert_same(tree, _batch(tree, 0))


def test_sequence_form_is_only_for_two_agents() -> None:
    tree = enumerate_histories(random_game(np.random.default_rng(0), n_agents=3))
    assert sequence_form(tree) is None
    with pytest.raises(ValueError, match="two agents"):
        SequenceForm(tree)


def test_trees_too_large_for_w_keep_the_tree_pass(monkeypatch) -> None:
    from ers_exact.model import sequence_form as module

    tree = enumerate_histories(get_game("dectiger", horizon=3))
    monkeypatch.setattr(module, "MAX_ENTRIES", tree.n_joint_nodes * 9 - 1)
    assert sequence_form(tree) is None
    _assert_same(tree, _batch(tree, 1))  # both sides through the tree pass, still equal


@pytest.mark.parametrize("discount", [0.0, 1e-200])
def test_a_vanishing_discount_takes_the_tree_pass(discount: float) -> None:
    """gamma^t below the smallest normal float (gamma = 0, or 1e-200 at t >= 2): the sequence form's Q^i would
    be 0 / 0 (it was NaN at every t >= 1 history, emptying Phi_ER), so none is built and the default Q^i is
    the tree pass's, finite everywhere on dectiger (every history reachable, every action legal)."""
    game = get_game("dectiger", horizon=3, discount=discount)
    tree = enumerate_histories(game)
    assert sequence_form(tree) is None
    pols = random_policy(np.random.default_rng(0), tree)
    q = local_q_values(tree, pols)
    q_tree = local_q_values(tree, pols, sequence=False)
    for a, b in zip(q, q_tree, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.isfinite(a).all()
    assert sequence_form(enumerate_histories(get_game("dectiger", horizon=3, discount=0.5))) is not None


def test_a_tiny_discount_near_underflow_takes_the_tree_pass() -> None:
    """gamma = 1e-150 at H = 3: gamma^2 = 1e-300 is a normal float, but W's gamma^t times a partner's 1e-8
    reached subnormal floats, and the default Q^i read [1, 0] at the history where agent 0 saw the partner
    pull lever 1 twice; the tree pass (and an independent walk of the game tree) gives [1 - eps, eps]: the
    last pull matches the partner's (lever 0 w.p. 1 - eps, lever 1 w.p. eps) for reward 1."""
    eps = 1e-8
    tree = enumerate_histories(get_game("two-lever", discount=1e-150).with_horizon(3))
    assert sequence_form(tree) is None
    pols = list(uniform_policy(tree))
    pols[1] = np.tile([1 - eps, eps], (len(pols[1]), 1))
    q = local_q_values(tree, tuple(pols))[0]
    k = tree.local[0].index[(1, 1, 1, 1)]
    np.testing.assert_allclose(q[k], [1 - eps, eps], rtol=1e-12)
    assert (
        sequence_form(enumerate_histories(get_game("two-lever", discount=1e-70).with_horizon(3))) is not None
    )


def test_a_joint_policy_mixing_a_table_and_a_batch_is_refused() -> None:
    """Agent 0 one [K, A] table, agent 1 a batch [2, K, A]: once the tree pass used agent 1's first table only
    and the sequence form failed in numpy; now a PolicyError names both shapes."""
    from ers_exact.model.values import PolicyError

    tree = enumerate_histories(get_game("dectiger", horizon=2))
    p0, p1 = random_policy(np.random.default_rng(1), tree)
    mixed = (p0, np.stack([p1, p1]))
    for sequence in (True, False):
        with pytest.raises(PolicyError, match="mix one table and a batch"):
            expected_return(tree, mixed, sequence=sequence)


def test_a_complex_or_empty_policy_batch_is_refused() -> None:
    """A complex table once ran with its imaginary part dropped (numpy's ComplexWarning only), and a batch of
    P = 0 policies failed in a numpy reshape; both are PolicyErrors on both paths."""
    from ers_exact.model.values import PolicyError

    tree = enumerate_histories(get_game("handshake"))
    u = uniform_policy(tree)
    empty = tuple(np.zeros((0, *p.shape)) for p in u)
    for sequence in (True, False):
        with pytest.raises(PolicyError, match="agent 0 has complex entries"):
            expected_return(tree, (u[0] + 5j, u[1]), sequence=sequence)
        with pytest.raises(PolicyError, match="no joint policy"):
            expected_return(tree, empty, sequence=sequence)
    with pytest.raises(PolicyError, match="no joint policy"):
        local_q_values(tree, empty)
