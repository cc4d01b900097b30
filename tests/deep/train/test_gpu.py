"""gpu-marked twins of the learner's CPU tests: the captured fast collection against the eager reference loop on
CUDA, and the compiled and captured updates against the eager one (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from ers_deep.train.ppo import gae
from tests.deep.train.twins import (
    assert_rollouts_equal,
    max_difference,
    mode_vs_eager_params,
    rollouts,
    same_rollouts_params,
    tiny_config,
    trained_params,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("mode", ["graph", "compile-graph"])
@pytest.mark.parametrize("env", ["tabular:dectiger", "hanabi", "overcooked-v2"])
def test_captured_collection_equals_the_eager_loop(env: str, mode: str) -> None:
    cfg = tiny_config(env, device="cuda", num_envs=64, num_steps=64)
    fast = rollouts(cfg.replace(collector="fast", collect_mode=mode), calls=3)
    ref = rollouts(cfg.replace(collector="native", collect_mode=mode), calls=3)
    assert_rollouts_equal(fast, ref, float_tol=1e-5)  # a graph may pick other cuBLAS kernels


def test_captured_collection_with_the_v0_belief_equals_the_eager_loop() -> None:
    """Hanabi with JaxMARL's knowledge encoding (the learning comparison's observation) under compile-graph."""
    cfg = tiny_config("hanabi", device="cuda", num_envs=64, num_steps=64, hanabi_knowledge="v0-belief")
    fast = rollouts(cfg.replace(collector="fast", collect_mode="compile-graph"), calls=3)
    ref = rollouts(cfg.replace(collector="native", collect_mode="compile-graph"), calls=3)
    assert_rollouts_equal(fast, ref, float_tol=1e-5)
    assert bool((fast[0][0].obs % 1 != 0).any())


@pytest.mark.parametrize("mode", ["compile", "graph", "compile-graph"])
@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_update_modes_equal_the_eager_update(env: str, mode: str) -> None:
    """Compiled and captured updates (Overcooked V2: episodes ending mid-rollout, so the captured update's
    bounded-segment GRU meets resets) against the eager one, in fp32 (TF32 off in cuBLAS and cuDNN)."""
    cfg = tiny_config(env, device="cuda", tf32=False, collect_mode="eager")
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        diff = mode_vs_eager_params(cfg, mode, updates=3, staggered=True)
    assert diff < 1e-5, diff


@pytest.mark.parametrize("mode", ["compile", "compile-graph"])
def test_op_update_modes_equal_the_eager_update(mode: str) -> None:
    """Other-play on Hanabi's MLP (colour permutations, index symmetries: "auto" captures its update on CUDA
    since 2026-12-07) compiled and captured against the eager update, in fp32; the draws replayed in the graph."""
    from ers_deep.other_play import op_net, op_symmetries

    cfg = tiny_config("hanabi", hanabi_preset="Hanabi-Small", device="cuda", tf32=False, collect_mode="eager")
    phi = op_symmetries(cfg, "mdp")
    params = [trained_params(cfg.replace(update_mode=m), 3, net=op_net(cfg, phi)) for m in (mode, "eager")]
    assert max_difference(*params) < 1e-5


@pytest.mark.parametrize("mode", ["compile", "compile-graph"])
def test_op_with_learned_symmetries_compiles_and_captures_its_update(mode: str) -> None:
    """Other-play with learned symmetries on CUDA runs them grouped (``nets.grouped``, no host sync): its update
    compiled and captured against the eager update, in fp32 (CPU tests: tests/deep/nets/test_grouped.py)."""
    from ers_deep.bench.other_play import near_identity_symmetries
    from ers_deep.other_play import op_net

    cfg = tiny_config("hanabi", hanabi_preset="Hanabi-Small", device="cuda", tf32=False, collect_mode="eager")
    phi = near_identity_symmetries(cfg, 3)
    assert op_net(cfg, phi).traceable
    params = [trained_params(cfg.replace(update_mode=m), 3, net=op_net(cfg, phi)) for m in (mode, "eager")]
    assert max_difference(*params) < 1e-5


@pytest.mark.parametrize("mode", ["graph", "compile-graph"])
def test_op_with_learned_symmetries_captures_its_collection(mode: str) -> None:
    """The grouped other-play net's captured collection against the native loop."""
    from ers_deep.bench.other_play import near_identity_symmetries
    from ers_deep.other_play import op_net

    cfg = tiny_config("hanabi", hanabi_preset="Hanabi-Small", device="cuda", num_envs=64, num_steps=64)
    phi = near_identity_symmetries(cfg, 3)
    fast = rollouts(cfg.replace(collector="fast", collect_mode=mode), calls=3, net=op_net(cfg, phi))
    ref = rollouts(cfg.replace(collector="native", collect_mode=mode), calls=3, net=op_net(cfg, phi))
    assert_rollouts_equal(fast, ref, float_tol=1e-5)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_learner_on_the_second_gpu_captures_on_it() -> None:
    """``device="cuda:1"`` while device 0 is current: the captured collection and update warm up and capture on
    device 1's streams (``accel.capture.capture``, ``PPOUpdate._captured``) and equal their eager twins there."""
    assert torch.cuda.current_device() == 0
    cfg = tiny_config("hanabi", device="cuda:1", tf32=False, num_envs=64, num_steps=64)
    fast = rollouts(cfg.replace(collector="fast", collect_mode="graph"), calls=3)
    ref = rollouts(cfg.replace(collector="native", collect_mode="graph"), calls=3)
    assert_rollouts_equal(fast, ref, float_tol=1e-5)
    diff = mode_vs_eager_params(cfg.replace(collect_mode="eager"), "graph", updates=3)
    assert diff < 1e-5, diff


@pytest.mark.parametrize("mode", ["compile", "compile-graph"])
def test_discovery_update_modes_equal_the_eager_update(mode: str) -> None:
    """Discovery's sp-max net (``DiscoveryNet``, traceable: "auto" captures its update on CUDA since 2026-12-07)
    compiled and captured against the eager update, in fp32 (its CPU tests: tests/deep/discovery)."""
    from tests.deep.discovery.test_compiled_update import discovery_config, discovery_net

    cfg = discovery_config(device="cuda", tf32=False, collect_mode="eager")
    params = [
        trained_params(cfg.replace(update_mode=m), 3, net=discovery_net(cfg, "sp")) for m in (mode, "eager")
    ]
    assert max_difference(*params) < 1e-5


@pytest.mark.parametrize("mode", ["graph", "compile-graph"])
def test_captured_updates_with_the_grid_matrix_convolutions_equal_the_eager_update(mode: str) -> None:
    """``NetConfig.spatial="matmul"`` (its index buffers on the device before capture) on Overcooked V2."""
    import dataclasses

    cfg = tiny_config("overcooked-v2", device="cuda", tf32=False, collect_mode="eager")
    cfg = cfg.replace(net=dataclasses.replace(cfg.net, spatial="matmul"))
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        diff = mode_vs_eager_params(cfg, mode, updates=3, staggered=True)
    assert diff < 1e-5, diff


CROSS = {
    "hanabi": {},
    # the 5-minute learning run's observation and minibatches (V0 belief, turn streams, acting rows)
    "hanabi-full": {
        "hanabi_preset": "Hanabi-Full",
        "hanabi_knowledge": "v0-belief",
        "num_envs": 16,
        "num_steps": 32,
    },
    "overcooked-v2": {},
}


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("case", list(CROSS))
def test_the_cuda_update_equals_the_cpu_update(case: str, mode: str) -> None:
    """What only a GPU runs in an update (capturable fused Adam with the learning rate a tensor, the log-depth GAE
    scan, cuBLAS and cuDNN kernels, per-seed clipping on the device) against the CPU update, whose arithmetic
    ``test_jax_reference_update.py`` checks against JAX and optax: the same starting parameters, rollouts and
    minibatches (the CPU learner's), three updates, fp32 (TF32 off)."""
    env = "hanabi" if case.startswith("hanabi") else case
    cfg = tiny_config(env, collect_mode="eager", update_mode="eager", **CROSS[case])
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        cpu, cuda = same_rollouts_params(
            cfg, cfg.replace(device="cuda", tf32=False, update_mode=mode), updates=3, staggered=True
        )
    diff = max_difference(cpu, cuda)
    assert diff < 1e-5, diff


def test_gae_on_cuda_equals_the_cpu_loop() -> None:
    """On CUDA ``ppo.gae`` takes the log-depth scan (``reverse_linear_scan``); the CPU takes the loop."""
    g = torch.Generator().manual_seed(0)
    S, T, N = 2, 128, 300
    value, reward = torch.randn(S, T, N, generator=g), torch.randn(S, T, N, generator=g)
    done, last = torch.rand(S, T, N, generator=g) < 0.02, torch.randn(S, N, generator=g)
    adv, target = gae(reward, value, last, done, 0.99, 0.95)
    cuda = gae(reward.cuda(), value.cuda(), last.cuda(), done.cuda(), 0.99, 0.95)
    assert torch.allclose(cuda[0].cpu(), adv, atol=1e-4) and torch.allclose(cuda[1].cpu(), target, atol=1e-4)


@pytest.mark.parametrize("bench", [True, False])
def test_the_learner_sets_cudnn_benchmark_from_its_config(bench: bool) -> None:
    """``TrainConfig.cudnn_benchmark`` (a process-wide switch, like ``tf32``) and one update with it."""
    from ers_deep.train import Learner

    before = torch.backends.cudnn.benchmark
    try:
        learner = Learner(tiny_config("overcooked-v2", device="cuda", cudnn_benchmark=bench))
        assert torch.backends.cudnn.benchmark is bench
        assert all(torch.isfinite(torch.tensor(learner.train_step()["value_loss"])))
    finally:
        torch.backends.cudnn.benchmark = before


def test_the_captured_update_with_autotuned_gemms_equals_the_eager_update() -> None:
    """``TrainConfig.gemm_autotune`` (Triton GEMM templates timed against cuBLAS, bias and ReLU in their
    epilogues) on Hanabi's MLP under compile-graph, against the eager update, in fp32. Slow to compile (every
    product shape is timed): not in train-gpu.sh's default list."""
    cfg = tiny_config("hanabi", device="cuda", tf32=False, collect_mode="eager", gemm_autotune=True)
    diff = mode_vs_eager_params(cfg, "compile-graph", updates=3, staggered=True)
    assert diff < 1e-5, diff
