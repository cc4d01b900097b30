"""Throughput of what a collector runs: ``FastRollout`` of env + the official network (``PolicyActor``).

``bench_policy_rollout`` times k steps of env and network together, sampling actions, recording what the PPO
update needs (observations, actions, log-probabilities, values, rewards, dones), in any ``ers_deep.accel``
mode. The paper's settings: Hanabi 1,024 games with the 512-wide MLP, Overcooked V2 256 games with CNN 128 +
GRU 128, 128 steps. The JaxMARL IPPO anchors of ``../shared/notes/gpu-anchors.md`` (collection *and* update:
1.07M env-steps/s for Hanabi, 17.7k for Overcooked V2 on an H200) bound what the rollout alone must beat.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from ers_deep.accel import FastRollout, PolicyActor
from ers_deep.bench.timing import time_steps
from ers_deep.envs import HanabiEnv, OvercookedV2Env
from ers_deep.nets import NetConfig, build_net

RECORD = ("obs", "action", "logp", "value", "reward", "done")
PAPER = {
    "hanabi": (1024, NetConfig(kind="mlp", hidden=512)),
    "overcooked-v2": (256, NetConfig(kind="cnn-gru")),
}


def bench_policy_rollout(
    env: str = "hanabi",
    device: str = "cuda",
    mode: str = "auto",
    batch: int | None = None,
    steps: int = 128,
    net: NetConfig | None = None,
    calls: int = 4,
    repeats: int = 3,
) -> dict[str, Any]:
    """Env-steps/s of ``calls`` rollouts of ``steps`` steps (the best of ``repeats``), after one call that
    compiles and/or captures (its seconds: ``setup_seconds``). ``batch`` and ``net`` default to the paper's."""
    default_batch, default_net = PAPER[env]
    batch, net = batch or default_batch, net or default_net
    if env == "hanabi":
        e: Any = HanabiEnv(batch_size=batch, device=device, check_legal=False, branch_free=True)
    else:
        e = OvercookedV2Env(batch_size=batch, device=device, branch_free=True)
    policy = build_net(net, [0], e.obs_shape, e.num_actions).to(e.device)
    actor = PolicyActor(policy, 1, torch.Generator(device=e.device).manual_seed(0))
    roll = FastRollout(e, actor, steps, mode=mode, record=RECORD)
    t0 = time.perf_counter()
    roll()
    setup = time.perf_counter() - t0

    def run(n: int) -> None:
        for _ in range(math.ceil(n / steps)):
            roll()

    seconds, cores = time_steps(run, calls * steps, e.device, warmup=0, repeats=repeats)
    return {
        "env": env,
        "mode": roll.mode,
        "batch": batch,
        "steps": steps,
        "net": net.to_json(),
        "device": str(e.device),
        "env_steps_per_s": batch * calls * steps / seconds,
        "cores_used": cores,
        "setup_seconds": setup,
    }
