"""IPPO self-play with parameter sharing, for S seeds at once (stacked parameters, one optimiser).

One update, top to bottom (CleanRL-style phases):

1. **collect** ``num_steps`` joint steps of ``num_envs`` games per seed (``collect``): every agent of every
   game is an *actor* (N = num_envs x P per seed) acting with the shared network; the recurrent state is reset
   where an episode starts, before the step (``first`` flags, the fix of JaxMARL PR #191);
2. **advantages** (``gae``): TorchRL's functional ``generalized_advantage_estimate`` per actor, team reward
   (plus the agent's annealed shaped reward on Overcooked V2), done = episode end (no bootstrap);
3. **update** (``ppo_update``): ``epochs`` passes over ``minibatches`` groups of actors (whole sequences, as
   the official code shuffles along the actor axis), PureJaxRL's clipped PPO: clipped surrogate, clipped value
   loss, entropy bonus ``alpha``; gradients clipped to ``max_grad_norm`` per seed; Adam with the learning
   rate of the schedule at this update;
4. **log**: per seed, the mean return of the episodes that ended during the collection.

Turn-based games (Hanabi): only the player to move acts. Its entries count in the actor and entropy terms
(``acting`` mask); the other players' entries (their moves are ignored by the env) count only in the value
loss, whose targets are the same team returns. Advantage normalisation, when on, uses acting entries only.

Boltzmann reading (the paper): with ``normalize_advantage=False`` the stationary points of the update are
pi(a | tau) proportional to exp(A(tau, a) / alpha) on every visited history, i.e. the Boltzmann fixed points
pi = softmax(Q_pi / alpha), when the advantages are unbiased (GAE lambda = 1; the tabular defaults).

Exact mode (``advantage="exact"``, tabular games only): the actor and entropy terms become the expected
update on *every* local history, each weighted equally: -mean_tau [sum_a pi(a | tau) (Q_pi(tau, a) - V_pi(tau))
+ alpha H(pi(. | tau))], with Q_pi computed exactly by ers-exact for the policy at the start of the update
(``ers_deep.train.exact.advantage_table``); the critic still learns from the collected samples. Per history
this is the sampled update's expectation rescaled by 1 / reach(tau), so its stationary points are the same
Boltzmann fixed points; but its gradient vanishes exactly at a fixed point and rarely visited histories are
not starved, so the learner converges to a fixed point (residual ~1e-7 in float32) instead of hovering
around it at the sampling noise.

Two collection paths (``TrainConfig.collector``) give the same ``Rollout`` bit for bit for the same seeds
and config (``tests/deep/train/test_collector.py``), so GAE and the update below do not know which ran:

* ``"native"`` (default): the loop of ``collect``. The S seeds share one batched env and one stacked-parameter
  network, so a rollout is a handful of tensor ops per step, and the env state, the recurrent state and every
  RNG stream stay in the learner's hands at update boundaries (exact resume).
* ``"torchrl"``: ``torchrl.collectors.Collector`` over a TorchRL env wrapping the same ``self.env`` and a
  TensorDict policy around ``self.net`` that samples with ``self.generator`` (``ers_deep.train.collector``,
  which explains how the order of random draws, the env's auto-reset and the collector's own resets are kept
  equal to the native loop; recurrent nets included; resume stays exact). It costs TorchRL's per-step
  TensorDict work (packing, ``step_mdp``, the partial-reset merge): on Hanabi-Very-Small, 256 games x 32
  steps, the 128-wide MLP, one torch thread on the shared 2-core CPU, collection ran at 93k env-steps/s
  against the native 127k (about +0.7 ms per joint step of the 256 games), a whole update (collection, GAE,
  4 PPO epochs) at 21.8k against 23.1k env-steps/s (-6 %).

The update is ours in both paths, not TorchRL's ``ClipPPOLoss``: its advantage standardisation ignores the
loss mask of non-acting Hanabi players (``../shared/notes/torchrl-and-hle.md`` 1.3). GAE is TorchRL's own
function; the TorchRL envs (``envs/*/torchrl.py``) remain the interface for TorchRL users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torchrl.objectives.value.functional import generalized_advantage_estimate

from ers_deep.envs.base import BatchedEnv
from ers_deep.nets import ActorCritic, build_net, masked_logits
from ers_deep.train.collector import TorchRLCollection
from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.exact import advantage_table


@dataclass
class Rollout:
    """One collection, time-major per seed: [S, T, N, ...] (N actors per seed)."""

    obs: Tensor  # [S, T, N, *O]
    legal: Tensor  # [S, T, N, A] bool, the policy's mask (all True for a player not to move)
    acting: Tensor  # [S, T, N] bool the actor's move is played
    first: Tensor  # [S, T, N] bool step t starts an episode (reset the recurrent state before it)
    hidden0: Tensor  # [S, N, H] recurrent state before step 0
    action: Tensor  # [S, T, N] long
    logp: Tensor  # [S, T, N] log pi(action) at collection
    value: Tensor  # [S, T, N]
    reward: Tensor  # [S, T, N] training reward (team + annealed shaped)
    done: Tensor  # [S, T, N] bool the step ended the episode
    last_value: Tensor  # [S, N] value of the observation after the last step


def lr_at(config: TrainConfig, update: int) -> float:
    """The learning rate of update ``update`` (0-based) under ``config.lr_schedule``."""
    frac = update / config.num_updates
    if config.lr_schedule == "linear":
        return config.lr * (1.0 - frac)
    if config.lr_schedule == "warmup-cosine":
        if frac < config.warmup:
            return config.lr * (update + 1) / max(1.0, config.warmup * config.num_updates)
        rest = (frac - config.warmup) / max(1e-12, 1.0 - config.warmup)
        return config.lr * 0.5 * (1.0 + math.cos(math.pi * min(rest, 1.0)))
    return config.lr


def shaped_coef(config: TrainConfig, env_steps: int) -> float:
    """Weight of the shaped reward after ``env_steps`` steps per seed (linear 1 -> 0; horizon 0: always 1)."""
    if config.shaped_reward_horizon <= 0:
        return 1.0
    return max(0.0, 1.0 - env_steps / config.shaped_reward_horizon)


def gae(config: TrainConfig, ro: Rollout, gamma: float) -> tuple[Tensor, Tensor]:
    """(advantage, value target) [S, T, N] with TorchRL's functional GAE (time dim -2 per actor)."""

    def per_actor(x: Tensor) -> Tensor:  # [S, T, N] -> [S, N, T, 1]
        return x.transpose(1, 2)[..., None]

    next_value = torch.cat([ro.value[:, 1:], ro.last_value[:, None]], 1)
    adv, target = generalized_advantage_estimate(
        gamma,
        config.gae_lambda,
        per_actor(ro.value),
        per_actor(next_value),
        per_actor(ro.reward),
        per_actor(ro.done),
    )
    return adv[..., 0].transpose(1, 2), target[..., 0].transpose(1, 2)


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean over all but the seed dim of x where mask; [S]."""
    m = mask.float()
    return (x * m).flatten(1).sum(1) / m.flatten(1).sum(1).clamp_min(1.0)


class Learner:
    """The state of one IPPO run of S seeds: env, network, optimiser, RNG streams, counters (see module doc).

    ``train_step()`` runs one update and returns its metrics; ``state_tensors()`` / ``load_state_tensors()``
    capture and restore everything a resume needs (see ``ers_deep.train.run``)."""

    def __init__(self, config: TrainConfig, net: ActorCritic | None = None) -> None:
        self.config = cfg = config
        S, B = len(cfg.seeds), cfg.num_envs
        self.env: BatchedEnv = make_env(cfg, S * B, seed=cfg.seeds[0])
        self.P, self.S, self.B = self.env.num_agents, S, B
        self.N = B * self.P  # actors per seed
        # ``net``: any ActorCritic over S = len(seeds) stacks (discovery and other-play pass composite nets)
        self.net: ActorCritic = (
            net
            if net is not None
            else build_net(cfg.net, cfg.seeds, self.env.obs_shape, self.env.num_actions)
        )
        self.net.to(self.env.device)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.generator = torch.Generator(device=self.env.device).manual_seed(10_007 * cfg.seeds[0] + 1)
        game = getattr(self.env, "game", None)  # a tabular env's ers-exact game: its own discount
        self.gamma: float = cfg.gamma if cfg.gamma is not None else float(game.discount if game else 0.99)
        self.update = 0
        self.env_steps = 0  # per seed
        dev = self.env.device
        self.env.reset(seed=cfg.seeds[0])
        self.first = torch.ones(S, self.N, dtype=torch.bool, device=dev)
        self.hidden = self.net.initial_state(self.N, dev)
        self.ep_return = torch.zeros(S, B, device=dev)
        self.ep_shaped = torch.zeros(S, B, device=dev)
        # collector="torchrl": the same rollouts through torchrl's Collector over self.env and self.net
        self.torchrl = TorchRLCollection(self) if cfg.collector == "torchrl" else None

    # ---- collection -----------------------------------------------------------------------------------------
    def _observe(self) -> tuple[Tensor, Tensor, Tensor]:
        """obs [S, N, *O], policy mask [S, N, A], acting [S, N] of the env's current state."""
        S, N = self.S, self.N
        obs = self.env.observe().reshape(S, N, *self.env.obs_shape)
        legal = self.env.legal_mask().reshape(S, N, -1)
        acting = legal.any(-1)
        return obs, legal | ~acting[..., None], acting

    @torch.no_grad()
    def collect(self) -> tuple[Rollout, dict[str, Tensor]]:
        """One rollout of ``num_steps`` joint steps and the returns of the episodes that ended in it."""
        cfg, S, B, N, P = self.config, self.S, self.B, self.N, self.P
        if self.torchrl is not None:
            fields, stats = self.torchrl.collect(shaped_coef(cfg, self.env_steps))
            return Rollout(**fields), stats
        coef = shaped_coef(cfg, self.env_steps)
        hidden0, h = self.hidden.clone(), self.hidden
        keys = ("obs", "legal", "acting", "first", "action", "logp", "value", "reward", "done")
        buf: dict[str, list[Tensor]] = {k: [] for k in keys}
        ended_ret: list[Tensor] = []
        ended_shaped: list[Tensor] = []
        ended_mask: list[Tensor] = []
        obs, legal, acting = self._observe()
        for _ in range(cfg.num_steps):
            logits, value, h = self.net(obs[:, None], self.first[:, None], h)
            logits = masked_logits(logits[:, 0], legal)
            probs = torch.softmax(logits, -1)
            action = torch.multinomial(probs.reshape(S * N, -1), 1, generator=self.generator).view(S, N)
            logp = torch.log_softmax(logits, -1).gather(-1, action[..., None])[..., 0]
            out = self.env.step(action.view(S * B, P))
            team = out.reward.view(S, B)
            shaped = getattr(out, "shaped_reward", None)
            reward = team[..., None].expand(S, B, P)
            if shaped is not None:
                shaped = shaped.view(S, B, P).float()
                reward = reward + coef * shaped
                self.ep_shaped += shaped.sum(-1)
            self.ep_return += team
            done = out.done.view(S, B)
            ended_ret.append(self.ep_return.clone())
            ended_shaped.append(self.ep_shaped.clone())
            ended_mask.append(done)
            self.ep_return = torch.where(done, 0.0, self.ep_return)
            self.ep_shaped = torch.where(done, 0.0, self.ep_shaped)
            for k, v in zip(
                keys,
                (
                    obs,
                    legal,
                    acting,
                    self.first,
                    action,
                    logp,
                    value[:, 0],
                    reward.reshape(S, N),
                    done[..., None].expand(S, B, P).reshape(S, N),
                ),
            ):
                buf[k].append(v)
            self.first = buf["done"][-1]
            obs, legal, acting = self._observe()
        _, last_value, _ = self.net(obs[:, None], self.first[:, None], h)
        self.hidden = h
        self.env_steps += cfg.num_steps * B
        ro = Rollout(
            **{k: torch.stack(v, 1) for k, v in buf.items()}, hidden0=hidden0, last_value=last_value[:, 0]
        )
        mask = torch.stack(ended_mask)  # [T, S, B]
        count = mask.sum((0, 2)).float()
        stats = {
            "episodes": count,
            "return": (torch.stack(ended_ret) * mask).sum((0, 2)) / count,  # NaN where none ended
            "shaped_return": (torch.stack(ended_shaped) * mask).sum((0, 2)) / count,
        }
        return ro, stats

    # ---- update ---------------------------------------------------------------------------------------------
    def _loss(
        self, ro: Rollout, adv: Tensor, target: Tensor, idx: Tensor, table: Tensor | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Per-seed PPO loss on the actors ``idx`` (whole sequences); [S] and its parts."""
        cfg = self.config

        def sel(x: Tensor) -> Tensor:
            return x[:, :, idx]

        logits, value, _ = self.net(sel(ro.obs), sel(ro.first), ro.hidden0[:, idx])
        logp_all = torch.log_softmax(masked_logits(logits, sel(ro.legal)), -1)
        logp = logp_all.gather(-1, sel(ro.action)[..., None])[..., 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        acting, a = sel(ro.acting), sel(adv)
        if cfg.normalize_advantage:
            mean = _masked_mean(a, acting)[:, None, None]
            var = _masked_mean((a - mean) ** 2, acting)[:, None, None]
            a = (a - mean) / (var.sqrt() + 1e-8)
        ratio = torch.exp(logp - sel(ro.logp))
        surrogate = torch.minimum(ratio * a, ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps) * a)
        actor = -_masked_mean(surrogate, acting)
        if (
            table is not None
        ):  # exact mode: expected update on every local history, exact advantages [S, K, A]
            S, K = table.shape[:2]
            eye = torch.eye(K, device=table.device).expand(S, 1, K, K)
            every, _, _ = self.net(
                eye,
                torch.ones(S, 1, K, dtype=torch.bool, device=table.device),
                self.net.initial_state(K, table.device),
            )
            lp = torch.log_softmax(masked_logits(every[:, 0], self.env.legal_table()), -1)  # type: ignore[attr-defined]
            actor = -(lp.exp() * table).sum(-1).mean(1)
            ent = -(lp.exp() * lp).sum(-1).mean(1)
        t, old_v = sel(target), sel(ro.value)
        v_loss = (value - t) ** 2
        if cfg.clip_value_loss:
            clipped = old_v + (value - old_v).clamp(-cfg.clip_eps, cfg.clip_eps)
            v_loss = torch.maximum(v_loss, (clipped - t) ** 2)
        critic = 0.5 * v_loss.flatten(1).mean(1)
        if table is None:
            ent = _masked_mean(entropy, acting)
        loss = actor + cfg.vf_coef * critic - cfg.alpha * ent + self.net.auxiliary_loss(sel(ro.obs))
        return loss, {"actor_loss": actor.detach(), "value_loss": critic.detach(), "entropy": ent.detach()}

    def _clip_grads(self) -> Tensor:
        """Clip every seed's gradient to ``max_grad_norm`` (each parameter's leading factor is the seed)."""
        S = self.S
        grads = [p.grad for p in self.net.parameters() if p.grad is not None]
        norm = torch.stack([g.view(S, -1).pow(2).sum(1) for g in grads]).sum(0).sqrt()  # [S]
        scale = (self.config.max_grad_norm / (norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.view(S, -1).mul_(scale[:, None])
        return norm

    def ppo_update(self, ro: Rollout, adv: Tensor, target: Tensor) -> dict[str, Tensor]:
        cfg = self.config
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(cfg, self.update)
        sums: dict[str, Tensor] = {}
        n = 0
        table = advantage_table(self.net, self.env) if cfg.advantage == "exact" else None  # type: ignore[arg-type]
        for _ in range(cfg.epochs):
            perm = torch.randperm(self.N, generator=self.generator, device=self.env.device)
            for idx in perm.tensor_split(cfg.minibatches):
                loss, parts = self._loss(ro, adv, target, idx, table)
                self.optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()
                parts["grad_norm"] = self._clip_grads()
                self.optimizer.step()
                for k, v in parts.items():
                    sums[k] = sums.get(k, 0) + v
                n += 1
        return {k: v / n for k, v in sums.items()}

    def train_step(self) -> dict[str, Any]:
        """One update (collect, GAE, PPO); per-seed metrics as lists."""
        ro, stats = self.collect()
        adv, target = gae(self.config, ro, self.gamma)
        parts = self.ppo_update(ro, adv, target)
        self.update += 1
        out: dict[str, Any] = {
            "update": self.update,
            "env_steps": self.env_steps,
            "lr": lr_at(self.config, self.update - 1),
            "shaped_coef": shaped_coef(self.config, self.env_steps - self.config.steps_per_update),
        }
        for k, v in {**stats, **parts}.items():
            out[k] = [float(x) for x in v]
        return out

    # ---- resume ---------------------------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, Tensor]:
        """Every tensor a resume needs: parameters, Adam moments, env state, RNG streams, runner state."""
        out = {f"net/{k}": v for k, v in self.net.state_dict().items()}
        for i, p in enumerate(self.net.parameters()):
            for k, v in self.optimizer.state.get(p, {}).items():
                out[f"opt/{i}/{k}"] = v
        for k, v in vars(self.env.state).items():
            out[f"env/{k}"] = v
        out["rng/env"] = self.env.generator.get_state()
        out["rng/learner"] = self.generator.get_state()
        out.update(
            {
                "runner/first": self.first,
                "runner/hidden": self.hidden,
                "runner/ep_return": self.ep_return,
                "runner/ep_shaped": self.ep_shaped,
            }
        )
        return {k: v.detach().cpu().contiguous() for k, v in out.items()}

    def counters(self) -> dict[str, int]:
        return {"update": self.update, "env_steps": self.env_steps}

    def load_state_tensors(self, tensors: dict[str, Tensor], counters: dict[str, int]) -> None:
        """Restore what ``state_tensors`` captured (same config)."""
        dev = self.env.device
        self.net.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("net/")})
        params = list(self.net.parameters())
        state: dict[int, dict[str, Tensor]] = {}
        for k, v in tensors.items():
            if k.startswith("opt/"):
                _, index, name = k.split("/")
                state.setdefault(int(index), {})[name] = v.to(dev) if name != "step" else v
        self.optimizer.state.clear()
        for i, st in state.items():
            self.optimizer.state[params[i]] = st
        env_state = {k[4:]: v.to(dev) for k, v in tensors.items() if k.startswith("env/")}
        self.env.state = type(self.env.state)(**env_state)
        self.env.generator.set_state(tensors["rng/env"])
        self.generator.set_state(tensors["rng/learner"])
        self.first = tensors["runner/first"].to(dev)
        self.hidden = tensors["runner/hidden"].to(dev)
        self.ep_return = tensors["runner/ep_return"].to(dev)
        self.ep_shaped = tensors["runner/ep_shaped"].to(dev)
        self.update, self.env_steps = int(counters["update"]), int(counters["env_steps"])
