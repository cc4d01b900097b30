"""ers-deep's relative reconstruction loss (``discovery.scores.group_metrics``, ``discovery.reconstruction``) equals
ers-exact's (``ers_exact.zsc.discovery.group_metrics``) on tabular games for the same exact permutation and the
same held-out policies: both are E_pi E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau|| over the non-empty local AOHs
(one-hot action and observation per step; phi_O^2 moves observations only). Deep applied the lifted history map
with phi_A twice, measured whole-history one-hots (sqrt 2 per moved history) and counted the empty history:
three-lever, phi_A a 3-cycle and phi_O = Id gave 0.7071 (exact 0), phi_O a 3-cycle 0.7071 (exact 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ers_deep.discovery.scores import exact_value, group_metrics, sample_observations
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import NetConfig, build_net
from ers_deep.pools import Policy
from ers_deep.train.config import paper_config
from ers_deep.train.exact import tabular_policies
from ers_exact.games import lever_game
from ers_exact.io.dpomdp import write_dpomdp
from ers_exact.model.transformation import Transformation
from ers_exact.zsc.discovery import group_metrics as exact_metrics
from tests.deep.discovery.random_policies import permutation_symmetry, random_tabular_policies


def _both(
    game: str, policies: list[Policy], actions: tuple[int, ...], sigma: tuple[int, ...]
) -> tuple[float, float]:
    """(deep, exact) reconstruction loss of phi = (phi_A, phi_O) = (actions, sigma) for both agents on ``policies``
    (deep: sampled self-play histories; exact: the exact reach of the same tables). ers-exact gets the inverse,
    as discovery's rounding records a learned phi (the loss is the same: sigma^2 and sigma^-2 move the same o)."""
    env = TabularEnv(game)
    deep = group_metrics(
        [permutation_symmetry(env, actions, sigma)],
        policies,
        [sample_observations(p, seed=0) for p in policies],
        exact_value(env),
        0,
    )["reconstruction_loss"]
    phi = Transformation(tuple(range(env.game.n_states)), (actions,) * 2, (sigma,) * 2).inverse()
    exact = exact_metrics(env.tree, [phi], [tabular_policies(p.net, env)[0] for p in policies])
    return deep, exact["reconstruction_loss"]


@pytest.fixture(scope="module")
def three_lever() -> list[Policy]:
    return random_tabular_policies("three-lever", (0, 1))


@pytest.mark.parametrize(
    ("actions", "sigma"),
    [((1, 2, 0), (1, 2, 0)), ((1, 2, 0), (2, 0, 1)), ((0, 1, 2), (1, 2, 0)), ((2, 1, 0), (2, 0, 1))],
)
def test_deep_and_exact_agree_on_three_lever(
    three_lever: list[Policy], actions: tuple[int, ...], sigma: tuple[int, ...]
) -> None:
    """On three levers a 3-cycle sigma has sigma^2 move every observation: ratio sqrt(t / t) = 1 on every
    non-empty history (deep said 0.7071: sqrt 2 per whole history, averaged with the empty one)."""
    deep, exact = _both("three-lever", three_lever, actions, sigma)
    assert exact == pytest.approx(1.0, abs=1e-9)
    assert deep == pytest.approx(exact, abs=1e-6)


@pytest.mark.parametrize(
    ("actions", "sigma"),
    [((1, 2, 0), (0, 1, 2)), ((1, 2, 0), (1, 0, 2)), ((2, 0, 1), (0, 2, 1)), ((1, 0, 2), (1, 0, 2))],
)
def test_an_involution_reconstructs_whatever_phi_a(
    three_lever: list[Policy], actions: tuple[int, ...], sigma: tuple[int, ...]
) -> None:
    """phi_O^2 = Id gives 0 in both packages, whatever phi_A (deep applied phi_A twice with phi_O, so a 3-cycle
    phi_A with phi_O = Id gave 0.7071: a loss that DiscoveryResult says is 0)."""
    deep, exact = _both("three-lever", three_lever, actions, sigma)
    assert exact == 0.0
    assert deep == pytest.approx(0.0, abs=1e-6)


def _deterministic(game: Path, choices: list[tuple[int, int]]) -> list[Policy]:
    """Per pair (l_1, l_2): the policy where agent 1 always pulls l_1 and agent 2 always l_2 (logit 50 vs 0),
    so sampled play visits exactly the histories the exact reach weighs."""
    env = TabularEnv(str(game))
    cfg = paper_config(f"tabular:{game}", seeds=(0,))
    out = []
    for s, choice in enumerate(choices):
        net = build_net(NetConfig(kind="tabular"), [s], env.obs_shape, env.num_actions)
        with torch.no_grad():
            for p in net.parameters():
                p.zero_()
            for i, lever in enumerate(choice):
                net.logits.weight[0, env.offsets[i] : env.offsets[i + 1], lever] = 50.0
        out.append(Policy(net, cfg, s, f"pull-{choice}"))
    return out


def test_deep_and_exact_agree_where_histories_differ(tmp_path: Path) -> None:
    """Four levers: sigma = (1, 2, 0, 3) has sigma^2 move levers 1-3 and fix lever 4. Pulling (1, 4) makes agent 1
    observe lever 4 (ratio 0) and agent 2 lever 1 (ratio 1); pulling (2, 2) both observe lever 2 (ratio 1): the
    loss is the mean over policies and agents, (1/2 + 1) / 2 = 0.75, in both packages."""
    game = tmp_path / "four-lever.dpomdp"
    game.write_text(write_dpomdp(lever_game(levers=4)))
    policies = _deterministic(game, [(0, 3), (1, 1)])
    deep, exact = _both(str(game), policies, (0, 1, 2, 3), (1, 2, 0, 3))
    assert exact == pytest.approx(0.75, abs=1e-9)
    assert deep == pytest.approx(exact, abs=1e-6)
    deep, exact = _both(str(game), policies, (1, 2, 3, 0), (1, 0, 3, 2))  # an involution, phi_A a 4-cycle
    assert deep == pytest.approx(0.0, abs=1e-6) and exact == 0.0
