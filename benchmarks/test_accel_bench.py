"""The env fast paths (``ers_deep.accel``): env-steps/s of each mode against the eager step measured in the same
run, and against JaxMARL (its own process, when the ``reference`` extra is installed).

* CPU (one torch thread): ``torch.compile`` of the step at the small batches where ``mode="auto"`` compiles
  (``accel.capture.CPU_COMPILE_MAX_BATCH``); the compiled step must beat the eager one at batch 1.
* CUDA (marker ``gpu``, skipped without a GPU): eager, captured (``graph``) and compiled + captured
  (``compile-graph``) steps at the batches of the issue (256, 1,024, 8,192, 65,536), Hanabi and Overcooked V2
  with observations; ``scripts/env-gpu.sh`` runs the same measurements as one table with JaxMARL beside them.

Each side's loop is built, compiled or captured and warmed up once (``bench.compare.env_span``), outside the
timed function; the benchmark's rounds (and the eager reference's) time the steps alone, and the compilation
is reported apart (``compile_seconds``). That the rollout benchmark (``bench.rollout``) runs on CPU is a test
(``tests/deep/bench/test_policy_rollout.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ers_deep.bench.compare import env_span, jaxmarl_env
from ers_deep.bench.rollout import bench_policy_rollout
from ers_deep.bench.runner import one_core
from ers_deep.bench.timing import jaxmarl_installed


def _timed(
    benchmark: Any, env: str, batch: int, steps: int, device: str, mode: str, rounds: int
) -> dict[str, Any]:
    """The benchmark's rounds of ``steps`` batched steps on one loop built and warmed up beforehand: env-steps/s of
    the fastest round, the cores it kept busy and how the loop runs (``setup_seconds``: compilation, capture)."""
    span, how = env_span(env, batch, steps, device, mode)
    spans: list[tuple[float, float]] = []
    benchmark.pedantic(lambda: spans.append(span()), rounds=rounds, iterations=1)
    wall, cpu = min(spans)
    return {**how, "env_steps_per_s": batch * steps / wall, "seconds": wall, "cores_used": cpu / wall}


def _reference(env: str, batch: int, steps: int, device: str, mode: str, rounds: int = 3) -> dict[str, Any]:
    """The same measurement of another mode, beside the benchmark (the fastest of ``rounds``)."""
    span, how = env_span(env, batch, steps, device, mode)
    wall, cpu = min(span() for _ in range(rounds))
    return {**how, "env_steps_per_s": batch * steps / wall, "seconds": wall, "cores_used": cpu / wall}


def _jaxmarl(env: str, batch: int) -> dict[str, Any] | None:
    """JaxMARL's rate and cores in its own process; None without jaxmarl (found without importing it)."""
    if not jaxmarl_installed():
        return None
    jm = jaxmarl_env(env, batch, 256, cpus=one_core())  # one core, as the compiled step's one thread
    assert "error" not in jm, jm
    return jm


@pytest.mark.parametrize(
    "env, batch", [("hanabi", 1), ("hanabi", 16), ("overcooked-v2", 1), ("overcooked-v2", 256)]
)
def test_cpu_compiled_step(benchmark, one_thread, env: str, batch: int) -> None:  # type: ignore[no-untyped-def]
    steps = 300 if batch == 1 else 60
    compiled = _timed(benchmark, env, batch, steps, "cpu", "compile", rounds=3)  # compiled before the rounds
    eager = _reference(env, batch, steps, "cpu", "eager")
    assert compiled["mode"] == "compile" and eager["mode"] == "eager", (compiled, eager)
    info = {
        "batch": batch,
        "compiled_env_steps_per_s": compiled["env_steps_per_s"],
        "eager_env_steps_per_s": eager["env_steps_per_s"],
        "ratio_compiled_vs_eager": compiled["env_steps_per_s"] / eager["env_steps_per_s"],
        "compile_seconds": compiled["setup_seconds"],
    }
    jm = _jaxmarl(env, batch)
    if jm:
        info.update(
            compiled_cores_used=compiled["cores_used"],
            jaxmarl_env_steps_per_s=jm["env_steps_per_s"],
            jaxmarl_cores_used=jm["cores_used"],
            ratio_compiled_vs_jaxmarl=compiled["env_steps_per_s"] / jm["env_steps_per_s"],
        )
    benchmark.extra_info.update(info)
    print(info)
    if batch == 1:
        assert info["ratio_compiled_vs_eager"] > 1.0, info


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "graph", "compile-graph"])
@pytest.mark.parametrize("batch", [256, 1024, 8192, 65536])
@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_gpu_env_steps(benchmark, env: str, batch: int, mode: str) -> None:  # type: ignore[no-untyped-def]
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    res = _timed(benchmark, env, batch, 256, "cuda", mode, rounds=3)
    assert res["mode"] == mode, res
    info = {"device": torch.cuda.get_device_name(), **res}
    jm = _jaxmarl(env, batch)
    if jm:
        info.update(
            jaxmarl_env_steps_per_s=jm["env_steps_per_s"],
            jaxmarl_cores_used=jm["cores_used"],
            ratio_vs_jaxmarl=res["env_steps_per_s"] / jm["env_steps_per_s"],
        )
    benchmark.extra_info.update(info)
    print(info)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["eager", "graph", "compile-graph"])
@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_gpu_policy_rollout(benchmark, env: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    """What a collector runs at the paper's settings (``bench.rollout``): 128 steps of env + the official
    network, sampling with ``PolicyActor``, recording what PPO needs."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    res = benchmark.pedantic(lambda: bench_policy_rollout(env, "cuda", mode), rounds=1, iterations=1)
    info = {"gpu": torch.cuda.get_device_name(), **res}
    benchmark.extra_info.update(info)
    print(info)
