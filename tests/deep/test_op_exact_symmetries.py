"""Other-play with an ers-exact discovery result (the shared interface: ``DiscoveryResult`` with exact
``Transformation``s in FOLDER/discovery.json) on tabular games: each phi acts on a deep tabular policy as
ers-exact's ``apply_to_policy(phi, pi)`` on every local history (not as phi^-1), on two- and three-agent games
(one whose observation maps differ per agent), the identity is drawn once, and ``train_op_pool``'s OP score
is the exact per-seat average over Phi x Phi (ers-exact's values, Monte Carlo within 4.5 standard errors)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import build_net
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.other_play import op_symmetries, train_op_pool
from ers_deep.pools import PoolError, load_pool
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.exact import tabular_policies
from ers_exact.games.random import planted_game
from ers_exact.interface import DiscoveryResult
from ers_exact.io.dpomdp import save_dpomdp
from ers_exact.model.game import Game, make_game
from ers_exact.model.transformation import Transformation, apply_to_policy, is_decpomdp_symmetry
from ers_exact.model.values import expected_return
from tests.deep.threads import one_thread  # noqa: F401 (autouse)

CYCLE = (1, 2, 0)


def _write(folder: Path, game: str, phis: list[Transformation]) -> Path:
    """FOLDER/discovery.json as ``ers-exact discover GAME --json`` writes it (extra keys included)."""
    result = DiscoveryResult(game, "sp-max", tuple(phis), tuple(1.0 for _ in phis), 1.0, 1.0, 1.0, 1.0, 0.0)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "discovery.json").write_text(json.dumps({**result.to_json(), "pool": "iql", "alpha": 1.0}))
    return folder


def _three_agent_game(path: Path) -> tuple[Game, Transformation]:
    """A random 3-agent game (H = 2) with a planted phi: one action 3-cycle for all, observations swapped for
    agents 0 and 2 only."""
    rng = np.random.default_rng(0)

    def rows(shape: tuple[int, ...]) -> np.ndarray:
        x = rng.gamma(0.7, size=shape) * (rng.random(shape) > 0.3)
        x[..., 0] += x.sum(axis=-1) == 0
        return x / x.sum(axis=-1, keepdims=True)

    S, A, O = 2, 27, 8
    names = [[f"a{k}" for k in range(3)]] * 3
    base = make_game(
        "three-agents",
        ["s0", "s1"],
        names,
        [["o0", "o1"]] * 3,
        rows((S, A, S)),
        rows((A, S, O)),
        rng.choice([-1.0, 0.0, 1.0], size=(S, A)),
        rows((S,)),
        horizon=2,
    )
    phi = Transformation((1, 0), (CYCLE,) * 3, ((1, 0), (0, 1), (1, 0)))
    game = planted_game(base, phi)
    save_dpomdp(game, path)
    return game, phi


def _policy(config: TrainConfig, seed: int) -> tuple[TabularEnv, torch.nn.Module, tuple[np.ndarray, ...]]:
    """The env, a random tabular net (logits ~ 3 N(0, 1)) and its exact joint policy."""
    env = TabularEnv(config.game_spec)
    net = build_net(config.net, [seed], env.obs_shape, env.num_actions)
    with torch.no_grad():
        w = net.logits.weight  # type: ignore[union-attr]
        w.copy_(3.0 * torch.randn(w.shape, generator=torch.Generator().manual_seed(seed)))
    return env, net, tabular_policies(net, env)[0]


def _cases(tmp: Path) -> list[tuple[TrainConfig, Transformation]]:
    lever = Transformation((0,), (CYCLE, CYCLE), (CYCLE, CYCLE))
    game, phi = _three_agent_game(tmp / "three-agents.dpomdp")
    assert is_decpomdp_symmetry(game, phi)
    return [
        (paper_config("tabular:three-lever"), lever),
        (paper_config(f"tabular:{tmp / 'three-agents.dpomdp'}"), phi),
    ]


def test_an_exact_transformation_acts_as_ers_exacts_phi_on_every_history(tmp_path: Path) -> None:
    for config, phi in _cases(tmp_path):
        env, net, pi = _policy(config, 1)
        ident = Transformation.identity(env.game)
        folder = _write(tmp_path / env.game.name, env.game.name, [ident, phi, phi])
        syms = op_symmetries(config, str(folder))
        assert len(syms) == 2 and syms[0].name == "identity"  # the identity and the repeat once
        got = tabular_policies(OtherPlayNet(net, syms[1:]), env)[0]
        want = apply_to_policy(env.tree, phi, pi)
        wrong = apply_to_policy(env.tree, phi.inverse(), pi)  # what phi^-1 would give: differs here
        for i in range(env.num_agents):
            np.testing.assert_allclose(got[i], want[i], rtol=0, atol=1e-12)
            assert np.abs(got[i] - wrong[i]).max() > 1e-3


def test_exact_results_that_cannot_act_are_refused(tmp_path: Path) -> None:
    config = paper_config("tabular:three-lever")
    per_agent = Transformation((0,), (CYCLE, (0, 1, 2)), (CYCLE, (0, 1, 2)))
    with pytest.raises(PoolError, match="permutes the agents' actions differently"):
        op_symmetries(config, str(_write(tmp_path / "a", "three-lever", [per_agent])))
    with pytest.raises(PoolError, match="learned on two-lever, not on three-lever"):
        op_symmetries(config, str(_write(tmp_path / "b", "two-lever", [per_agent])))


def test_train_op_with_an_exact_result_scores_the_exact_per_seat_op(tmp_path: Path) -> None:
    """The pool's ``other_play`` score E_{phi_1, phi_2 ~ U(Phi)} J(phi_1(pi)^1, phi_2(pi)^2), against that
    average computed by ers-exact for the frozen pi (Phi = {Id, the 3-cycle}, not a group; 8,000 games)."""
    config, phi = _cases(tmp_path)[0]
    config = config.replace(num_envs=32, seeds=(0,), total_env_steps=32 * 2 * 3)
    folder = _write(tmp_path / "exact", "three-lever", [phi])
    pool = train_op_pool(config, str(folder), tmp_path / "pool", eval_games=8000, progress=False)
    assert pool["other_play"]["symmetries"][0] == "identity" and len(pool["other_play"]["symmetries"]) == 2
    (policy,) = load_pool(tmp_path / "pool").policies
    env = TabularEnv("three-lever")
    pi = tabular_policies(policy.net, env)[0]
    images = [pi, apply_to_policy(env.tree, phi, pi)]
    exact = np.mean(
        [expected_return(env.tree, (images[a][0], images[b][1])) for a, b in itertools.product(*[[0, 1]] * 2)]
    )
    score = pool["policies"][0]["other_play"]
    assert abs(score["mean"] - exact) < 4.5 * score["se"] + 1e-9


def test_the_op_score_of_three_agents_is_the_per_seat_average_not_ers_exacts_op(tmp_path: Path) -> None:
    """n = 3, Phi = Phi_MDP: the score is E over (phi_1, phi_2, phi_3) in Phi^3 of J(phi_i(pi)^i) (every seat its
    own draw, as the official code), which for n > 2 is not ers-exact's OP^Phi (the mean of XP(pi, phi(pi))
    over the 2^n - 2 seat assignments of two policies): both computed by ers-exact, 20,000 games."""
    from ers_deep.other_play import _op_score
    from ers_deep.pools import Policy
    from ers_exact.model.objectives import other_play
    from ers_exact.symmetry.mdp_group import decpomdp_group

    config = _cases(tmp_path)[1][0]
    env, net, pi = _policy(config, 2)
    phis = decpomdp_group(env.game).policy_parts
    images = [apply_to_policy(env.tree, phi, pi) for phi in phis]
    per_seat = np.mean(
        [
            expected_return(env.tree, tuple(images[c][i] for i, c in enumerate(combo)))
            for combo in itertools.product(range(len(phis)), repeat=3)
        ]
    )
    syms = op_symmetries(config, "mdp")
    assert len(syms) == len(phis) == 6
    score = _op_score(config, syms, 20_000, Policy(net, config, 0, "x"))["other_play"]  # type: ignore[arg-type]
    assert abs(score["mean"] - per_seat) < 4.5 * score["se"]
    assert abs(per_seat - other_play(env.tree, pi, phis)) > 5 * score["se"]  # 0.022 here: 7 SE
