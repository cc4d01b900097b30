"""gpu-marked twins of the learner's CPU tests: the captured fast collection against the eager reference loop on
CUDA, and the compiled update against the eager one (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from tests.deep.train.twins import assert_rollouts_equal, compiled_vs_eager_params, rollouts, tiny_config

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("mode", ["graph", "compile-graph"])
@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_captured_collection_equals_the_eager_loop(env: str, mode: str) -> None:
    cfg = tiny_config(env, device="cuda", num_envs=64, num_steps=64)
    fast = rollouts(cfg.replace(collector="fast", collect_mode=mode), calls=3)
    ref = rollouts(cfg.replace(collector="native", collect_mode=mode), calls=3)
    assert_rollouts_equal(fast, ref, float_tol=1e-5)  # a graph may pick other cuBLAS kernels


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_compiled_update_equals_the_eager_update(env: str) -> None:
    diff = compiled_vs_eager_params(tiny_config(env, device="cuda", tf32=False), updates=3)
    assert diff < 1e-5, diff
