"""The chunked stack of 1x1 convolutions with ReLUs (``nets.pointwise``, the CPU update's path) equals the layers
one by one (``SConv2d.pointwise`` + ReLU, autograd through every op): outputs and gradients w.r.t. the input and
every weight and bias, for stacked seeds and chunk sizes that do and do not divide the rows; float64
``gradcheck`` of its hand-written backward; the Overcooked net takes it on the CPU with gradients on, and the
channels-last gradient hook leaves values and gradients unchanged."""

from __future__ import annotations

import pytest
import torch

from ers_deep.nets import NetConfig, NetState, build_net
from ers_deep.nets.actor_critic import RecurrentCNN
from ers_deep.nets.layers import SConv2d
from ers_deep.nets.pointwise import pointwise_stack
from tests.deep.nets.pointwise_cases import pointwise_convs


def _reference(x: torch.Tensor, convs: list[SConv2d]) -> torch.Tensor:
    for c in convs:
        x = torch.relu(c.pointwise(x))
    return x


@pytest.mark.parametrize("S", [1, 2])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_chunked_stack_equals_the_layers(S: int, chunk: int) -> None:
    convs = pointwise_convs(S, [5, 12, 9, 3])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(S, 100, 5, generator=g, requires_grad=True)
    w = torch.randn(S, 100, 3, generator=g)
    params = [p for c in convs for p in c.parameters()]
    ref = _reference(x, convs)
    g_ref = torch.autograd.grad((ref * w).sum(), [x, *params])
    out = pointwise_stack(x, [c.pointwise_params() for c in convs], chunk)
    g_out = torch.autograd.grad((out * w).sum(), [x, *params])
    assert torch.allclose(out, ref, atol=1e-6)
    for a, b in zip(g_ref, g_out, strict=True):
        assert torch.allclose(b, a, rtol=1e-5, atol=1e-6 * a.abs().max().item())


def test_chunked_stack_backward_passes_gradcheck_in_float64() -> None:
    convs = pointwise_convs(2, [4, 6, 3], torch.float64)
    x = torch.randn(
        2, 11, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2), requires_grad=True
    )
    leaves = [getattr(c, n) for c in convs for n in ("weight", "bias")]

    def f(x: torch.Tensor, *p: torch.Tensor) -> torch.Tensor:
        params = []
        for i, c in enumerate(convs):
            S = p[2 * i + 1].shape[0] // c.n_out
            params.append((p[2 * i].view(S, c.n_out, -1).transpose(1, 2), p[2 * i + 1].view(S, 1, -1)))
        return pointwise_stack(x, params, chunk=4)

    assert torch.autograd.gradcheck(f, (x, *leaves), eps=1e-6, atol=1e-6)


def test_chunked_stack_refuses_bad_input() -> None:
    convs = pointwise_convs(1, [3, 4])
    with pytest.raises(ValueError, match="x \\[S, M, C\\]"):
        pointwise_stack(torch.zeros(4, 3), [c.pointwise_params() for c in convs])
    with pytest.raises(ValueError, match="chunk = 0"):
        pointwise_stack(torch.zeros(1, 4, 3), [c.pointwise_params() for c in convs], chunk=0)


def test_overcooked_net_takes_the_chunked_stack_with_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    """With gradients on, on the CPU, and ``distinct_cells`` off (``test_distinct`` checks it on), the net's 1x1
    layers go through ``pointwise_stack``; outputs and gradients equal the no-gradient path's outputs and the
    plain layers' gradients."""
    import ers_deep.nets.actor_critic as ac

    calls: list[int] = []
    monkeypatch.setattr(ac, "pointwise_stack", lambda *a: calls.append(1) or pointwise_stack(*a))
    net = build_net(NetConfig(kind="cnn-gru", hidden=16, conv=8), [0], (5, 5, 4), 6)
    assert isinstance(net, RecurrentCNN)
    net.distinct_cells = False
    g = torch.Generator().manual_seed(5)
    obs = torch.rand(1, 4, 3, 5, 5, 4, generator=g)
    first = torch.rand(1, 4, 3, generator=g) < 0.3
    h0 = NetState(gru=torch.randn(1, 3, 16, generator=g))
    with torch.no_grad():
        logits0, value0, _ = net(obs, first, h0)
    assert calls == []
    logits, value, _ = net(obs, first, h0)
    assert calls == [1]
    assert torch.allclose(logits, logits0, atol=1e-6) and torch.allclose(value, value0, atol=1e-6)
    grads = torch.autograd.grad(logits.square().sum() + value.sum(), list(net.parameters()))
    monkeypatch.setattr(ac, "pointwise_stack", _reference_params)
    logits2, value2, _ = net(obs, first, h0)
    grads2 = torch.autograd.grad(logits2.square().sum() + value2.sum(), list(net.parameters()))
    for a, b in zip(grads2, grads, strict=True):
        assert torch.allclose(b, a, rtol=1e-5, atol=1e-6 * a.abs().max().item())


def _reference_params(x: torch.Tensor, params: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    for w, b in params:
        x = torch.relu(torch.baddbmm(b, x, w))
    return x


@pytest.mark.parametrize("S", [1, 2])
@pytest.mark.parametrize("channels_last", [True, False])
def test_dense_on_channels_last_activations_equals_the_official_flatten(S: int, channels_last: bool) -> None:
    """The Overcooked net's dense layer reads its input in (V, V, C) order with permuted weight rows: the same
    values and gradients as the official (C, V, V) flatten, whatever the activations' layout."""
    net = build_net(NetConfig(kind="cnn-gru", hidden=16, conv=8), list(range(S)), (5, 5, 4), 6)
    assert isinstance(net, RecurrentCNN)
    x = torch.randn(S, 7, 5, 5, 32, generator=torch.Generator().manual_seed(3))  # [S, M, V, V, C]
    x = x.permute(0, 1, 4, 2, 3) if channels_last else x.permute(0, 1, 4, 2, 3).contiguous()
    x.requires_grad_()
    w = torch.randn(S, 7, 16)
    y = net._dense_channels_last(x)
    ref = net.dense(x.flatten(2))
    assert torch.allclose(y, ref, atol=1e-5)
    wanted = [x, net.dense.weight, net.dense.bias]
    g = torch.autograd.grad((y * w).sum(), wanted)
    g_ref = torch.autograd.grad((ref * w).sum(), wanted)
    for a, b in zip(g_ref, g, strict=True):
        assert torch.allclose(b, a, rtol=1e-5, atol=1e-5)
