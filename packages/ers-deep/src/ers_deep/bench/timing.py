"""The timing loop shared by the env benchmarks (best-of-n timings, a torch profile of ``run(steps)``) and the
JaxMARL helpers (an install check that imports nothing, a quiet import, a jitted ``lax.scan`` rollout timer) for
the reference columns.

Every bench module builds ``run(n)`` (n batched steps of its env, random actions drawn inside the loop) and
hands it to ``time_steps`` / ``profile_steps``; ``time_jax_rollout`` times JaxMARL the way PureJaxRL runs it.
Both report ``cores_used``: the process's CPU seconds over the wall seconds of the timed span (all threads).

JAX is imported only by ``import_jaxmarl_quietly`` and ``time_jax_rollout``, which run in the reference's own
process (``bench.runner.reference_in_subprocess``); the torch side asks ``jaxmarl_installed``, which finds the
package without importing it (an import of ``jaxmarl.environments`` starts JAX's backend: XLA's CPU thread
pool, and on a GPU machine its allocator).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(
    run: Callable[[int], None], steps: int, device: torch.device, warmup: int = 5, repeats: int = 1
) -> tuple[float, float]:
    """Seconds that ``run(steps)`` takes after ``run(warmup)``, the best of ``repeats`` timings (device synced),
    and the cores that timing kept busy (``cores_used``: CPU seconds of the process over wall seconds)."""
    run(warmup)
    _sync(device)

    def span() -> None:
        run(steps)
        _sync(device)

    return best_span(span, repeats)


def best_span(span: Callable[[], None], repeats: int = 1) -> tuple[float, float]:
    """The wall seconds of the fastest of ``repeats`` calls of ``span`` and the cores that call kept busy
    (``cores_used``: the process's CPU seconds over those wall seconds; every side of a benchmark reports it)."""
    seconds, cores = math.inf, math.nan
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        span()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < seconds:
            seconds, cores = wall, cpu / wall
    return seconds, cores


def throughput(
    batch: int, steps: int, seconds: float, device: torch.device, cores_used: float
) -> dict[str, Any]:
    """The fields every env benchmark reports: env-steps/s = batch * steps / seconds, and how it was run (torch's
    thread count, the cores the timed span kept busy)."""
    return {
        "env_steps_per_s": batch * steps / seconds,
        "seconds": seconds,
        "batch": batch,
        "steps": steps,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "cores_used": cores_used,
    }


def profile_steps(
    run: Callable[[int], None], steps: int, device: torch.device, top: int = 15
) -> list[dict[str, Any]]:
    """The ``top`` torch ops by self time (device time on CUDA) of ``run(steps)`` after ``run(3)``, per step,
    from ``torch.profiler``."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    run(3)
    _sync(device)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        run(steps)
        _sync(device)
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, attr), reverse=True)[:top]
    return [
        {
            "op": e.key,
            "calls_per_step": e.count / steps,
            "self_us_per_step": getattr(e, attr) / steps,
            "cpu_us_per_step": e.self_cpu_time_total / steps,
        }
        for e in events
    ]


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send file descriptor 1 to 2 for a while (jaxmarl's import prints a banner that would break ``--json``;
    it escapes ``contextlib.redirect_stdout``, so the redirection is at the descriptor level)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


#: what a reference column reports where jaxmarl is not installed
JAXMARL_MISSING = (
    "jaxmarl is not installed (the reference extra: pip install -e packages/ers-deep[reference])"
)


def jaxmarl_installed() -> bool:
    """Whether jaxmarl (the ``reference`` extra) is installed, found without importing it (nor JAX): the torch
    process asks this, and the reference runs in its own process (``bench.runner``)."""
    return importlib.util.find_spec("jaxmarl") is not None


def import_jaxmarl_quietly() -> bool:
    """Whether jaxmarl imports; imports it with its banner kept off stdout. For the reference's own process
    only: it starts JAX's backend in the caller."""
    try:
        with _stdout_to_stderr():
            import jaxmarl.environments  # noqa: F401
    except ImportError:
        return False
    return True


def time_jax_rollout(
    one_step: Any, carry: Any, batch: int, steps: int, scan_length: int = 128, repeats: int = 1
) -> dict[str, Any]:
    """Env-steps/s of a jitted ``lax.scan`` of ``one_step`` (carry -> (carry, None)) over ``scan_length`` steps per
    call, as PureJaxRL runs a JaxMARL env, for at least ``steps`` steps; compile time is excluded. With
    ``repeats`` > 1 the best of that many timings (the usual defence against a noisy shared machine), and the
    cores it kept busy (``cores_used``: XLA's CPU runtime runs its own threads)."""
    import jax

    @jax.jit
    def rollout(carry: Any) -> Any:
        return jax.lax.scan(one_step, carry, None, length=scan_length)[0]

    carry = jax.block_until_ready(rollout(carry))  # compile
    carry = jax.block_until_ready(
        rollout(carry)
    )  # a carried state may retrace once (weak types): warm that too
    calls = max(1, math.ceil(steps / scan_length))

    def span() -> None:
        nonlocal carry
        for _ in range(calls):
            carry = rollout(carry)
        jax.block_until_ready(carry)

    seconds, cores = best_span(span, repeats)
    return {
        "env_steps_per_s": batch * calls * scan_length / seconds,
        "seconds": seconds,
        "batch": batch,
        "steps": calls * scan_length,
        "cores_used": cores,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }
