"""The shared TorchRL base: both envs' wrappers derive from it, pass ``check_env_specs`` and seed alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torchrl.envs.utils import check_env_specs

from ers_deep.envs.hanabi.torchrl import HanabiTorchRLEnv
from ers_deep.envs.overcooked_v2.torchrl import OvercookedV2TorchRLEnv
from ers_deep.envs.torchrl_base import GROUP, BatchedTorchRLEnv

WRAPPERS: list[Callable[..., BatchedTorchRLEnv]] = [
    lambda **kw: HanabiTorchRLEnv(batch_size=4, **kw),
    lambda **kw: OvercookedV2TorchRLEnv(batch_size=4, max_steps=10, **kw),
]
IDS = ["hanabi", "overcooked-v2"]


@pytest.mark.parametrize("make", WRAPPERS, ids=IDS)
def test_specs_and_layout(make: Callable[..., BatchedTorchRLEnv]) -> None:
    env = make(seed=0)
    assert isinstance(env, BatchedTorchRLEnv) and env.env.auto_reset is False
    check_env_specs(env, break_when_any_done="both")
    P, A = env.env.num_agents, env.env.num_actions
    roll = env.rollout(25, break_when_any_done=False)
    assert roll[GROUP, "observation"].shape == (4, 25, P, *env.env.obs_shape)
    assert roll[GROUP, "action"].shape == (4, 25, P) and int(roll[GROUP, "action"].max()) < A
    reward = roll["next", GROUP, "reward"]
    assert reward.shape == (4, 25, P, 1) and torch.equal(reward[..., 0, :], reward[..., 1, :])
    assert roll["next", "done"].any()  # finished games were reset through _reset(_reset mask)


@pytest.mark.parametrize("make", WRAPPERS, ids=IDS)
def test_set_seed_reproduces_rollouts(make: Callable[..., BatchedTorchRLEnv]) -> None:
    rolls = []
    for seed in (None, 1):  # the constructor seed does not matter after set_seed
        env = make(seed=seed)
        env.set_seed(7)
        torch.manual_seed(0)  # rand_action draws from torch's global generator
        rolls.append(env.rollout(15, break_when_any_done=False))
    assert (rolls[0] == rolls[1]).all()
