"""Static buffers and CUDA-graph capture shared by ``FastStep`` and ``FastRollout``.

A CUDA graph replays fixed kernels on fixed memory. So the env state lives in *static* tensors: the captured
body reads them, computes the next state (new tensors, from the graph's private memory pool) and copies every
rebound field back into its static tensor (``write_back``), and the body's outputs are the pool tensors it
returned during capture, rewritten by every replay. Capture runs no kernel; before it the body runs
``warmup`` times on a side stream (lazy initialisations, cuBLAS workspaces, compilation), after which the
state, the carried buffers and the generators are restored from a snapshot, so the first replay is the first
step taken.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass
from typing import Any, Literal, TypeVar, get_args

import torch
from torch import Tensor

from ers_exact.util.options import UsageError

Mode = Literal["eager", "compile", "graph", "compile-graph"]
MODES: tuple[str, ...] = get_args(Mode)
T = TypeVar("T")

#: CPU batch sizes up to which ``"auto"`` compiles the step, per env class (measured with ``ers-deep env-bench
#: --threads 1`` on the 2-core development machine: compiled / eager env-steps/s, Hanabi 2.4x at 1, 1.9x at 4,
#: 1.3x at 16, 1.0x at 32, 0.7x at 64; Overcooked V2 4.7x at 1, 3.2x at 64, 2.2x at 256, 1.8x at 512,
#: 0.66x at 1024, 0.35x at 4096; ``benchmarks/test_accel_bench.py`` keeps measuring it)
CPU_COMPILE_MAX_BATCH = {"HanabiEnv": 16, "OvercookedV2Env": 512}

#: env classes that ``"auto"`` steps eagerly on every device: a tabular game's step is a dozen small tensor ops
#: over runs of a few hundred thousand steps, where compiling (10-40 s) was never measured to pay; its
#: ``compile`` and graph modes are there when asked for
AUTO_EAGER = frozenset({"TabularEnv"})


def resolve_mode(mode: str, env: Any) -> Mode:
    """``mode``, with ``"auto"`` resolved: ``"eager"`` for an env without a branch-free ``step_state`` and for
    the classes of ``AUTO_EAGER`` (tabular games); ``"compile-graph"`` on CUDA; on CPU ``"compile"`` up to the
    measured batch size of ``CPU_COMPILE_MAX_BATCH`` and ``"eager"`` above it. (A compiled mode chosen by
    ``"auto"`` falls back to its uncompiled twin, with a warning, when compilation fails.) Graph modes need a
    CUDA env."""
    if mode == "auto":
        if not hasattr(env, "step_state") or type(env).__name__ in AUTO_EAGER:
            return "eager"
        if env.device.type == "cuda":
            return "compile-graph"
        limit = CPU_COMPILE_MAX_BATCH.get(type(env).__name__, 0)
        return "compile" if env.batch_size <= limit else "eager"
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; choose from auto, {', '.join(MODES)}")
    if mode.endswith("graph") and env.device.type != "cuda":
        raise UsageError(
            f"mode {mode!r} captures a CUDA graph: it needs an env on a CUDA device, not {env.device}"
        )
    return mode  # type: ignore[return-value]


def actual_mode(graph: bool, compiled: bool) -> Mode:
    """The mode name of a fast path that captures a graph or not and compiles or not."""
    if graph:
        return "compile-graph" if compiled else "graph"
    return "compile" if compiled else "eager"


def require_branch_free(env: Any) -> None:
    """The fast paths run ``env.step_state``: the env must be branch-free and its step sync-free."""
    if not hasattr(env, "step_state"):
        raise UsageError(
            f"{type(env).__name__} has no branch-free step_state: only the eager mode steps it "
            "(collect mode eager or auto)"
        )
    if not getattr(env, "branch_free", False):
        raise UsageError(
            f"{type(env).__name__} must be built with branch_free=True (the default off CPU) for a fast step"
        )
    if getattr(env, "check_legal", False):
        raise UsageError(
            f"{type(env).__name__} checks moves on every step (a device sync): build it with check_legal=False"
        )


def state_tensors(state: Any) -> dict[str, Tensor]:
    """The tensors of a dataclass state, by field name."""
    if not is_dataclass(state):
        raise TypeError(f"expected a dataclass env state, got {type(state).__name__}")
    return {f.name: getattr(state, f.name) for f in fields(state)}


def write_back(state: Any, static: dict[str, Tensor]) -> None:
    """Copy every field of ``state`` that was rebound into its static tensor, and rebind it to that tensor.

    A rebound field may *be* another field's static tensor (Hanabi's step sets ``last_player = cur`` before
    rebinding ``cur``), so sources that share memory with a static tensor are cloned before any copy."""
    storages = {v.untyped_storage().data_ptr() for v in static.values()}
    pending = {}
    for name, buf in static.items():
        cur = getattr(state, name)
        if cur is not buf:
            pending[name] = cur.clone() if cur.untyped_storage().data_ptr() in storages else cur
    for name, cur in pending.items():
        static[name].copy_(cur)
        setattr(state, name, static[name])


def copy_into(dst: dict[str, Tensor], src: dict[str, Tensor]) -> None:
    """``dst[k].copy_(src[k])`` for every key of ``dst``."""
    for k, v in dst.items():
        v.copy_(src[k])


class StaticState:
    """``env.state`` held in static tensors, what a captured graph reads and writes: bound at construction (the
    current state cloned into them); ``write_back`` at the end of the captured body; ``adopt`` when
    ``env.state`` was replaced (``env.reset()``) between replays."""

    def __init__(self, env: Any) -> None:
        env.state = type(env.state)(**{k: v.clone() for k, v in state_tensors(env.state).items()})
        self.env, self.tensors = env, state_tensors(env.state)

    def replaced(self) -> bool:
        """Whether ``env.state`` was replaced since it was bound to the static tensors."""
        return any(getattr(self.env.state, k) is not v for k, v in self.tensors.items())

    def adopt(self) -> None:
        """Copy a replaced ``env.state`` into the static tensors and bind ``env.state`` to them again."""
        copy_into(self.tensors, state_tensors(self.env.state))
        self.env.state = type(self.env.state)(**self.tensors)

    def write_back(self) -> None:
        """``write_back`` of ``env.state`` into the static tensors."""
        write_back(self.env.state, self.tensors)


class Snapshot:
    """The values of some static tensors and generator states, to restore after a warm-up."""

    def __init__(self, tensors: dict[str, Tensor], generators: Sequence[torch.Generator]) -> None:
        self.tensors = {k: v.clone() for k, v in tensors.items()}
        self.generators = [(g, g.get_state()) for g in generators]

    def restore(self, tensors: dict[str, Tensor]) -> None:
        copy_into(tensors, self.tensors)
        for g, s in self.generators:
            g.set_state(s)


def capture(
    body: Callable[[], T],
    static: Callable[[], dict[str, Tensor]],
    generators: Sequence[torch.Generator],
    warmup: int = 2,
) -> tuple[torch.cuda.CUDAGraph, T]:
    """Record ``body`` as a CUDA graph: warm it up ``warmup`` times on a side stream, restore the tensors
    of ``static()`` and the ``generators`` from before the warm-up, then capture (the generators registered,
    so replays advance them as eager calls would). Returns the graph and the body's static outputs. The
    streams and the capture are on the static tensors' device, whichever CUDA device is current (a learner on
    ``cuda:1`` would otherwise warm up and capture on the current device's streams, while its kernels run on
    device 1's); a replay runs on the device it was captured on."""
    tensors = static()
    snap = Snapshot(tensors, generators)
    device = next((t.device for t in tensors.values() if t.is_cuda), None)
    with torch.cuda.device(device) if device is not None else contextlib.nullcontext():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        snap.restore(static())
        graph = torch.cuda.CUDAGraph()
        for g in generators:
            graph.register_generator_state(g)
        with torch.cuda.graph(graph):
            out = body()
    return graph, out


def compile_fn(fn: Callable[..., T]) -> Callable[..., T]:
    """``torch.compile`` as the fast paths use it: the whole function as one graph (a graph break is an
    error, not a silent slowdown), shapes static (one compilation per batch size)."""
    return torch.compile(fn, fullgraph=True, dynamic=False)
