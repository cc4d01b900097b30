"""Minibatch gradient noise of the PPO update under three ways of drawing Hanabi's minibatches: whole games
(ers before 2026-11-28: both seats of a game in one minibatch), turn streams (``train.ppo.turn_streams``, ers
now) and actors (the JAX anchor: every seat's stream drawn on its own).

On one rollout and the parameters before the update, each scheme draws ``repeats`` random splits into
``minibatches`` minibatches and takes the gradient of the PPO loss on each minibatch (the first epoch's: ratio
1). Its noise is E ||g_k - mean_k g_k||^2 per parameter group (``embed``, ``actor``, ``critic``: which layers'
gradients). The value loss is where whole games differ: the two seats of a game share its rewards, so their
value errors are correlated and a minibatch of whole games holds half as many independent ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ers_deep.train.ippo import Learner
from ers_deep.train.ppo import MinibatchUnit, epoch_minibatches, ppo_loss, turn_streams, update_data
from ers_deep.train.update import select

SCHEMES: tuple[MinibatchUnit, ...] = ("games", "turn-streams", "actors")


def _group(name: str) -> str:
    """The parameter group of a net parameter (Hanabi's MLP: embed, actor_*, critic_*)."""
    return name.split(".", maxsplit=1)[0].split("_", maxsplit=1)[0]


def gradient_noise(
    learner: Learner, repeats: int, schemes: Sequence[MinibatchUnit] = SCHEMES, seed: int = 0
) -> dict[str, dict[str, float]]:
    """{scheme: {group: E ||g_k - mean g||^2, ..., "total": ...}} on one fresh rollout of ``learner`` (Hanabi,
    one seed, on CPU); ``repeats`` splits per scheme."""
    if learner.P < 2 or learner.config.num_steps % learner.P or len(learner.config.seeds) != 1:
        raise ValueError("gradient_noise needs one seed of a turn-based game whose seats P divide num_steps")
    ro, _ = learner.collect()
    data = update_data(ro, *learner.advantages(ro))
    streams = turn_streams(ro.acting, learner.P)
    named = list(learner.net.named_parameters())
    params = [p for _, p in named]
    g = torch.Generator().manual_seed(seed)
    out: dict[str, dict[str, float]] = {}
    for scheme in schemes:
        grads: list[Tensor] = []
        for _ in range(repeats):
            for idx in epoch_minibatches(
                scheme, learner.B, learner.P, learner.config.minibatches, g, streams
            ):
                share = None if scheme == "actors" else learner.P  # the head on acting entries where static
                loss, _ = ppo_loss(learner.net, learner.config, select(data, idx), None, share)
                grads.append(torch.cat([x.flatten() for x in torch.autograd.grad(loss.sum(), params)]))
        stack = torch.stack(grads)
        sq = (stack - stack.mean(0)).pow(2).mean(0)  # per coordinate
        noise: dict[str, float] = {}
        start = 0
        for name, p in named:
            group = _group(name)
            noise[group] = noise.get(group, 0.0) + float(sq[start : start + p.numel()].sum())
            start += p.numel()
        noise["total"] = float(sq.sum())
        out[scheme] = noise
    return out


def noise_ratios(noise: dict[str, dict[str, float]], against: str = "actors") -> dict[str, Any]:
    """Each scheme's noise over ``against``'s, per group."""
    base = noise[against]
    return {s: {k: v / base[k] for k, v in n.items()} for s, n in noise.items() if s != against}
