"""The fused GRU over reset-split segments (``nets.recurrent.gru_segments``) equals the step loop
(``gru_steps``): all states, the last state and the gradients, for any pattern of resets, padded and packed,
on the CPU (and on CUDA, marker ``gpu``, cuDNN); the whole Overcooked net equals both ways."""

from __future__ import annotations

import contextlib
from contextlib import nullcontext
from functools import partial

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import NetConfig, NetState, build_net
from ers_deep.nets.actor_critic import RecurrentCNN
from ers_deep.nets.layers import SGRUCell
from ers_deep.nets.recurrent import gru_bounded, gru_segments, gru_steps, split_segments

from .gru_cases import cell as _cell
from .gru_cases import grads as _grads
from .gru_cases import inputs as _inputs
from .gru_cases import pattern as _pattern

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")],
    ),
]


def _fp32(device: str) -> contextlib.AbstractContextManager[None]:
    """cuDNN's GRU runs in TF32 by default (torch.backends.cudnn.allow_tf32): ~1e-3 from the loop's fp32."""
    return torch.backends.cudnn.flags(enabled=True, allow_tf32=False) if device == "cuda" else nullcontext()


def _check(cell: SGRUCell, first: torch.Tensor, packed: bool | None, seed: int = 0) -> None:
    x, h0 = _inputs(first, seed)
    ys, h, g = _grads(gru_steps, cell, x, first, h0)
    ys2, h2, g2 = _grads(partial(gru_segments, packed=packed), cell, x, first, h0)
    assert ys2.shape == ys.shape and h2.shape == h.shape
    assert torch.allclose(ys2, ys, atol=1e-5, rtol=0) and torch.allclose(h2, h, atol=1e-5, rtol=0)
    for a, b in zip(g, g2, strict=True):
        assert torch.allclose(b, a, rtol=1e-4, atol=1e-5 * a.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("packed", [False, True, None])
@pytest.mark.parametrize("S", [1, 2])
@pytest.mark.parametrize("pattern", ["none", "all", "at t=0", "mixed", "long+short", "random"])
def test_fused_equals_the_step_loop(pattern: str, S: int, packed: bool | None, device: str) -> None:
    with _fp32(device):
        _check(_cell(S, device), _pattern(pattern, S, 16, 4).to(device), packed)


@settings(max_examples=25, deadline=None)
@given(
    S=st.integers(1, 2),
    T=st.integers(1, 12),
    N=st.integers(1, 4),
    packed=st.sampled_from([False, True, None]),
    data=st.data(),
)
def test_fused_equals_the_step_loop_for_any_resets(
    S: int, T: int, N: int, packed: bool | None, data: st.DataObject
) -> None:
    bits = data.draw(st.lists(st.booleans(), min_size=S * T * N, max_size=S * T * N))
    _check(_cell(S), torch.tensor(bits).view(S, T, N), packed)


@settings(max_examples=25, deadline=None)
@given(
    S=st.integers(1, 2),
    T=st.integers(1, 12),
    N=st.integers(1, 4),
    K=st.integers(0, 3),
    data=st.data(),
)
def test_bounded_equals_the_step_loop_within_its_bound(
    S: int, T: int, N: int, K: int, data: st.DataObject
) -> None:
    """``gru_bounded`` (fixed shapes, at most K resets after t = 0 per actor) equals the step loop: states,
    last state, gradients; the reset at t = 0 is free."""
    first = torch.zeros(S, T, N, dtype=torch.bool)
    for s in range(S):
        for n in range(N):
            first[s, 0, n] = data.draw(st.booleans())
            if T > 1:
                for t in data.draw(st.lists(st.integers(1, T - 1), max_size=K)):
                    first[s, t, n] = True
    cell = _cell(S)
    x, h0 = _inputs(first)
    ys, h, g = _grads(gru_steps, cell, x, first, h0)
    ys2, h2, g2 = _grads(partial(gru_bounded, max_resets=K), cell, x, first, h0)
    assert torch.allclose(ys2, ys, atol=1e-5, rtol=0) and torch.allclose(h2, h, atol=1e-5, rtol=0)
    for a, b in zip(g, g2, strict=True):
        assert torch.allclose(b, a, rtol=1e-4, atol=1e-5 * a.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_bounded_misses_resets_beyond_its_bound(device: str) -> None:
    """The bound is the caller's promise: two resets through a bound of one give other states (so the
    equality above is not vacuous)."""
    first = torch.zeros(1, 8, 2, dtype=torch.bool, device=device)
    first[0, 3] = first[0, 6] = True
    cell = _cell(1, device)
    x, h0 = _inputs(first)
    with _fp32(device):
        ys, _ = gru_steps(cell, x, first, h0)
        ok, _ = gru_bounded(cell, x, first, h0, 2)
        short, _ = gru_bounded(cell, x, first, h0, 1)
    assert torch.allclose(ok, ys, atol=1e-5) and not torch.allclose(short, ys, atol=1e-3)


def test_segments_of_a_known_pattern() -> None:
    first = torch.tensor([[[False, True], [True, False], [False, False], [True, True]]])  # [1, T=4, N=2]
    sg = split_segments(first)
    # actor 0: [0, 1) from h0, [1, 3), [3, 4); actor 1: [0, 3) from zero, [3, 4)
    assert sg.actor.tolist() == [0, 0, 0, 1, 1] and sg.start.tolist() == [0, 1, 3, 0, 3]
    assert sg.lengths.tolist() == [1, 2, 1, 3, 1] and sg.per_seed == [5]
    assert sg.seg.tolist() == [[0, 1, 1, 2], [3, 3, 3, 4]] and sg.pos.tolist() == [[0, 0, 1, 0], [0, 1, 2, 0]]


@pytest.mark.parametrize("device", DEVICES)
def test_overcooked_net_equals_both_ways(device: str) -> None:
    net = build_net(NetConfig(kind="cnn-gru", hidden=16, conv=8), [0, 1], (5, 5, 4), 6).to(device)
    assert isinstance(net, RecurrentCNN)
    g = torch.Generator().manual_seed(5)
    obs = torch.rand(2, 7, 3, 5, 5, 4, generator=g).to(device)
    first = (torch.rand(2, 7, 3, generator=g) < 0.3).to(device)
    h0 = torch.randn(2, 3, 16, generator=g).to(device)
    results = []
    for fused in (False, True):
        net.fused_gru = fused
        with _fp32(device):
            logits, value, h = net(obs, first, NetState(gru=h0))
            grads = torch.autograd.grad(logits.square().sum() + value.sum(), list(net.parameters()))
        assert h.gru is not None
        results.append((logits.detach(), value.detach(), h.gru.detach(), grads))
    (l1, v1, h1, g1), (l2, v2, h2, g2) = results
    assert torch.allclose(l1, l2, atol=1e-5) and torch.allclose(v1, v2, atol=1e-5)
    assert torch.allclose(h1, h2, atol=1e-5)
    for a, b in zip(g1, g2, strict=True):
        assert torch.allclose(b, a, rtol=1e-4, atol=1e-5 * a.abs().max().item())


def test_compiled_loss_runs_the_segments_eagerly() -> None:
    """The PPO update compiles its loss: the fused GRU runs eagerly between the compiled parts (it is
    ``torch.compiler.disable``d), over new reset patterns, with the eager loss and gradients."""
    torch.compiler.reset()
    net = build_net(NetConfig(kind="cnn-gru", hidden=16, conv=8), [0, 1], (5, 5, 4), 6)

    def loss(obs: torch.Tensor, first: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        logits, value, _ = net(obs, first, NetState(gru=h0))
        return logits.square().sum() + value.sum()

    compiled = torch.compile(loss, dynamic=False, backend="aot_eager")
    g = torch.Generator().manual_seed(7)
    obs, h0 = torch.rand(2, 6, 3, 5, 5, 4, generator=g), torch.randn(2, 3, 16, generator=g)
    for _ in range(3):
        first = torch.rand(2, 6, 3, generator=g) < 0.3
        a = compiled(obs, first, h0)
        ga = torch.autograd.grad(a, list(net.parameters()))
        b = loss(obs, first, h0)
        gb = torch.autograd.grad(b, list(net.parameters()))
        assert torch.allclose(a, b, rtol=1e-5)
        for x, y in zip(ga, gb, strict=True):
            assert torch.allclose(x, y, rtol=1e-4, atol=1e-6)
    torch.compiler.reset()
