"""The graph modes' bookkeeping on CPU, with the CUDA graph emulated: static state and carry buffers, the action
buffer, outputs rewritten in place by every replay, the warm-up undone (state, carry and generators restored),
resets between replays. The emulated capture runs the body once for its output tensors and undoes that run (a
real capture runs no kernel); a replay runs the body and copies its results into those tensors (a real replay
rewrites them in place). What only a GPU can check (the recorded kernels, registered generators) is in
``test_gpu.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from torch import Tensor

from ers_deep.accel import FastStep
from ers_deep.accel import rollout as rollout_module
from ers_deep.accel import step as step_module
from ers_deep.accel.capture import Snapshot
from tests.deep.accel.twins import check_fast_rollout, check_fast_step, check_rollout_sees_reset, make_env
from tests.deep.threads import one_thread  # noqa: F401


def _copy(dst: Any, src: Any) -> None:
    pairs = zip(dst, src) if isinstance(dst, tuple) else ((dst[k], src[k]) for k in dst)
    for d, s in pairs:
        assert isinstance(d, Tensor)
        d.copy_(s)


class EmulatedGraph:
    def __init__(self, body: Callable[[], Any], out: Any) -> None:
        self.body, self.out, self.replays = body, out, 0

    def replay(self) -> None:
        _copy(self.out, self.body())
        self.replays += 1


def emulated_capture(
    body: Callable[[], Any],
    static: Callable[[], dict[str, Tensor]],
    generators: Sequence[torch.Generator],
    warmup: int = 2,
) -> tuple[EmulatedGraph, Any]:
    snap = Snapshot(static(), generators)
    for _ in range(warmup):
        body()
    snap.restore(static())
    out = body()  # the output tensors of the "capture" ...
    snap.restore(static())  # ... whose run is undone
    return EmulatedGraph(body, out), out


@pytest.fixture(autouse=True)
def emulated_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (step_module, rollout_module):
        monkeypatch.setattr(module, "capture", emulated_capture)
    monkeypatch.setattr(step_module, "resolve_mode", lambda mode, env: mode)  # graph modes on a CPU env


ENVS = [("hanabi", {"preset": "Hanabi-Very-Small"}), ("overcooked-v2", {"max_steps": 9}), ("tabular", {})]


@pytest.mark.parametrize("mode", ["graph", "compile-graph"])
@pytest.mark.parametrize("name, kw", ENVS)
def test_emulated_graph_step_equals_eager_step(name: str, kw: dict, mode: str) -> None:
    assert check_fast_step(name, batch=16, steps=40, device="cpu", mode=mode, **kw) >= 16


@pytest.mark.parametrize("actor", ["random", "policy"])
@pytest.mark.parametrize("name, kw", ENVS)
def test_emulated_graph_rollout_equals_eager_steps(name: str, kw: dict, actor: str) -> None:
    check_fast_rollout(name, batch=8, k=4, calls=3, device="cpu", mode="graph", actor=actor, **kw)


def test_emulated_replays_reuse_their_outputs_and_see_resets() -> None:
    env, twin = make_env("hanabi", 8, "cpu"), make_env("hanabi", 8, "cpu")
    fast = FastStep(env, mode="graph")
    moves = torch.full((8,), 5)  # play slot 0: always legal
    first = fast(moves)
    assert torch.equal(first.obs, twin.step(moves).obs)
    second = fast(moves)
    assert second.obs is first.obs  # static outputs, rewritten by the replay
    twin.step(moves)
    env.reset(seed=3), twin.reset(seed=3)
    assert torch.equal(fast(moves).obs, twin.step(moves).obs) and torch.equal(env.state.deck, twin.state.deck)
    check_rollout_sees_reset("overcooked-v2", 8, "cpu", "graph")
