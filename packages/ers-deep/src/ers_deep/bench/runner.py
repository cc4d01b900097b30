"""The timed loop of the env benchmarks in every mode of ``ers_deep.accel``, and references in their own process.

``random_legal_runner(env, mode, unroll)`` returns ``run(n)``: n batched steps of uniformly random legal
moves (``accel.RandomLegal``, drawn inside the loop) with auto-reset. ``"eager"`` calls ``env.step`` per
step (the reference); the other modes run a ``FastRollout`` of ``unroll`` steps per call with nothing
recorded (``unroll`` 1: the captured step with its action draw; more: a k-step graph, as a collector runs).

``reference_in_subprocess`` runs a reference benchmark (JaxMARL) in a fresh interpreter: JAX and torch then
do not share a process (nor, on a GPU, an allocator: ``XLA_PYTHON_CLIENT_PREALLOCATE=false``). Its ``cpus``
pins that process to those CPUs before anything is imported: XLA's CPU runtime runs its own thread pool whatever
its flags say (~1.7-2 of this machine's 2 cores for JaxMARL's envs), so an ers side on one torch thread is
compared with a reference on one core only when the reference is pinned (``one_core()``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from typing import Any

from ers_deep.accel import FastRollout, RandomLegal, resolve_mode
from ers_deep.envs.base import BatchedEnv


def random_legal_runner(
    env: BatchedEnv, mode: str = "eager", unroll: int = 1, seed: int = 0, observe: bool = True
) -> tuple[Callable[[int], None], dict[str, Any]]:
    """``run(n)`` (n rounded up to a multiple of ``unroll`` in the fast modes) and how it runs: the resolved
    mode, the unroll and the seconds spent building it (compilation and capture happen at the first call,
    which this function makes). ``observe=False`` (fast modes): the state-only step."""
    actor, resolved = RandomLegal(env, seed + 1), resolve_mode(mode, env)
    t0 = time.perf_counter()
    if resolved == "eager":
        legal = env.legal_mask()

        def run(n: int) -> None:
            nonlocal legal
            for _ in range(n):
                out = env.step(actor.sample(legal))
                legal = out.legal if hasattr(out, "legal") else legal

        unroll = 1
    else:
        roll = FastRollout(env, actor, unroll, mode=mode, record=(), observe=observe)
        roll()  # compile and/or capture
        roll()  # compile mode: the state the compiled step returns may differ in strides (one recompile)
        resolved = roll.mode  # a compiled mode chosen by "auto" may have fallen back

        def run(n: int) -> None:
            for _ in range(math.ceil(n / unroll)):
                roll()

    return run, {"mode": resolved, "unroll": unroll, "setup_seconds": time.perf_counter() - t0}


#: the environment variable that carries ``reference_in_subprocess``'s ``cpus`` to the child
CPUS_VARIABLE = "ERS_BENCH_CPUS"


def one_core() -> set[int]:
    """One CPU this process may run on (the highest numbered): where a reference runs beside a one-thread side."""
    return {max(os.sched_getaffinity(0))}


def available_cpus(cpus: Collection[int]) -> list[int]:
    """``cpus`` sorted, when each is one this process may run on (a reference process is pinned to them), else a
    :class:`ValueError`."""
    pinned = sorted({int(c) for c in cpus})
    if not pinned or not set(pinned) <= os.sched_getaffinity(0):
        raise ValueError(
            f"cpus {pinned} are not all available to this process (a non-empty subset of its CPUs)"
        )
    return pinned


def reference_in_subprocess(
    module: str,
    function: str,
    kwargs: dict[str, Any],
    timeout: float = 900,
    env: dict[str, str] | None = None,
    cpus: Collection[int] | None = None,
) -> dict[str, Any]:
    """``ers_deep.bench.<module>.<function>(**kwargs)`` run by ``bench.runner.main`` in a fresh
    process (``env``: more environment variables for it; ``cpus``: the CPUs it is pinned to, recorded in the
    result as ``cpus``); its JSON result, or ``{"error": ...}`` with the end of its stderr when it fails."""
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", **(env or {})}
    env.pop(CPUS_VARIABLE, None)
    if cpus is not None:
        pinned = available_cpus(cpus)
        env[CPUS_VARIABLE] = ",".join(map(str, pinned))
    cmd = [sys.executable, *child_arguments(module, function, kwargs)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"{module}.{function} did not finish in {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": f"{module}.{function} failed: {done.stderr.strip()[-800:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if cpus is not None:
        result["cpus"] = pinned
    return result


def process_cpus() -> dict[str, Any]:
    """The CPUs this process may run on (what ``reference_in_subprocess``'s ``cpus`` pins a child to)."""
    return {"affinity": sorted(os.sched_getaffinity(0))}


def child_arguments(module: str, function: str, kwargs: dict[str, Any]) -> list[str]:
    """The interpreter's arguments that run ``ers_deep.bench.<module>.<function>(**kwargs)`` in a child
    (``reference_in_subprocess``). Not ``-m ers_deep.bench.runner``: the package imports this module, so runpy
    would run a second copy of it as ``__main__`` (and warn that it found it in ``sys.modules``)."""
    code = "import sys; from ers_deep.bench.runner import main; main(sys.argv[1:])"
    return ["-c", code, module, function, json.dumps(kwargs)]


def main(argv: list[str]) -> None:
    """A child's entry: ``argv`` is (module, function, JSON keyword arguments); prints the JSON result."""
    import importlib

    if os.environ.get(CPUS_VARIABLE):  # pinned before the reference (and its thread pools) start
        os.sched_setaffinity(0, {int(c) for c in os.environ[CPUS_VARIABLE].split(",")})
    module, function, kwargs = argv
    fn = getattr(importlib.import_module(f"ers_deep.bench.{module}"), function)
    print(json.dumps(fn(**json.loads(kwargs))))


if __name__ == "__main__":
    main(sys.argv[1:])
