"""Deep discovery on games at the edges of Algorithm 3: a one-agent game (no cross-play: xp-max is refused
before anything is trained or written) and a three-agent game (the held-out cross-play score puts the
transformed policy in each seat in turn, as ``DiscoveryNet`` trains it). Random tabular policies, no
training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ers_deep.discovery import DeepDiscoveryConfig, DiscoveryNet, discover
from ers_deep.discovery.scores import exact_value, set_score
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import NetConfig
from ers_deep.pools import Pool, PoolError
from ers_deep.train.evaluate import Agent
from tests.deep.discovery.random_policies import random_tabular_policies

ONE_AGENT = """agents: 1
discount: 1.0
values: reward
states: s0 s1
start:
uniform
actions:
a b
observations:
x y
T: * : * : * : 0.5
O: * : s0 : x : 1.0
O: * : s1 : y : 1.0
R: a : s0 : * : * : 1
R: b : s1 : * : * : 1
"""

THREE_AGENTS = """agents: 3
discount: 1.0
values: reward
states: s0
start:
uniform
actions:
a b
a b
a b
observations:
o
o
o
T: * : * : * : 1.0
O: * : * : * : 1.0
R: a a a : * : * : * : 1
R: b b b : * : * : * : 1
"""


def _pool(folder: Path, text: str, n: int) -> Pool:
    """n random (far from uniform) tabular policies of the game ``text`` (a .dpomdp written into ``folder``)."""
    game = folder / "game.dpomdp"
    game.write_text(text)
    policies = random_tabular_policies(str(game), range(n))
    return Pool(folder, {"env": policies[0].config.env, "policies": []}, tuple(policies))


def test_xp_max_on_a_one_agent_game_is_refused_before_training(tmp_path: Path) -> None:
    """It trained every candidate and then failed scoring them (IndexError: an internal error of the CLI)."""
    pool = _pool(tmp_path, ONE_AGENT, 4)
    config = DeepDiscoveryConfig(algorithm="xp-max", candidates=2, top=1, num_envs=8, total_env_steps=64)
    with pytest.raises(PoolError, match="has one agent; use sp-max"):
        discover(pool, config, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
    env = TabularEnv(str(tmp_path / "game.dpomdp"))
    nets = [p.net for p in pool.policies]
    maps = torch.tensor([[1, 0]])
    with pytest.raises(ValueError, match="two seats"):
        DiscoveryNet((0,), nets, NetConfig(kind="tabular"), maps, 1, mode="xp", lift=env.history_lift)


def test_xp_score_plays_the_transformed_policy_in_each_seat(tmp_path: Path) -> None:
    """XP(pi_a, phi(pi_b)) on three seats: phi(pi_b) in one seat, pi_a in the two others, each seat in turn,
    over both ordered pairs (it passed two agents to a three-seat game and failed)."""
    pool = _pool(tmp_path, THREE_AGENTS, 2)
    a, b = pool.policies
    value = exact_value(TabularEnv(str(tmp_path / "game.dpomdp")))
    expected = np.mean(
        [
            value([Agent(y.net) if k == seat else Agent(x.net) for k in range(3)])
            for x, y in ((a, b), (b, a))
            for seat in range(3)
        ]
    )
    solo = [value([Agent(p.net)] * 3) for p in (a, b)]
    assert abs(expected - np.mean(solo)) > 0.01  # cross-play differs from self-play here
    assert set_score(None, [a, b], True, value) == pytest.approx(expected, abs=1e-12)


def test_action_set_permutations_on_hanabi_is_refused_before_any_file(tmp_path: Path) -> None:
    """``discover`` itself: Hanabi's candidates carry move transpositions whatever ``action_set`` says
    (``action_candidates``), so ``"permutations"`` was ignored and recorded as if used; now refused."""
    from ers_deep.envs.hanabi import HanabiEnv
    from ers_deep.nets import build_net
    from ers_deep.pools import Policy
    from ers_deep.train.config import paper_config
    from ers_exact.util.options import UsageError

    net_cfg = NetConfig(hidden=16)
    cfg = paper_config("hanabi", hanabi_preset="Hanabi-Small", seeds=(0,), net=net_cfg)
    env = HanabiEnv("Hanabi-Small", batch_size=1)
    policies = tuple(
        Policy(build_net(net_cfg, [s], env.obs_shape, env.num_actions), cfg, s, f"seed-{s}") for s in range(4)
    )
    pool = Pool(tmp_path / "pool", {"env": "hanabi", "policies": []}, policies)
    out = tmp_path / "out"
    config = DeepDiscoveryConfig(action_set="permutations", candidates=2, top=1)
    with pytest.raises(UsageError, match="only applies to tabular games, not to hanabi:Hanabi-Small"):
        discover(pool, config, out, progress=False)
    assert not out.exists()
