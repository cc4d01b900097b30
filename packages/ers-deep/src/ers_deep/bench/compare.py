"""One entry per env for the side-by-side tables (``scripts/gpu_env_table.py``, ``benchmarks/test_accel_bench.py``):
ers in any ``ers_deep.accel`` mode, and JaxMARL in a process of its own, at the issue's settings (Hanabi:
2-player Full, no per-step legality check; Overcooked V2: ``grounded_coord_simple`` with the paper's switches,
observations optional)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

import torch

from ers_deep.bench import hanabi as bench_hanabi
from ers_deep.bench import overcooked_v2 as bench_overcooked
from ers_deep.bench.runner import reference_in_subprocess
from ers_deep.bench.timing import JAXMARL_MISSING, jaxmarl_installed
from ers_deep.envs.hanabi.config import resolve_config

_MODULES = {"hanabi": "hanabi", "overcooked-v2": "overcooked_v2"}


def bench_env(
    env: str,
    batch: int,
    steps: int,
    device: str = "cpu",
    mode: str = "eager",
    unroll: int = 1,
    repeats: int = 1,
    observations: bool = True,
) -> dict[str, Any]:
    """ers's env-steps/s of ``env`` (``bench_ers`` of its module); ``observations=False``: Overcooked V2 only."""
    kw: dict[str, Any] = {"batch": batch, "steps": steps, "device": device, "mode": mode, "unroll": unroll}
    if env == "hanabi":
        if not observations:
            raise ValueError("the state-only rate is an Overcooked V2 measurement")
        return bench_hanabi.bench_ers(None, check_legal=False, repeats=repeats, **kw)
    return bench_overcooked.bench_ers(observations=observations, repeats=repeats, **kw)


def env_span(
    env: str, batch: int, steps: int, device: str = "cpu", mode: str = "eager", warmup: int = 5
) -> tuple[Callable[[], tuple[float, float]], dict[str, Any]]:
    """``bench_env``'s loop built once, for a benchmark that times it again and again: ``span()`` runs ``steps``
    batched steps of ``env`` in ``mode`` (device synchronised) and returns its (wall, CPU) seconds; with it, how
    it runs (``bench.runner.random_legal_runner``: the resolved mode, ``setup_seconds`` = compilation and
    capture, which happen before this returns, as do ``warmup`` more steps)."""
    if env == "hanabi":
        built, run, how = bench_hanabi.hanabi_runner(resolve_config(None), batch, device, 0, False, mode)
        where = built.device
    else:
        oc, run, how = bench_overcooked.overcooked_runner(
            "grounded_coord_simple", batch, device, 0, mode=mode
        )
        where = oc.device
    cuda = where.type == "cuda"
    run(warmup)
    if cuda:
        torch.cuda.synchronize(where)

    def span() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        run(steps)
        if cuda:
            torch.cuda.synchronize(where)
        return time.perf_counter() - t0, time.process_time() - c0

    return span, how


def jaxmarl_env(
    env: str,
    batch: int,
    steps: int,
    observations: bool = True,
    scan_length: int = 128,
    repeats: int = 1,
    cpus: Collection[int] | None = None,
) -> dict[str, Any]:
    """JaxMARL's env-steps/s of ``env`` (its module's ``bench_jaxmarl``: at least ``steps`` steps in jitted scans
    of ``scan_length``, the best of ``repeats``) in a fresh process (``bench.runner``), with the cores that
    process kept busy (``cores_used``); ``{"error": ...}`` where it fails or jaxmarl is not installed (found
    without importing it: JAX never starts in the caller's process). ``observations=False``: Overcooked V2
    only, its state-only rate. ``cpus``: the CPUs that process is pinned to (``bench.runner.one_core()`` beside
    an ers side on one torch thread)."""
    if not jaxmarl_installed():
        return {"error": JAXMARL_MISSING}
    kwargs: dict[str, Any] = {"batch": batch, "steps": steps, "scan_length": scan_length, "repeats": repeats}
    if env == "hanabi":
        if not observations:
            raise ValueError("the state-only rate is an Overcooked V2 measurement")
    else:
        kwargs["observations"] = observations
    return reference_in_subprocess(_MODULES[env], "bench_jaxmarl", kwargs, cpus=cpus)
