"""A tabular game's Phi_MDP on the batched env (``ers_deep.envs.tabular.symmetry``): as many maps as ers-exact
counts on policies, a group, and each one preserves J of every policy (checked by ers-exact's own values
on the policy the map gives: pi'(a | tau) = pi(phi_A(a) | phi(tau))), where a map that is no symmetry does
not; ``env_symmetries`` (other-play's "mdp", XP(*)+MDP) serves them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ers_deep.crossplay import env_symmetries
from ers_deep.envs.symmetry import IndexSymmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.envs.tabular.symmetry import tabular_symmetries
from ers_deep.train import paper_config
from ers_exact.games import get_game
from ers_exact.model.values import expected_return
from ers_exact.symmetry.mdp_group import decpomdp_group
from ers_exact.util.options import UsageError


def _mapped_policy(env: TabularEnv, sym: IndexSymmetry, probs: torch.Tensor) -> torch.Tensor:
    """[K, A] pi'(a | tau) = pi(phi_A(a) | phi(tau)), phi read off the map's public gathers."""
    image = sym.apply_obs(torch.eye(env.obs_shape[0])).argmax(-1)  # [K] history k -> phi(k)
    actions = sym.apply_actions(torch.arange(env.num_actions))  # [A] a -> phi_A(a)
    return probs[image][:, actions]


def _random_policy(env: TabularEnv, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.rand(env.obs_shape[0], env.num_actions, generator=g, dtype=torch.float64) * 4
    return torch.softmax(logits.masked_fill(~env._legal, -torch.inf), -1)


@pytest.mark.parametrize("name, count", [("three-lever", 6), ("dectiger", 2), ("two-lever", 2)])
def test_every_map_preserves_j_and_the_maps_are_phi_mdp(name: str, count: int) -> None:
    env = TabularEnv(name, batch_size=1)
    syms = tabular_symmetries(env)
    assert len(syms) == count == len(decpomdp_group(env.game).policy_parts) and syms[0].is_identity()
    names = {s.name for s in syms}
    for a in syms:  # closed under composition and inverses
        assert a.inverse().compose(a).is_identity()
        assert all(any(torch.equal(a.compose(b).obs_index, c.obs_index) for c in syms) for b in syms)
    assert len(names) == count
    for seed in range(3):
        probs = _random_policy(env, seed)
        j = expected_return(env.tree, env.split_policy(probs))
        for sym in syms:
            mapped = expected_return(env.tree, env.split_policy(_mapped_policy(env, sym, probs)))
            assert mapped == pytest.approx(j, abs=1e-12)


def test_a_map_that_is_no_symmetry_changes_j() -> None:
    """The check above can fail: dectiger's listen action swapped with open-left (observations kept) changes
    J of a random policy."""
    env = TabularEnv("dectiger", batch_size=1)
    K = env.obs_shape[0]
    wrong = IndexSymmetry(torch.arange(K), torch.tensor([1, 0, 2]), "wrong", (K,))
    probs = _random_policy(env, 0)
    j = expected_return(env.tree, env.split_policy(probs))
    assert abs(expected_return(env.tree, env.split_policy(_mapped_policy(env, wrong, probs))) - j) > 1e-3


def test_env_symmetries_of_a_tabular_config() -> None:
    """Other-play's "mdp" on three-lever was the identity alone (and XP(*)+MDP NaN), where Phi_MDP has 6."""
    assert len(env_symmetries(paper_config("tabular:three-lever"))) == 6
    assert env_symmetries(paper_config("tabular:toy-coordination")) == ()  # Phi_MDP is the identity


def test_a_phi_mdp_beyond_the_bound_is_refused() -> None:
    env = TabularEnv(get_game("three-lever"), batch_size=1)
    with pytest.raises(UsageError, match="6 elements on policies, more than the 5"):
        tabular_symmetries(env, max_symmetries=5)
    assert np.all([s.obs_shape == env.obs_shape for s in tabular_symmetries(env)])


def test_an_inadmissible_transformation_is_refused() -> None:
    """``exact_symmetry`` (other-play's ``--symmetries`` from an ers-exact result) refuses a phi that maps a
    possible history onto an impossible one: on the toy game, agent 0's observations m <-> b with everything
    else fixed (ers-exact's ``is_admissible`` says no), though its action maps agree."""
    import dataclasses

    from ers_deep.envs.tabular.symmetry import exact_symmetry
    from ers_exact.model.transformation import Transformation, is_admissible

    env = TabularEnv("toy-coordination")
    ident = Transformation.identity(env.game)
    phi = dataclasses.replace(ident, observations=((0, 2, 1), ident.observations[1]))
    assert not is_admissible(env.tree, phi) and is_admissible(env.tree, ident)
    with pytest.raises(ValueError, match="maps a possible history or a legal action onto none"):
        exact_symmetry(env, phi)
    assert exact_symmetry(env, ident).is_identity()
