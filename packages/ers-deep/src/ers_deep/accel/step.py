"""``FastStep``: the env's auto-resetting step with given actions, compiled and/or captured as a CUDA graph."""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ers_deep.accel.capture import (
    Mode,
    StaticState,
    actual_mode,
    capture,
    compile_fn,
    require_branch_free,
    resolve_mode,
    state_tensors,
)
from ers_deep.envs.base import BatchedEnv, Step


def own_code(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` rebound to a copy of its function with a code object of its own. torch.compile keeps the
    variants it compiled (at most ``recompile_limit``, 8, with ``fullgraph`` a hard error beyond) per code
    object; without the copy every env of a process (each batch size, each config) would share one budget."""
    fn = method.__func__  # type: ignore[attr-defined]
    copy = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    return types.MethodType(copy, method.__self__)  # type: ignore[attr-defined]


class Stepper:
    """One branch-free step of ``env.state`` (rebinding its fields; no copy into static buffers) for the fast
    path ``mode`` (``"auto"``: ``resolve_mode``): the noise drawn from the env's generator, then
    ``env.step_state``, compiled in the compiled modes (the building block of every mode; capturing is the
    caller's). A compiled mode chosen by ``"auto"`` falls back to eager stepping if compilation fails. In eager
    mode an env that is not branch-free (the CPU default: index-based resets, a tabular env's multinomial draws)
    is stepped by ``env.step``."""

    def __init__(self, env: BatchedEnv, mode: str = "auto", observe: bool = True) -> None:
        resolved = resolve_mode(mode, env)
        #: an eager stepper of an env that is not branch-free (the CPU default) runs ``env.step``
        self.plain = resolved == "eager" and not getattr(env, "branch_free", False)
        if self.plain and not observe:
            raise ValueError(f"observe=False needs a branch-free {type(env).__name__} (its step_state)")
        if not self.plain:
            require_branch_free(env)
        self.env, self.state_type = env, type(env.state)
        self.captures = resolved.endswith("graph")  # the caller records a CUDA graph
        self.compiled, self.fallback, self.observe = resolved.startswith("compile"), mode == "auto", observe
        self.fn: Callable[..., tuple[dict[str, Tensor], Any]] = (
            compile_fn(own_code(self.pure)) if self.compiled else self.pure
        )

    @property
    def mode(self) -> Mode:
        """The mode it runs in (after a fallback from a failed compilation: the uncompiled twin)."""
        return actual_mode(self.captures, self.compiled)

    def pure(
        self, state: dict[str, Tensor], actions: Tensor, noise: dict[str, Tensor]
    ) -> tuple[dict[str, Tensor], Any]:
        """(next state's tensors, step output) of ``state`` under ``actions`` and ``noise`` (the traced function)."""
        s = self.state_type(**state)
        out = self.env.step_state(s, actions, noise, observe=self.observe)  # type: ignore[attr-defined]
        return state_tensors(s), out

    def __call__(self, actions: Tensor) -> Any:
        env = self.env
        if self.plain:
            return env.step(actions)
        noise = env.draw_noise()  # type: ignore[attr-defined]
        try:
            new, out = self.fn(state_tensors(env.state), actions, noise)
        except Exception as e:  # compilation failed: nothing ran yet, so the eager step can redo it exactly
            if not (self.compiled and self.fallback):
                raise
            warnings.warn(f"torch.compile failed ({type(e).__name__}: {e}); stepping eagerly", stacklevel=2)
            self.fn, self.compiled, self.fallback = self.pure, False, False
            new, out = self.fn(state_tensors(env.state), actions, noise)
        self.fallback = False  # the first call compiled: later failures are real errors
        for k, v in new.items():
            setattr(env.state, k, v)
        return out


class FastStep:
    """``fast(actions)``: one auto-resetting step of ``env`` (``env.state`` advances) through the fast path
    ``mode`` (``ers_deep.accel``; ``"auto"``: ``resolve_mode``). Returns the env's step output (Hanabi's
    ``HanabiStep``, Overcooked's ``OvercookedStep``), equal on every field to ``env.step(actions)`` of a twin
    env (same seed, ``branch_free=True``, tested).

    Graph modes capture at the first call (with that call's actions shape); after that a call copies the
    actions into a static buffer and replays. The outputs of a graph mode are static tensors that the next call
    rewrites: keep them with ``clone_outputs=True``. ``env.reset()`` between calls is fine (the new state is
    copied into the static buffers at the next call). Hanabi: the env's own legal-move cache (``env.step``'s
    check) is not refreshed; use the returned ``legal``. ``observe=False``: the state only (``obs`` empty)."""

    def __init__(
        self,
        env: BatchedEnv,
        mode: str = "auto",
        warmup: int = 2,
        clone_outputs: bool = False,
        observe: bool = True,
    ) -> None:
        self.env, self.stepper = env, Stepper(env, mode, observe)
        self.warmup, self.clone_outputs = warmup, clone_outputs
        self.graph: torch.cuda.CUDAGraph | None = None

    @property
    def mode(self) -> Mode:
        """The mode it runs in (after a fallback from a failed compilation: the uncompiled twin)."""
        return self.stepper.mode

    def __call__(self, actions: Tensor) -> Step:
        if not self.stepper.captures:
            return self.stepper(actions)
        if self.graph is None:
            self._capture(actions)
        elif self.static.replaced():
            self.static.adopt()
        self.actions.copy_(torch.as_tensor(actions, device=self.env.device))
        self.graph.replay()  # type: ignore[union-attr]
        out = self.out
        return type(out)(*(x.clone() for x in out)) if self.clone_outputs else out

    def _capture(self, actions: Tensor) -> None:
        self.static = StaticState(self.env)
        self.actions = torch.as_tensor(actions, device=self.env.device).clone()

        def body() -> Any:
            out = self.stepper(self.actions)
            self.static.write_back()
            return out

        self.graph, self.out = capture(body, lambda: self.static.tensors, [self.env.generator], self.warmup)
