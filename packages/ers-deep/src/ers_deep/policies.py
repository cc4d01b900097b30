"""Frozen policy files: one single-seed network of a pool (``ers_deep.pools``) with the config it was trained with.

``seed_net(learner, i)`` copies seed i's network out of a stacked learner; ``save_policy`` freezes that slice into a
``ers_deep.train.checkpoint`` file (safetensors + JSON metadata: the TrainConfig, seed, obs shape, actions);
``load_policy`` reads one back, its metadata and tensors checked (``CheckpointError`` naming the file; nothing is
unpickled). ``ers_deep.pools`` re-exports all of them.

Policy files may come from strangers (a pool downloaded, shared or edited): they are read by
``ers_exact.util.files.read_confined`` (``read_regular_file`` where the file is named anywhere): only a regular file
of at most ``MAX_FILE_BYTES`` (a device such as /dev/zero or a FIFO is refused, without blocking), a pool's only
inside its folder, its SHA-256 taken of the bytes read; and the network the metadata describes is compared with the
file's tensor shapes on the ``meta`` device before any memory is allocated for it (metadata can name a network of
gigabytes; its digest anyone can recompute).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ers_deep.nets import ActorCritic, build_net
from ers_deep.train.checkpoint import CheckpointError, atomic_write_bytes, checkpoint_bytes, parse_checkpoint
from ers_deep.train.config import TrainConfig
from ers_deep.train.evaluate import Agent
from ers_deep.train.ippo import Learner
from ers_exact.util.files import MAX_FILE_BYTES, read_confined

__all__ = [
    "MAX_FILE_BYTES",
    "Policy",
    "load_checkpoint_file",
    "load_listed_policy",
    "load_policy",
    "on_device",
    "policy_bytes",
    "read_regular_file",
    "save_policy",
    "seed_net",
    "usable_device",
]

_SHA256 = re.compile(r"[0-9a-f]{64}")
#: TrainConfig fields a policy may record otherwise than its pool.json: its own seeds (a Ray pool's seed alone),
#: its device (a Ray task's), the CPU-only switches ``on_device`` resets off the CPU, and ``cpu_products`` (a pool
#: resumed before 2026-12-07 recorded what "auto" resolved to in its policies, "auto" in its pool.json)
_OWN_FIELDS = ("seeds", "device", "bf16_gradients", "int8_inputs", "cpu_products")


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
    """Freeze seed ``learner.config.seeds[index]`` of ``learner`` into ``path`` (the bytes ``policy_bytes``
    gives, written atomically)."""
    atomic_write_bytes(path, policy_bytes(learner, index, extra, net=net))
    return Path(path)


def policy_bytes(
    learner: Learner, index: int, extra: dict[str, Any] | None = None, *, net: ActorCritic | None = None
) -> bytes:
    """The policy file of seed ``learner.config.seeds[index]`` of ``learner`` (what ``save_policy`` writes): of
    ``net`` when given (a ``config.net`` network of the learner's seeds, e.g. the pi inside a composite net),
    else ``learner.net``; ``extra``: more metadata."""
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
    return checkpoint_bytes(tensors, meta)


def read_regular_file(path: str | os.PathLike[str], what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``, checked on the opened file to be a regular file of at most ``limit`` bytes
    (``CheckpointError`` naming it and ``what`` it should be otherwise: missing, a folder, a device such as
    /dev/zero, a FIFO, which is opened without blocking, or too large): ``ers_exact.util.files.read_confined``
    of a file named anywhere."""
    return read_confined(path, what, error=CheckpointError, limit=limit)[1]


def load_checkpoint_file(
    path: str | os.PathLike[str], what: str = "a checkpoint", sha256: str | None = None, record: str = ""
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``ers_deep.train.checkpoint.load_checkpoint`` of a file read by ``read_regular_file`` (checked, and
    read once: what is checked is what is parsed); ``sha256``: the SHA-256 its bytes must have, as ``record``
    (the file naming it, for the message) records it."""
    file, data = read_confined(path, what, sha256=sha256, record=record, error=CheckpointError)
    return parse_checkpoint(file, data)


def load_policy(
    path: str | os.PathLike[str], device: str | None = None, *, sha256: str | None = None, record: str = ""
) -> Policy:
    """A frozen policy file (``CheckpointError`` naming the file when damaged, not a regular file, its bytes
    not of the SHA-256 ``sha256`` when given (as ``record``, e.g. its pool.json, records it), or when its
    metadata does not describe a network its tensors fit), its net and games on ``device``: by default the
    device it was trained on where this machine has it, else the CPU (a pool trained on CUDA reads on a machine
    without one). The policy's ``config.device`` says where it is (``on_device``)."""
    return _policy(path, *load_checkpoint_file(path, "a policy file", sha256, record), device)


def _policy(
    path: str | os.PathLike[str], tensors: dict[str, torch.Tensor], meta: dict[str, Any], device: str | None
) -> Policy:
    """The policy a policy file's parsed ``tensors`` and ``meta`` hold (``load_policy``)."""
    if meta.get("kind") != "policy":
        raise CheckpointError(f"{path}: not a policy file (kind {meta.get('kind')!r})")
    recorded = _policy_config(path, meta)
    config = on_device(recorded, usable_device(recorded.device) if device is None else device)
    net = _policy_net(path, meta, config, tensors)
    net.to(config.device).eval()
    return Policy(net, config, meta["seed"], f"{Path(path).parent.parent.name}/seed-{meta['seed']}")


def load_listed_policy(
    folder: Path, entry: dict[str, Any], record: Path, config: TrainConfig | None, device: str | None = None
) -> Policy:
    """The policy an entry of ``record`` (a pool.json in ``folder``) lists, read only inside ``folder`` (``file``
    a relative path without "..", no link on it leading out), of the SHA-256 the entry records (``sha256``;
    pools written before it have none), of the entry's ``seed`` and trained with ``config`` (the pool's,
    where it records one) but for ``_OWN_FIELDS`` (``CheckpointError`` naming ``record`` and the file)."""
    name, sha256 = entry["file"], entry.get("sha256")
    where = f"{record}: policy file {name!r}"
    if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        raise CheckpointError(f"{where} has sha256 {sha256!r}, no SHA-256 hex digest")
    file, data = read_confined(
        name, "a policy file", folder=folder, sha256=sha256, record=str(record), error=CheckpointError
    )
    policy = _policy(file, *parse_checkpoint(file, data), device)
    seed = entry.get("seed", policy.seed)
    if type(seed) is not int or seed != policy.seed:
        raise CheckpointError(f"{where} is listed as seed {seed!r} but holds seed {policy.seed} (replaced)")
    own, pool = policy.config.to_json(), {} if config is None else config.to_json()
    differ = sorted(k for k in pool.keys() | own.keys() if k not in _OWN_FIELDS and own.get(k) != pool.get(k))
    if config is not None and (differ or policy.seed not in config.seeds):
        what = ", ".join(f"{k} {own.get(k)!r} (the pool's: {pool.get(k)!r})" for k in differ[:3])
        what = what or f"seed {policy.seed} (the pool's seeds: {list(config.seeds)})"
        raise CheckpointError(f"{where} was not trained with the pool's config: {what} (replaced)")
    return policy


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
        # first without memory (the meta device): the metadata may describe a network of any size, the file's
        # tensors are what it holds; the 3x3 convolutions as F.conv2d, whose index buffers (spatial "matmul")
        # the meta device cannot compute and which are no part of a file
        with torch.device("meta"):
            plan = build_net(dataclasses.replace(config.net, spatial="conv"), [meta["seed"]], shape, actions)
    except (KeyError, TypeError, ValueError, RuntimeError, OverflowError) as e:  # NotImplementedError too
        raise CheckpointError(f"{path}: cannot build {described} ({_first_line(e)})") from None
    want = plan.state_dict()
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
    try:
        net = build_net(config.net, [meta["seed"]], shape, actions)
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: cannot build {described} ({_first_line(e)})") from None
    net.load_state_dict(tensors)
    return net
