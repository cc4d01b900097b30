"""End-to-end learner throughput: env-steps per second of whole IPPO updates (collection + GAE + PPO update).

``bench_learner(config, updates)`` builds a ``Learner``, runs ``warmup`` updates (compilation, graph capture:
reported as ``setup_s``), then times ``updates`` more, synchronising the device around the timed span, and one
more with its phases apart (``phase_s``), and on request (``profile_top``) one more under ``torch.profiler``: the
operators and kernels that took the most time (``profile_update``), and on request (``count_flops``) the rate of
its matrix products (``product_flops``: TFLOP/s of collection and update). The
A/B baseline (``BASELINE``) is the same config with ``collector="native", update_mode="eager"`` and float32
products (``bf16_gradients`` and ``int8_inputs`` off), measured in the same process by ``bench_pair``: it shares
the current network code, so it is not the learner before issue 21 (``scripts/cpu_learner_bounds.py`` measures
against a worktree of that commit). Every row records the product switches as the learner resolved them and
whether the process keeps freed memory (``train.memory``: process-wide, set by the first CPU learner).
``bench_anchor`` runs a JAX reference learner of ``../shared/anchors`` in a process of its own and reads its
JSON lines.
"""

from __future__ import annotations

import json
import math
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ers_deep.bench.runner import available_cpus, reference_in_subprocess
from ers_deep.nets import ActorCritic
from ers_deep.train.config import TrainConfig
from ers_deep.train.ippo import Learner
from ers_deep.train.memory import freed_memory_kept

#: the A/B baseline: native collection (re-observing every step), the eager update and float32 products
#: (``TrainConfig.bf16_gradients`` and ``int8_inputs``, "auto" on the fast side), on the current network code
#: (not the learner before issue 21: that is a worktree of its commit, ``scripts/cpu_learner_bounds.py``)
BASELINE = {
    "collector": "native",
    "update_mode": "eager",
    "collect_mode": "auto",
    "bf16_gradients": False,
    "int8_inputs": False,
}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def warmed_learner(
    config: TrainConfig, warmup: int = 1, net: ActorCritic | None = None
) -> tuple[Learner, dict[str, Any], float, dict[str, float]]:
    """A ``Learner`` of ``config`` (with ``net``: other-play's, discovery's) after ``warmup`` updates
    (compilation, graph capture), the last one's metrics, the setup seconds (build + warm-up, the device
    synchronised) and the setup apart: the build, then the first update's collect / GAE / (``precompile_wait``:
    for the update's helper compilation, where one runs, ``train.precompile``) / update (where compilation and
    capture go)."""
    t0 = time.perf_counter()
    learner = Learner(config, net=net)
    phases = {"build": time.perf_counter() - t0}
    m: dict[str, Any] = {}
    for i in range(warmup):
        m = learner.train_step(timings=phases if i == 0 else None)
    _sync(config.device)
    return learner, m, time.perf_counter() - t0, phases


def _twin_flops(config: TrainConfig, steps: int, update: bool) -> tuple[float, float]:
    """(collect, update) FLOP of the products per env-step of an eager CPU twin of ``config`` with ``steps``
    steps of max(8, minibatches) games (update: 0 unless ``update``)."""
    from torch.utils.flop_counter import FlopCounterMode

    twin = config.replace(
        num_envs=max(8, config.minibatches),
        num_steps=steps,
        device="cpu",
        collect_mode="eager",
        update_mode="eager",
        parallel_compile="off",
    )
    learner = Learner(twin)
    n = twin.steps_per_update * len(twin.seeds)
    with FlopCounterMode(display=False) as collect:
        ro, _ = learner.collect()
    if not update:
        return collect.get_total_flops() / n, 0.0
    adv, target = learner.advantages(ro)
    with FlopCounterMode(display=False) as counted:
        learner.ppo_update(ro, adv, target)
    return collect.get_total_flops() / n, counted.get_total_flops() / n


def product_flops(config: TrainConfig) -> dict[str, float]:
    """Floating-point operations of the matrix products and convolutions per env-step (all seeds), in collection
    (``"collect"``) and in the PPO update (``"update"``), counted by torch's ``FlopCounterMode`` on small eager
    CPU twins of ``config`` (the same net, seeds, epochs, minibatch count and observation; max(8, minibatches)
    games). The update's count per env-step does not depend on the batch (the actor head runs on a fixed share
    of the entries); collection's is c + b / T (the bootstrap value after the last of T steps), so two twins
    (T = 8, 16) give c and b, evaluated at ``config.num_steps``. A captured recurrent update runs the GRU over
    K + 1 segments (``nets.recurrent.gru_bounded``), which the eager twins' count leaves out."""
    c8, update = _twin_flops(config, 8, update=True)
    c16, _ = _twin_flops(config, 16, update=False)
    b = (c8 - c16) / (1 / 8 - 1 / 16)
    return {"collect": c16 - b / 16 + b / config.num_steps, "update": update}


def bench_learner(
    config: TrainConfig,
    updates: int = 2,
    warmup: int = 1,
    profile_top: int = 0,
    count_flops: bool = False,
    net: ActorCritic | None = None,
) -> dict[str, Any]:
    """Env-steps/s (all seeds) of ``updates`` timed updates after ``warmup`` ones, the setup seconds (build +
    warm-up; ``setup_phase_s``: apart, ``warmed_learner``), the modes that ran and the last update's mean
    return; ``profile_top`` > 0: also the ``profile_top`` most expensive operators of one more update
    (``profile_step``) and where its time went by kind (``kernel_classes``); ``count_flops``: also the
    products' FLOP per env-step (``product_flops``) and their rate in the timed update's phases
    (``product_tflop_s``: FLOP per update / the phase's seconds / 1e12; self-play's net: not counted with
    ``net``, other-play's or discovery's)."""
    learner, m, setup, setup_phases = warmed_learner(config, warmup, net)
    t1, c1 = time.perf_counter(), time.process_time()
    for _ in range(updates):
        m = learner.train_step()
    _sync(config.device)
    seconds, cpu = time.perf_counter() - t1, time.process_time() - c1
    steps = updates * config.steps_per_update * len(config.seeds)
    phases: dict[str, float] = {}
    learner.train_step(timings=phases)  # one more, its phases timed apart
    fast = learner.fast
    profiled: dict[str, Any] = {}
    if profile_top > 0:  # after the measurement: a profiler failure loses the profile, not the row
        try:
            rows = profile_step(learner)
            profiled["profile"], profiled["profile_classes"] = rows[:profile_top], kernel_classes(rows)
        except Exception as e:
            profiled["profile_error"] = f"{type(e).__name__}: {e}"[:300]
    if count_flops and net is None:  # after the measurement too: a failed count loses the count, not the row
        try:
            per = product_flops(config)
        except Exception as e:
            profiled["product_flops_error"] = f"{type(e).__name__}: {e}"[:300]
        else:
            profiled["product_flop_per_env_step"] = per
            profiled["product_tflop_s"] = {
                k: per[k] * config.steps_per_update * len(config.seeds) / phases[k] / 1e12
                for k in per
                if phases.get(k)
            }
    return {
        "env": config.env,
        "num_envs": config.num_envs,
        "num_steps": config.num_steps,
        "minibatches": config.minibatches,
        "collector": config.collector,
        "collect_mode": fast.mode if fast is not None else "eager",
        "update_mode": learner.updater.mode,
        "bf16_gradients": learner.bf16_gradients,
        "int8_inputs": learner.int8_inputs,
        "freed_memory_kept": freed_memory_kept(),
        "updates": updates,
        "seconds": seconds,
        "setup_s": setup,
        "setup_phase_s": setup_phases,
        "precompile": learner.await_precompile(),  # the update's helper compilation (None: none ran)
        "env_steps_per_s": steps / seconds,
        "cores_used": cpu / seconds,
        "phase_s": phases,
        "return": m.get("return"),
        **profiled,
    }


#: ``kernel_classes``' classes of profiled kernels (CUDA) or operators (CPU), by name, checked in order: the
#: products (cuBLAS / CUTLASS kernels, inductor's Triton GEMM templates, aten's product ops on CPU), inductor's
#: fused pointwise and reduction kernels, aten's own kernels, copies
KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "gemm",
        re.compile(
            r"gemm|gemv|cutlass|xmma|nvjet|splitKreduce|triton_tem|aten::(b|add|baddb)?mm\b|aten::(matmul|linear)\b",
            re.I,
        ),
    ),
    # on CPU inductor's kernels run inside its compiled graphs' calls, which the profiler lists by graph
    ("fused", re.compile(r"^(triton_(poi|red|per)|cpp_fused|## Call CompiledFxGraph)")),
    ("copy", re.compile(r"memcpy|memset|aten::copy_", re.I)),
    ("aten", re.compile(r"at::native|^aten::")),
)


def profile_step(learner: Learner) -> list[dict[str, Any]]:
    """One more update of ``learner`` (collect, GAE, PPO) under ``torch.profiler``: every entry (CUDA: the
    kernels, including those a captured graph replays where CUPTI reports them, and the CPU's operators) with
    its name, device type, calls and self milliseconds on the CPU and the device, most expensive first (by
    device time on CUDA, else CPU time)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = learner.env.device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities) as prof:
        learner.train_step()
        _sync(str(learner.env.device))
    rows = [
        {
            "name": e.key,
            "device_type": str(e.device_type).rsplit(".", 1)[-1].lower(),
            "calls": e.count,
            "self_cpu_ms": e.self_cpu_time_total / 1e3,
            "self_device_ms": e.self_device_time_total / 1e3,
        }
        for e in prof.key_averages()
    ]
    rows.sort(key=lambda r: r["self_device_ms" if cuda else "self_cpu_ms"], reverse=True)
    return rows


def profile_update(learner: Learner, top: int = 25) -> list[dict[str, Any]]:
    """The ``top`` most expensive entries of ``profile_step``."""
    if top < 1:
        raise ValueError(f"profile_update: top must be >= 1, got {top}")
    return profile_step(learner)[:top]


def kernel_classes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where a profiled update's time went, by ``KERNEL_CLASSES`` ("other": the rest): the device kernels' self
    milliseconds where any ran on a device (an operator's device time is its kernels', counted once), else the
    CPU operators' self milliseconds; with each class's share of the total."""
    device = [r for r in rows if r.get("device_type") not in (None, "cpu")]
    basis, key = ("device kernels", "self_device_ms") if device else ("cpu operators", "self_cpu_ms")
    ms = {name: 0.0 for name, _ in KERNEL_CLASSES} | {"other": 0.0}
    for r in device or rows:
        kind = next((name for name, pattern in KERNEL_CLASSES if pattern.search(r["name"])), "other")
        ms[kind] += r[key]
    total = sum(ms.values())
    share = {k: (v / total if total > 0 else 0.0) for k, v in ms.items()}
    return {"basis": basis, "ms": ms, "share": share}


def bench_pair(config: TrainConfig, updates: int = 2, warmup: int = 1) -> dict[str, Any]:
    """The fast learner and the baseline (``BASELINE``) on the same config, in this process; their ratio."""
    fast = bench_learner(config, updates, warmup)
    base = bench_learner(config.replace(**BASELINE), updates, warmup)
    return {"fast": fast, "baseline": base, "ratio": fast["env_steps_per_s"] / base["env_steps_per_s"]}


def bench_anchor(
    script: Path,
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 600,
    cpus: set[int] | None = None,
) -> dict[str, Any]:
    """Run a JAX anchor learner (``python script *args``) in its own process; its JSON lines, the last
    env-steps/s it reported (``env_steps_per_s``), its wall seconds and the cores it kept busy on average
    (``cores_used``: its CPU seconds over its wall seconds). ``cpus`` pins the process to those CPUs before it
    starts: XLA's CPU runtime runs its own threads whatever ``XLA_FLAGS`` say (measured here: 1.65 cores of
    two with ``intra_op_parallelism_threads=1``), so a one-thread comparison must pin it. Errors are
    reported, not raised."""
    pinned = None if cpus is None else available_cpus(cpus)
    cmd = [sys.executable, str(script), *args]
    if (
        pinned is not None
    ):  # pinned in the child before the script runs (no preexec_fn beside torch's threads)
        pin = f"import os, runpy, sys; os.sched_setaffinity(0, {pinned}); sys.argv = sys.argv[1:]; "
        cmd = [sys.executable, "-c", pin + "runpy.run_path(sys.argv[0], run_name='__main__')", *cmd[1:]]
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(
            cmd,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "wall_s": time.perf_counter() - t0}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - t0
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    rates = [  # a final summary's rate after compilation, else the last finite rate reported
        x.get("env_steps_per_s_after_compile", x.get("env_steps_per_s")) for x in lines if isinstance(x, dict)
    ]
    rates = [r for r in rates if isinstance(r, (int, float)) and not math.isnan(r) and r > 0]
    out: dict[str, Any] = {"wall_s": wall, "cores_used": cpu / wall, "lines": lines[-3:]}
    if pinned is not None:
        out["cpus"] = pinned
    if proc.returncode != 0 or not rates:
        out["error"] = (
            f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ['no rate reported']}"
        )
    if rates:
        out["env_steps_per_s"] = rates[-1]
    return out


def bench_anchors(
    script: Path, arg_sets: list[list[str]], env: dict[str, str] | None = None, timeout: float = 600
) -> dict[str, Any]:
    """``bench_anchor`` of each argument list at once, one process each (e.g. one seed each, sharing a GPU):
    ``runs`` in the order given, each without ``cores_used`` (the children's CPU time cannot be told apart),
    and ``cores_used`` of all of them together over the wall time of the whole batch."""
    from concurrent.futures import ThreadPoolExecutor

    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with ThreadPoolExecutor(max_workers=max(1, len(arg_sets))) as pool:
        runs = list(pool.map(lambda args: bench_anchor(script, args, env=env, timeout=timeout), arg_sets))
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - t0
    for r in runs:
        r.pop("cores_used", None)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"runs": runs, "wall_s": wall, "cores_used": cpu / wall}


def cold_setup(
    config: TrainConfig, cache_dir: Path, threads: int = 1, timeout: float = 900
) -> dict[str, Any]:
    """The setup of a learner of ``config`` built in a fresh process whose inductor caches start empty in
    ``cache_dir`` (what a first run on a machine pays): ``setup_s``, ``setup_phase_s`` and the helper's report
    (``precompile``, ``train.precompile``), from ``setup_here`` run by ``bench.runner.reference_in_subprocess``;
    ``threads`` torch threads. Errors are reported, not raised."""
    kwargs = {"config": config.to_json(), "threads": int(threads)}
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    return reference_in_subprocess("train", "setup_here", kwargs, timeout, env)


def setup_here(config: dict[str, Any], threads: int) -> dict[str, Any]:
    """``cold_setup``'s child: ``warmed_learner`` of the ``config`` (``TrainConfig`` JSON) with ``threads`` torch
    threads; its setup seconds, their split and the helper's report."""
    torch.set_num_threads(threads)
    learner, _, setup, phases = warmed_learner(TrainConfig.from_json(config))
    return {"setup_s": setup, "setup_phase_s": phases, "precompile": learner.await_precompile()}


def bench_apart(
    config: TrainConfig, updates: int = 2, warmup: int = 1, threads: int = 1, timeout: float = 1800
) -> dict[str, Any]:
    """``bench_learner`` of ``config`` in a fresh process (``bench_here`` run by ``reference_in_subprocess``)
    with ``threads`` torch threads, so process-wide settings (``TrainConfig.keep_cpu_memory``: glibc's malloc
    for the rest of the process) start from the defaults; the row also carries the child's user and system CPU
    seconds (``user_s``, ``system_s``). Errors are reported, not raised."""
    kwargs = {"config": config.to_json(), "threads": int(threads), "updates": updates, "warmup": warmup}
    return reference_in_subprocess("train", "bench_here", kwargs, timeout)


def bench_here(config: dict[str, Any], threads: int, updates: int, warmup: int) -> dict[str, Any]:
    """``bench_apart``'s child: ``bench_learner`` of the ``config`` (``TrainConfig`` JSON) with ``threads`` torch
    threads, and this process's user and system CPU seconds."""
    torch.set_num_threads(threads)
    row = bench_learner(TrainConfig.from_json(config), updates=updates, warmup=warmup)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {**row, "user_s": usage.ru_utime, "system_s": usage.ru_stime}
