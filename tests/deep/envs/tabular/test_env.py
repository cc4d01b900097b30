"""The tabular env against ers-exact: Monte-Carlo returns of fixed policies equal the exact J within
Monte-Carlo error (both step styles), the branch-free step's law of (s_0, a, s_1, o_1) is the game's b_0, T and
U (chi-square), local histories are ers-exact's indices, legal masks are the game's, TorchRL specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torchrl.envs.utils import check_env_specs

from ers_deep.envs.tabular import TabularEnv
from ers_deep.envs.tabular.sampling import cumulative_table, draw_from_cdf
from ers_deep.envs.tabular.torchrl import TabularTorchRLEnv
from ers_exact.games import GAMES, load_game
from ers_exact.games.random import random_small_game
from ers_exact.io.dpomdp import save_dpomdp
from ers_exact.model.game import Game
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


@pytest.mark.parametrize("branch_free", [False, True], ids=["multinomial", "branch-free"])
@pytest.mark.parametrize("name", sorted(GAMES))
def test_monte_carlo_return_matches_exact_value(name: str, branch_free: bool) -> None:
    """Both step styles (``branch_free``: inverse CDF of ``draw_noise``'s uniforms) against ers-exact's J."""
    env = TabularEnv(name, batch_size=40_000, seed=0, branch_free=branch_free)
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


def _joint_observation(env: TabularEnv, history: torch.Tensor) -> torch.Tensor:
    """[B] the joint observation o of the last step, read off every agent's local history [B, P]."""
    local = [
        torch.as_tensor(np.array(env.tree.local[i].observation))[history[:, i] - env.offsets[i]]
        for i in range(env.num_agents)
    ]
    joint = {tuple(int(x) for x in row): o for o, row in enumerate(np.array(env.game.joint_observations))}
    return torch.tensor([joint[tuple(int(x[b]) for x in local)] for b in range(history.shape[0])])


def _chance_game(name: str) -> Game:
    """Dec-Tiger, or ``random-K``: ers-exact's ``random_small_game`` of seed K (rows with exact zeros)."""
    if name.startswith("random-"):
        return random_small_game(np.random.default_rng(int(name.removeprefix("random-"))), name)
    return load_game(name)


@pytest.mark.parametrize("name", ["dectiger", "random-10"])  # random-10: 2 states, b_0 = (0.18, 0.82), H = 2
def test_branch_free_law_is_the_games(name: str) -> None:
    """The branch-free step's (s_0, a, s_1, o_1) against N b_0(s_0) p(a) T(s_1 | s_0, a) U(o_1 | s_1, a) from the
    game's arrays (chi-square, fixed seed), over the first episodes (s_0 from ``initial_state``) and the ones
    the auto-reset starts (s_0 from ``draw_noise``), every joint action equally often; impossible cells empty."""
    from scipy.stats import chi2

    game = _chance_game(name)
    B = 30_000
    env = TabularEnv(game, batch_size=B, seed=4, check_legal=False, branch_free=True)
    A = int(np.prod(game.n_actions))
    joint = torch.arange(B) % A
    strides = np.cumprod([1, *game.n_actions[::-1]])[:-1][::-1]
    actions = torch.stack([joint // int(s) % n for s, n in zip(strides, game.n_actions, strict=True)], 1)
    S, O = game.n_states, game.n_joint_observations
    counts = np.zeros((A, S, S, O))
    for _ in range(2):  # two episodes: the second starts in the auto-reset
        assert bool((env.state.t == 0).all())
        s0 = env.state.s.clone()
        env.step(actions)
        o1 = _joint_observation(env, env.state.history)
        np.add.at(counts, (joint.numpy(), s0.numpy(), env.state.s.numpy(), o1.numpy()), 1)
        for _ in range(game.horizon - 1):
            env.step(actions)
    b0, T, U = (np.array(x) for x in (game.initial_belief, game.transition, game.observation))
    law = b0[None, :, None, None] * np.einsum("sat,ato->asto", T, U)  # [A, S, S, O] given a
    expected = law * counts.sum(axis=(1, 2, 3), keepdims=True)
    assert counts[expected == 0].sum() == 0
    live = expected > 0
    stat = float(((counts[live] - expected[live]) ** 2 / expected[live]).sum())
    dof = int(live.sum()) - A
    assert chi2.sf(stat, dof) > 1e-3, (stat, dof)


def test_inverse_cdf_never_draws_an_impossible_outcome() -> None:
    """A row whose float64 cumulative sum ends below 1 (ten 0.1s: 0.9999999999999999) and a row ending in
    zeros: the largest uniform below 1 draws the last possible outcome, never one past it."""
    p = np.array([[0.1] * 10 + [0.0], [0.5, 0.5] + [0.0] * 9])
    assert np.cumsum(p[0])[-1] < 1.0
    cdf = cumulative_table(p, torch.device("cpu"))
    top = torch.tensor([1.0 - 2.0**-53] * 2, dtype=torch.float64)
    assert draw_from_cdf(cdf, top).tolist() == [9, 1]
    assert draw_from_cdf(cdf, torch.zeros(2, dtype=torch.float64)).tolist() == [0, 0]
    u = torch.tensor([0.15, 0.5], dtype=torch.float64)
    assert draw_from_cdf(cdf, u).tolist() == [1, 1]
