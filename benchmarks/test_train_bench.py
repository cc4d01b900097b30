"""End-to-end IPPO training throughput on CPU: env-steps/s of one update (collection + GAE + 4 PPO epochs), one
seed, one torch thread, for Hanabi (2-player Full, the official 512-wide feed-forward net, 4 minibatches) and
Overcooked V2 grounded_coord_simple (the official CNN + GRU, 128 wide), each at two batch sizes.

An env-step is one joint step of one game; the rate counts collection and update together (the paper's
settings run 1024 x 128 (Hanabi) and 256 x 256 (Overcooked) per update; here fewer steps per update keep a
round short, which does not change the per-step cost of either phase)."""

from __future__ import annotations

import pytest

from ers_deep.nets import NetConfig
from ers_deep.train.config import paper_config
from ers_deep.train.ippo import Learner

CASES = {
    "hanabi-64": paper_config("hanabi", num_envs=64, num_steps=32),
    "hanabi-256": paper_config("hanabi", num_envs=256, num_steps=32),
    "overcooked-16": paper_config("overcooked-v2", num_envs=16, num_steps=64, minibatches=4),
    "overcooked-64": paper_config("overcooked-v2", num_envs=64, num_steps=64, minibatches=16),
    # the same Hanabi update with its rollout collected through torchrl's Collector (bit-equal data)
    "hanabi-256-torchrl": paper_config("hanabi", num_envs=256, num_steps=32, collector="torchrl"),
}

#: the paper's settings on a CUDA device (issue 14's GPU targets: PureJaxRL-style IPPO on an H200 ran 0.40M,
#: 1.07M and 1.90M env-steps/s at 256, 1,024 and 8,192 Hanabi envs; ``../shared/notes/gpu-anchors.md``)
GPU_CASES = {
    f"hanabi-{n}-cuda": paper_config("hanabi", num_envs=n, num_steps=128, device="cuda")
    for n in (256, 1024, 8192)
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_training_env_steps(benchmark, one_thread, case: str) -> None:  # type: ignore[no-untyped-def]
    cfg = CASES[case]
    learner = Learner(cfg)
    learner.train_step()  # warm-up
    benchmark.pedantic(learner.train_step, rounds=3, iterations=1)
    rate = cfg.steps_per_update / benchmark.stats.stats.mean
    benchmark.extra_info.update(
        {
            "env_steps_per_update": cfg.steps_per_update,
            "env_steps_per_s": rate,
            "net": NetConfig.to_json(cfg.net),
        }
    )
    assert rate > 0


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_training_env_steps_cuda(benchmark, case: str) -> None:  # type: ignore[no-untyped-def]
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    cfg = GPU_CASES[case]
    learner = Learner(cfg)
    learner.train_step()  # warm-up

    def step() -> None:
        learner.train_step()
        torch.cuda.synchronize()

    benchmark.pedantic(step, rounds=3, iterations=1)
    rate = cfg.steps_per_update / benchmark.stats.stats.mean
    benchmark.extra_info.update(
        {
            "env_steps_per_update": cfg.steps_per_update,
            "env_steps_per_s": rate,
            "device": torch.cuda.get_device_name(),
        }
    )
    assert rate > 0
