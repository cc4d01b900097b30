"""The tabular env against ers-exact: Monte-Carlo returns of fixed policies equal the exact J within
Monte-Carlo error, local histories are ers-exact's indices, legal masks are the game's, TorchRL specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torchrl.envs.utils import check_env_specs

from ers_deep.envs.tabular import TabularEnv
from ers_deep.envs.tabular.torchrl import TabularTorchRLEnv
from ers_exact.games import GAMES, load_game
from ers_exact.io.dpomdp import save_dpomdp
from ers_exact.model.values import expected_return


def _random_policy(env: TabularEnv, seed: int) -> torch.Tensor:
    """[K, A] a random full-support policy over legal actions on every local history."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(env.obs_shape[0], env.num_actions, generator=g, dtype=torch.float64) * 1.5
    return torch.softmax(logits.masked_fill(~env._legal, -torch.inf), -1)


def _mc_return(env: TabularEnv, probs: torch.Tensor, seed: int) -> tuple[float, float]:
    """Mean and standard error of the discounted return over one batch of episodes (no auto-reset)."""
    env.auto_reset = False
    out = env.reset(seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    ret = torch.zeros(env.batch_size, dtype=torch.float64)
    for t in range(env.horizon):
        hist = out.obs.argmax(-1)  # [B, P]
        p = probs[hist]  # [B, P, A]
        actions = torch.multinomial(p.reshape(-1, p.shape[-1]), 1, generator=g).view(hist.shape)
        out = env.step(actions)
        ret += env.game.discount**t * out.reward.double()
    assert bool(out.done.all())
    return float(ret.mean()), float(ret.std() / ret.numel() ** 0.5)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_monte_carlo_return_matches_exact_value(name: str) -> None:
    env = TabularEnv(name, batch_size=40_000, seed=0)
    for k in range(2):
        probs = _random_policy(env, k)
        exact = expected_return(env.tree, env.split_policy(probs))
        mean, se = _mc_return(env, probs, seed=10 + k)
        assert abs(mean - exact) < 4.5 * se + 1e-9, (name, mean, exact, se)


def test_dpomdp_path_and_overrides(tmp_path: Path) -> None:
    game = load_game("dectiger")
    path = tmp_path / "tiger.dpomdp"
    save_dpomdp(game, path)
    env = TabularEnv(str(path), horizon=2, batch_size=30_000, seed=1)
    assert env.game.horizon == 2 and env.n_histories == (7, 7)
    probs = _random_policy(env, 3)
    mean, se = _mc_return(env, probs, seed=5)
    assert abs(mean - expected_return(env.tree, env.split_policy(probs))) < 4.5 * se


def test_histories_and_legal_masks_are_ers_exact_s() -> None:
    env = TabularEnv("three-lever", batch_size=16, seed=2)
    out = env.reset()
    assert torch.equal(out.obs.argmax(-1), torch.tensor(env.offsets[:-1]).expand(16, -1))
    actions = torch.randint(3, (16, 2), generator=torch.Generator().manual_seed(0))
    out = env.step(actions)
    hist = out.obs.argmax(-1)
    for b in range(16):
        for i in range(2):
            k = int(hist[b, i]) - env.offsets[i]
            local = env.tree.local[i]
            assert local.time[k] == 1 and local.action[k] == int(actions[b, i])
            assert torch.equal(out.legal[b, i, :3], torch.tensor(np.array(local.legal[k])))
    with pytest.raises(ValueError, match="illegal action 2 of agent 0"):
        TabularEnv("toy-coordination", batch_size=2).step(torch.full((2, 2), 2))  # 2 actions per agent


def test_torchrl_env_specs() -> None:
    env = TabularTorchRLEnv("three-lever", batch_size=8, seed=0)
    check_env_specs(env)
    td = env.rollout(5, break_when_any_done=False)
    assert td["agents", "observation"].shape == (8, 5, 2, 20)


def test_split_policy_round_trip() -> None:
    env = TabularEnv("dectiger", batch_size=1)
    probs = _random_policy(env, 0)
    pol = env.split_policy(probs)
    assert [p.shape for p in pol] == [(7, 3), (7, 3)]
    assert np.allclose(np.concatenate(pol), probs.numpy())
