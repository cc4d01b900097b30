"""The two schedules of a training run, pure functions of its counters (so a resumed run continues them
exactly): the learning rate of an update (``TrainConfig.lr_schedule``: constant, linear decay or warm-up then
cosine) and the weight of Overcooked V2's shaped reward after so many env steps (linear 1 -> 0 over
``TrainConfig.shaped_reward_horizon``)."""

from __future__ import annotations

import math

from ers_deep.train.config import TrainConfig

__all__ = ["lr_at", "shaped_coef"]


def lr_at(config: TrainConfig, update: int) -> float:
    """The learning rate of update ``update`` (0-based) under ``config.lr_schedule``."""
    frac = update / config.num_updates
    if config.lr_schedule == "linear":
        return config.lr * (1.0 - frac)
    if config.lr_schedule == "warmup-cosine":
        # capped at 1: with a fractional W, (update + 1) / W passes 1 at the last warm-up update
        if frac < config.warmup:
            return config.lr * min(1.0, (update + 1) / max(1.0, config.warmup * config.num_updates))
        rest = (frac - config.warmup) / max(1e-12, 1.0 - config.warmup)
        return config.lr * 0.5 * (1.0 + math.cos(math.pi * min(rest, 1.0)))
    return config.lr


def shaped_coef(config: TrainConfig, env_steps: int) -> float:
    """Weight of the shaped reward after ``env_steps`` steps per seed (linear 1 -> 0; horizon 0: always 1)."""
    if config.shaped_reward_horizon <= 0:
        return 1.0
    return max(0.0, 1.0 - env_steps / config.shaped_reward_horizon)
