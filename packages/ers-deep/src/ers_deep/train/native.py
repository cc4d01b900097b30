"""The earlier collection loop (``TrainConfig.collector = "native"``): one eager env step and one network call
per joint step, re-observing the env after every step. Kept as the A/B speed baseline of the benchmarks and as a
second reference of ``FastCollection`` (same sampler, same rollouts on an env that is not branch-free)."""

from __future__ import annotations

import torch
from torch import Tensor

from ers_deep.accel import actors_to_game, game_to_actors
from ers_deep.envs.base import BatchedEnv
from ers_deep.nets import ActorCritic, policy_mask, sample
from ers_deep.train.collect import Rollout, RunnerState, bootstrap_value, running_returns

KEYS = ("obs", "legal", "acting", "first", "action", "logp", "value", "reward", "done")


def observe(env: BatchedEnv, S: int) -> tuple[Tensor, Tensor, Tensor]:
    """obs [S, N, *O], policy mask [S, N, A], acting [S, N] of the env's current state."""
    obs = env.observe().reshape(S, -1, *env.obs_shape)
    legal = env.legal_mask().reshape(*obs.shape[:2], -1)
    return obs, policy_mask(legal), legal.any(-1)


@torch.no_grad()
def collect_native(
    env: BatchedEnv,
    net: ActorCritic,
    generator: torch.Generator,
    state: RunnerState,
    num_steps: int,
    shaped_coef: float = 1.0,
) -> tuple[Rollout, RunnerState, dict[str, Tensor]]:
    """``num_steps`` joint steps from ``state``: (rollout, state after it, ended-episode statistics)."""
    S, P = len(net.seeds), env.num_agents
    B = env.batch_size // S
    N = B * P
    h = state.hidden
    first = game_to_actors(state.first, S, P)
    buf: dict[str, list[Tensor]] = {k: [] for k in KEYS}
    teams, shapes, dones = [], [], []
    obs, legal, acting = observe(env, S)
    for _ in range(num_steps):
        logits, value, h = net(obs[:, None], first[:, None], h)
        action, logp = sample(logits[:, 0], legal, generator)
        out = env.step(action.view(S * B, P))
        team, done = out.reward.view(S, B), out.done.view(S, B)
        reward = team[..., None].expand(S, B, P)
        shaped = getattr(out, "shaped_reward", None)
        if shaped is not None:
            shaped = shaped.view(S, B, P).float()
            reward = reward + shaped_coef * shaped
            shapes.append(shaped.sum(-1))
        teams.append(team)
        dones.append(done)
        row = (obs, legal, acting, first, action, logp, value[:, 0], reward.reshape(S, N))
        for k, v in zip(KEYS, (*row, done[..., None].expand(S, B, P).reshape(S, N))):
            buf[k].append(v)
        first = buf["done"][-1]
        obs, legal, acting = observe(env, S)
    last_first = actors_to_game(first, S, P)
    last_value = bootstrap_value(net, obs.reshape(S * B, P, *env.obs_shape), last_first, h)
    stats, after = running_returns(
        state, torch.stack(teams), torch.stack(shapes) if shapes else None, torch.stack(dones)
    )
    ro = Rollout(
        **{k: torch.stack(v, 1) for k, v in buf.items()}, hidden0=state.hidden, last_value=last_value
    )
    return (
        ro,
        RunnerState(last_first, h, after.ep_return, after.ep_shaped),
        stats,
    )
