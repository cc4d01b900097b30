"""A stack of 1x1 convolutions with ReLUs, h_l = relu(h_{l-1} W_l + b_l), as one autograd function that works
through the rows in chunks, for the CPU update of the Overcooked V2 net.

Its three leading layers (38 -> 128 -> 128 -> 8 channels) run on every cell of every observation: 51,200 rows
in the paper's minibatch of 8 actors x 256 steps, so each activation is a 26 MB tensor and the eager layers
pass over it several times (bias broadcast, product, ReLU; in the backward pass the ReLU mask, the bias sum,
two products), each pass from main memory. Here each chunk of ``chunk`` rows goes through all layers while
it is in cache. The hidden activations are never stored whole: the forward pass keeps the input and the last
output only, and the backward pass recomputes each chunk's hidden activations (a third more products) before
its ReLU masks, bias and weight gradients (accumulated per chunk) and the input gradients down the stack.
Measured in the learner, storing them instead took the same time per update: the products it repeats cost
about what writing the two 26 MB activations per minibatch cost (with ~850k page faults per update, as glibc
hands such blocks back to the kernel); recomputing keeps the memory and the system time down. The same
products and sums as the layers one by one (float rounding of the chunked sums aside, ~1e-6).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

#: rows per chunk (2,048 x 128 floats: 1 MB per activation chunk; 512-2,048 measured within 5 % on CPU,
#: 4,096 and 8,192 12-30 % slower)
CHUNK = 2048


class _PointwiseStack(torch.autograd.Function):
    """x [S, M, C_0], then (W_l [S, C_{l-1}, C_l], b_l [S, 1, C_l]) for each layer -> h_L [S, M, C_L]."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, chunk: int, *params: Tensor) -> Tensor:
        S, M, _ = x.shape
        ws, bs = params[0::2], params[1::2]
        out = x.new_empty(S, M, ws[-1].shape[-1])
        hidden = [x.new_empty(S, min(chunk, M), w.shape[-1]) for w in ws[:-1]]  # reused by every chunk
        for lo in range(0, M, chunk):
            _chunk_forward(x[:, lo : lo + chunk], ws, bs, hidden, out[:, lo : lo + chunk])
        ctx.save_for_backward(x, out, *ws, *bs)
        ctx.chunk = chunk
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, out, *params = ctx.saved_tensors
        L = len(params) // 2
        ws, bs = params[:L], params[L:]
        S, M, _ = x.shape
        dws = [x.new_zeros(w.shape) for w in ws]
        dbs = [x.new_zeros(b.shape) for b in bs]
        dx = torch.empty_like(x) if ctx.needs_input_grad[0] else None
        hidden = [x.new_empty(S, min(ctx.chunk, M), w.shape[-1]) for w in ws[:-1]]
        for lo in range(0, M, ctx.chunk):
            rows = slice(lo, lo + ctx.chunk)
            hs = _chunk_forward(x[:, rows], ws, bs, hidden, None)  # recomputed in cache, never stored whole
            acts = [x[:, rows], *hs, out[:, rows]]  # acts[i]: the input of layer i; acts[i + 1]: its output
            g = grad[:, rows]
            for i in range(L - 1, -1, -1):
                g = torch.ops.aten.threshold_backward(g, acts[i + 1], 0)  # through the ReLU
                dws[i].baddbmm_(acts[i].transpose(1, 2), g)
                dbs[i].add_(g.sum(1, keepdim=True))
                if i:
                    g = torch.bmm(g, ws[i].transpose(1, 2))
                elif dx is not None:
                    torch.bmm(g, ws[0].transpose(1, 2), out=dx[:, rows])
        return (dx, None, *(t for pair in zip(dws, dbs, strict=True) for t in pair))


def _chunk_forward(
    x: Tensor, ws: tuple[Tensor, ...], bs: tuple[Tensor, ...], hidden: list[Tensor], out: Tensor | None
) -> list[Tensor]:
    """One chunk through every layer: the hidden activations written into ``hidden`` (chunk-sized buffers),
    the last layer into ``out`` (skipped when None: the backward pass recomputes only the hidden ones)."""
    n, h, hs = x.shape[1], x, []
    for w, b, buf in zip(ws[:-1], bs[:-1], hidden, strict=True):
        h = torch.baddbmm(b, h, w, out=buf[:, :n]).relu_()
        hs.append(h)
    if out is not None:
        torch.baddbmm(bs[-1], h, ws[-1], out=out).relu_()
    return hs


@torch.compiler.disable  # a Python loop over chunks: eager between the compiled parts of a compiled update
def pointwise_stack(x: Tensor, params: list[tuple[Tensor, Tensor]], chunk: int = CHUNK) -> Tensor:
    """relu(... relu(x W_1 + b_1) ... W_L + b_L) for x [S, M, C_0] and ``params`` [(W_l [S, C_{l-1}, C_l],
    b_l [S, 1, C_l])], chunk by chunk (module docstring). Differentiable once w.r.t. x and every W_l, b_l."""
    if x.dim() != 3 or not params:
        raise ValueError(f"pointwise_stack needs x [S, M, C] and at least one layer; got {tuple(x.shape)}")
    if chunk < 1:
        raise ValueError(f"pointwise_stack: chunk = {chunk}, must be at least 1")
    flat = [t for pair in params for t in pair]
    out: Tensor = _PointwiseStack.apply(x, chunk, *flat)
    return out
