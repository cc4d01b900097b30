"""An env step, a tabular policy split and a policy actor given arrays of the wrong shape refuse them with a
ValueError naming the argument and the shape it takes, not a RuntimeError from a reshape or an IndexError from
a broadcast deep inside (Overcooked V2's step already did: the same for Hanabi and tabular games)."""

from __future__ import annotations

import re

import pytest
import torch

from ers_deep.accel import FastRollout, PolicyActor
from ers_deep.envs import HanabiEnv, TabularEnv
from ers_deep.nets import NetConfig, build_net


def test_hanabi_step_refuses_actions_of_another_batch() -> None:
    env = HanabiEnv("Hanabi-Very-Small", batch_size=4, seed=0)
    env.reset()
    for bad in (torch.zeros(3, dtype=torch.long), torch.zeros(4, 3, dtype=torch.long), [0, 0, 0]):
        with pytest.raises(
            ValueError, match=r"actions must have shape \[B\] = \[4\] or \[B, P\] = \[4, 2\], got"
        ):
            env.step(bad)  # type: ignore[arg-type]


def test_hanabi_step_still_takes_one_move_per_game_or_per_player() -> None:
    env = HanabiEnv("Hanabi-Very-Small", batch_size=4, seed=0)
    out = env.reset()
    moves = out.legal.any(1).float().argmax(1)  # a legal move of each game's current player
    twin = HanabiEnv("Hanabi-Very-Small", batch_size=4, seed=0)
    twin.reset()
    a, b = env.step(moves), twin.step(torch.stack([moves, moves], 1))
    assert torch.equal(a.reward, b.reward) and torch.equal(a.obs, b.obs)


@pytest.mark.parametrize("shape", [(3, 2), (4,), (4, 3), (1, 2)])
def test_tabular_step_refuses_actions_not_shaped_batch_by_agents(shape: tuple[int, ...]) -> None:
    env = TabularEnv("two-lever", batch_size=4, seed=0)
    env.reset()
    with pytest.raises(
        ValueError, match=rf"actions must have shape \[B, P\] = \[4, 2\], got {re.escape(str(list(shape)))}$"
    ):
        env.step(torch.zeros(shape, dtype=torch.long))


def test_tabular_split_policy_refuses_another_shape() -> None:
    env = TabularEnv("two-lever", batch_size=4, seed=0)
    K, A = env.offsets[-1], env.num_actions
    with pytest.raises(ValueError, match=rf"probs must have shape \[K, A\] = \[{K}, {A}\], got \[3, {A}\]"):
        env.split_policy(torch.full((3, A), 1 / A))
    assert [p.shape for p in env.split_policy(torch.full((K, A), 1 / A))] == [
        (len(h), n) for h, n in zip(env.tree.local, env.game.n_actions)
    ]


def test_policy_actor_refuses_a_seed_count_that_does_not_divide_the_games() -> None:
    env = HanabiEnv("Hanabi-Very-Small", batch_size=8, seed=0, check_legal=False, branch_free=True)
    net = build_net(NetConfig(kind="mlp", hidden=8), [0, 1, 2], env.obs_shape, env.num_actions)
    actor = PolicyActor(net, num_seeds=3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"num_seeds = 3 must divide the env's batch_size = 8"):
        FastRollout(env, actor, steps=2, mode="eager")
    with pytest.raises(ValueError, match=r"num_seeds must be a whole number >= 1, got 0"):
        PolicyActor(net, num_seeds=0, generator=torch.Generator())
