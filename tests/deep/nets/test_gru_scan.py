"""The CPU GRU over a sequence as one autograd function (``nets.gru_scan``) equals the step loop
(``gru_steps``, the cell applied step by step, autograd through every op): all states, the last state and
the gradients w.r.t. x, h0 and every parameter, for any pattern of resets and for stacked seeds; its hand-written
backward passes ``torch.autograd.gradcheck`` in float64; the Overcooked net runs it on the CPU."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import NetConfig, NetState, build_net
from ers_deep.nets.actor_critic import RecurrentCNN
from ers_deep.nets.gru_scan import gru_scan
from ers_deep.nets.layers import SGRUCell
from ers_deep.nets.recurrent import gru_steps

from .gru_cases import cell as _cell
from .gru_cases import grads as _grads
from .gru_cases import inputs as _inputs
from .gru_cases import pattern as _pattern


def _check(cell: SGRUCell, first: torch.Tensor, seed: int = 0) -> None:
    x, h0 = _inputs(first, seed)
    ys, h, g = _grads(gru_steps, cell, x, first, h0)
    ys2, h2, g2 = _grads(gru_scan, cell, x, first, h0)
    assert ys2.shape == ys.shape and h2.shape == h.shape
    assert torch.allclose(ys2, ys, atol=1e-6, rtol=0) and torch.allclose(h2, h, atol=1e-6, rtol=0)
    for a, b in zip(g, g2, strict=True):
        assert torch.allclose(b, a, rtol=1e-5, atol=1e-6 * a.abs().max().item())


@pytest.mark.parametrize("S", [1, 3])
@pytest.mark.parametrize("pattern", ["none", "all", "at t=0", "mixed", "long+short", "random"])
def test_scan_equals_the_step_loop(pattern: str, S: int) -> None:
    _check(_cell(S), _pattern(pattern, S, 16, 4))


@settings(max_examples=30, deadline=None)
@given(S=st.integers(1, 2), T=st.integers(1, 12), N=st.integers(1, 4), data=st.data())
def test_scan_equals_the_step_loop_for_any_resets(S: int, T: int, N: int, data: st.DataObject) -> None:
    bits = data.draw(st.lists(st.booleans(), min_size=S * T * N, max_size=S * T * N))
    _check(_cell(S), torch.tensor(bits).view(S, T, N), seed=T)


def test_scan_backward_passes_gradcheck_in_float64() -> None:
    """The hand-written backward against finite differences (float64), w.r.t. x, h0 and all four parameters."""
    cell = _cell(2).double()
    first = _pattern("mixed", 2, 7, 4)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 7, 4, 6, generator=g, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 4, 5, generator=g, dtype=torch.float64, requires_grad=True)
    params = [cell.inp.weight, cell.rec.weight, cell.inp.bias, cell.rec.bias]

    def f(x: torch.Tensor, h0: torch.Tensor, *p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.nn.utils.stateless._reparametrize_module(  # type: ignore[attr-defined]
            cell, dict(zip(["inp.weight", "rec.weight", "inp.bias", "rec.bias"], p, strict=True))
        ):
            return gru_scan(cell, x, first, h0)

    assert torch.autograd.gradcheck(f, (x, h0, *params), eps=1e-6, atol=1e-5)


def test_scan_refuses_mismatched_shapes() -> None:
    cell = _cell(1)
    x, h0 = _inputs(_pattern("none", 1, 5, 3))
    with pytest.raises(ValueError, match=r"first \[S, T, N\]"):
        gru_scan(cell, x, torch.zeros(1, 4, 3, dtype=torch.bool), h0)
    with pytest.raises(ValueError, match="h0"):
        gru_scan(cell, x, torch.zeros(1, 5, 3, dtype=torch.bool), h0[:, :2])


def test_overcooked_net_runs_the_scan_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sequence (T > 1) on the CPU goes through ``gru_scan`` (not torch's GRU over segments), with the
    step loop's outputs and gradients (``fused_gru = False``)."""
    import ers_deep.nets.actor_critic as ac

    calls: list[int] = []
    monkeypatch.setattr(ac, "gru_scan", lambda *a: calls.append(1) or gru_scan(*a))
    net = build_net(NetConfig(kind="cnn-gru", hidden=16, conv=8), [0, 1], (5, 5, 4), 6)
    assert isinstance(net, RecurrentCNN)
    g = torch.Generator().manual_seed(5)
    obs = torch.rand(2, 9, 3, 5, 5, 4, generator=g)
    first = torch.rand(2, 9, 3, generator=g) < 0.3
    h0 = torch.randn(2, 3, 16, generator=g)
    out = []
    for fused in (True, False):
        net.fused_gru = fused
        logits, value, h = net(obs, first, NetState(gru=h0))
        grads = torch.autograd.grad(logits.square().sum() + value.sum(), list(net.parameters()))
        out.append((logits, value, h.gru, grads))
    assert calls == [1]
    (l1, v1, h1, g1), (l2, v2, h2, g2) = out
    assert h1 is not None and h2 is not None
    assert torch.allclose(l1, l2, atol=1e-6) and torch.allclose(v1, v2, atol=1e-6)
    assert torch.allclose(h1, h2, atol=1e-6)
    for a, b in zip(g2, g1, strict=True):
        assert torch.allclose(b, a, rtol=1e-5, atol=1e-6 * a.abs().max().item())
