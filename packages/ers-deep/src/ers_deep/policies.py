"""Frozen policy files: one single-seed network of a pool (``ers_deep.pools``) with the config it was trained with.

``seed_net(learner, i)`` copies seed i's network out of a stacked learner; ``save_policy`` freezes that slice into a
``ers_deep.train.checkpoint`` file (safetensors + JSON metadata: the TrainConfig, seed, obs shape, actions);
``load_policy`` reads one back, its metadata and tensors checked (``CheckpointError`` naming the file; nothing is
unpickled). ``ers_deep.pools`` re-exports all of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ers_deep.nets import ActorCritic, build_net
from ers_deep.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ers_deep.train.config import TrainConfig
from ers_deep.train.evaluate import Agent
from ers_deep.train.ippo import Learner

__all__ = ["Policy", "load_policy", "on_device", "save_policy", "seed_net", "usable_device"]


@dataclass(frozen=True)
class Policy:
    """One frozen policy: a single-seed network and the config it was trained with."""

    net: ActorCritic
    config: TrainConfig
    seed: int
    name: str

    def agent(self) -> Agent:
        return Agent(self.net)


def _seed_slice(t: torch.Tensor, S: int, s: int) -> torch.Tensor:
    """Seed s's slice of a stacked parameter (every parameter's leading dim is S times the single-seed one)."""
    return t.reshape(S, t.shape[0] // S, *t.shape[1:])[s].clone()


def seed_net(learner: Learner, index: int) -> ActorCritic:
    """Seed ``learner.config.seeds[index]``'s network alone (a copy, single-seed, in eval mode on the learner's
    device): what ``save_policy`` freezes, without the file (e.g. to evaluate each seed of a stacked run)."""
    S, cfg = learner.S, learner.config
    env = learner.env
    # binary_obs as the learner's: the same embedding products (nets.int8) while the process's switch is on
    net = build_net(cfg.net, [cfg.seeds[index]], tuple(env.obs_shape), env.num_actions, learner.binary_obs)
    net.load_state_dict({k: _seed_slice(v, S, index) for k, v in learner.net.state_dict().items()})
    return net.to(cfg.device).eval()


def save_policy(
    path: str | os.PathLike[str],
    learner: Learner,
    index: int,
    extra: dict[str, Any] | None = None,
    *,
    net: ActorCritic | None = None,
) -> Path:
    """Freeze seed ``learner.config.seeds[index]`` of ``learner`` into ``path``: of ``net`` when given (a
    ``config.net`` network of the learner's seeds, e.g. the pi inside a composite net), else ``learner.net``."""
    S, seed = learner.S, learner.config.seeds[index]
    net = learner.net if net is None else net
    tensors = {k: _seed_slice(v, S, index) for k, v in net.state_dict().items()}
    meta = {
        "kind": "policy",
        "seed": seed,
        "config": learner.config.to_json(),
        "obs_shape": list(learner.env.obs_shape),
        "num_actions": learner.env.num_actions,
        **(extra or {}),
    }
    return save_checkpoint(path, tensors, meta)


def load_policy(path: str | os.PathLike[str], device: str | None = None) -> Policy:
    """A frozen policy file (``CheckpointError`` naming the file when damaged, or when its metadata does not
    describe a network its tensors fit), its net and games on ``device``: by default the device it was trained
    on where this machine has it, else the CPU (a pool trained on CUDA reads on a machine without one). The
    policy's ``config.device`` says where it is (``on_device``)."""
    tensors, meta = load_checkpoint(path)
    if meta.get("kind") != "policy":
        raise CheckpointError(f"{path}: not a policy file (kind {meta.get('kind')!r})")
    recorded = _policy_config(path, meta)
    config = on_device(recorded, usable_device(recorded.device) if device is None else device)
    net = _policy_net(path, meta, config, tensors)
    net.to(config.device).eval()
    return Policy(net, config, meta["seed"], f"{Path(path).parent.parent.name}/seed-{meta['seed']}")


def usable_device(device: str) -> str:
    """``device`` where this machine has it (CUDA, its index included), else ``"cpu"``."""
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.is_available():
        return device if dev.index is None or dev.index < torch.cuda.device_count() else "cpu"
    return device if dev.type == "cpu" else "cpu"


def on_device(config: TrainConfig, device: str) -> TrainConfig:
    """``config`` on ``device``; off the CPU, the CPU-only product switches it resolved on (``bf16_gradients``,
    ``int8_inputs``: True) go back to ``"auto"``, which resolves off there (a policy trained on a CPU with them
    plays, or trains on, CUDA)."""
    if str(device) == str(config.device):
        return config
    cpu = torch.device(device).type == "cpu"
    switches = {
        k: "auto" for k in ("bf16_gradients", "int8_inputs") if getattr(config, k) is True and not cpu
    }
    return config.replace(device=str(device), **switches)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _policy_config(path: str | os.PathLike[str], meta: dict[str, Any]) -> TrainConfig:
    """The training config a policy file's metadata records, its other keys checked (``CheckpointError``
    naming the file and the key)."""
    shape = meta.get("obs_shape")
    checks = {
        "seed": type(meta.get("seed")) is int,
        "num_actions": type(meta.get("num_actions")) is int and meta["num_actions"] > 0,
        "obs_shape": isinstance(shape, list) and all(type(n) is int and n > 0 for n in shape),
        "config": isinstance(meta.get("config"), dict),
    }
    for key, ok in checks.items():
        if not ok:
            what = f"{key!r} is {meta[key]!r}, not a valid value" if key in meta else f"lacks {key!r}"
            raise CheckpointError(f"{path}: policy metadata {what}")
    try:
        return TrainConfig.from_json(meta["config"])
    except (KeyError, TypeError, ValueError) as e:  # UsageError is a ValueError
        raise CheckpointError(
            f"{path}: policy metadata 'config' is not a training config ({_first_line(e)})"
        ) from None


def _policy_net(
    path: str | os.PathLike[str], meta: dict[str, Any], config: TrainConfig, tensors: dict[str, torch.Tensor]
) -> ActorCritic:
    """The single-seed network the metadata describes, with the file's tensors (``CheckpointError`` naming the
    file and the first tensor that does not fit)."""
    shape, actions = tuple(meta["obs_shape"]), meta["num_actions"]
    described = f"the network its metadata describes (obs_shape {list(shape)}, num_actions {actions})"
    try:
        net = build_net(config.net, [meta["seed"]], shape, actions)
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: cannot build {described} ({_first_line(e)})") from None
    want = net.state_dict()
    missing, extra = sorted(want.keys() - tensors.keys()), sorted(tensors.keys() - want.keys())
    if missing or extra:
        raise CheckpointError(
            f"{path}: its tensors do not fit {described} (missing {missing[:3]}, unexpected {extra[:3]})"
        )
    for k in sorted(want):
        if tensors[k].shape != want[k].shape:
            raise CheckpointError(
                f"{path}: tensor {k!r} has shape {list(tensors[k].shape)}, {described} has {list(want[k].shape)}"
            )
    net.load_state_dict(tensors)
    return net
