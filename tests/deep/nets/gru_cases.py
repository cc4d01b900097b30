"""Shared cases of the GRU tests: a cell with non-zero biases, inputs, a loss's gradients, reset patterns."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ers_deep.nets.layers import SGRUCell

IN, H = 6, 5


def cell(S: int, device: str = "cpu", n_in: int = IN, hidden: int = H) -> SGRUCell:
    c = SGRUCell(n_in, hidden, [torch.Generator().manual_seed(10 + s) for s in range(S)])
    with torch.no_grad():  # non-zero biases, so that bias_ih and bias_hh are both checked
        g = torch.Generator().manual_seed(99)
        for b in (c.inp.bias, c.rec.bias):
            assert b is not None
            b.copy_(torch.randn(b.shape, generator=g))
    return c.to(device)


def inputs(first: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    S, T, N = first.shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(S, T, N, IN, generator=g).to(first.device).requires_grad_()
    h0 = torch.randn(S, N, H, generator=g).to(first.device).requires_grad_()
    return x, h0


def grads(
    fn: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    cell: SGRUCell,
    x: torch.Tensor,
    first: torch.Tensor,
    h0: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """(states, last state, gradients of a scalar loss w.r.t. the cell's parameters, x and h0)."""
    ys, h = fn(cell, x, first, h0)
    w = torch.linspace(-1, 1, ys.numel(), device=ys.device).view_as(ys)
    loss = (w * ys).sum() + (ys**2).sum() + 0.5 * h.sum()
    grads = torch.autograd.grad(loss, [*cell.parameters(), x, h0])
    return ys.detach(), h.detach(), list(grads)


def pattern(name: str, S: int, T: int, N: int) -> torch.Tensor:
    first = torch.zeros(S, T, N, dtype=torch.bool)
    if name == "all":
        first[:] = True
    elif name == "at t=0":
        first[:, 0] = True
    elif name == "mixed":  # actor 0 none, actor 1 at t=0, actor 2 one in the middle, actor 3 at the end
        first[:, 0, 1] = True
        first[:, T // 2, 2] = True
        first[:, T - 1, 3] = True
        first[-1, 1::2, 0] = True  # and the last seed's actor 0 every other step
    elif name == "long+short":  # actor 0 one long segment, the others one per step: auto packs
        first[:, :, 1:] = True
    elif name == "random":
        first = torch.rand(S, T, N, generator=torch.Generator().manual_seed(3)) < 0.3
    return first
