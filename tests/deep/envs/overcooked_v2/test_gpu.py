"""Overcooked V2 on a GPU (marker ``gpu``; skipped without CUDA): the CUDA env equals the CPU env on the same
states and actions, and its throughput at large batches. Imports torch and the env only (no torchrl, no HLE), so it
runs on a bare GPU image."""

from __future__ import annotations

import pytest
import torch

from ers_deep.bench.overcooked_v2 import bench_ers
from ers_deep.envs.overcooked_v2 import OvercookedState, OvercookedV2Env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _to(s: OvercookedState, device: str) -> OvercookedState:
    return OvercookedState(**{k: v.to(device) for k, v in vars(s).items()})


@pytest.mark.parametrize("layout", ["grounded_coord_simple", "cramped_room_v2"])
def test_cuda_equals_cpu(layout: str) -> None:
    B = 512
    cpu = OvercookedV2Env(layout, batch_size=B, seed=0, auto_reset=False)
    gpu = OvercookedV2Env(layout, batch_size=B, device="cuda", seed=0, auto_reset=False)
    g = torch.Generator().manual_seed(0)
    s = cpu.state
    for t in range(400):
        a = torch.where(torch.rand(B, cpu.A, generator=g) < 0.4, 5, torch.randint(5, (B, cpu.A), generator=g))
        nc, *oc = cpu.transition(s, a)
        ng, *og = gpu.transition(_to(s, "cuda"), a.cuda())
        ncd = nc.new_correct_delivery
        for k, v in vars(
            nc
        ).items():  # the recipe drawn after a correct delivery comes from each device's stream
            w = getattr(ng, k).cpu()
            assert torch.equal(v[~ncd] if k == "recipe" else v, w[~ncd] if k == "recipe" else w), (t, k)
        assert all(torch.equal(x, y.cpu()) for x, y in zip(oc, og)), t
        assert torch.equal(cpu.observe(nc), gpu.observe(_to(nc, "cuda")).cpu()), t
        s = nc


@pytest.mark.parametrize("batch", [65536, 262144])
def test_cuda_throughput(batch: int) -> None:
    res = bench_ers(batch=batch, steps=50, device="cuda")
    print(f"\ncuda batch {batch}: {res['env_steps_per_s']:,.0f} env-steps/s")
    assert res["env_steps_per_s"] > 1e6
