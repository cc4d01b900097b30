"""Reduced-precision matrix products emulated in float32, to study their effect on learning where the hardware
has none (a CPU: the 2-core machine of the tests has neither TF32 nor bfloat16 units).

On an NVIDIA GPU since Ampere, a float32 product under TF32 (``torch.backends.cuda.matmul.allow_tf32``: ers's
CUDA default, as JAX's) multiplies operands cut to 10 explicit mantissa bits and accumulates in float32;
bfloat16 keeps 7. ``round_mantissa(x, bits)`` cuts so: to nearest, ties to even, on the float32 bit pattern
(float32's exponent range, as TF32's). Whether a GPU's conversion rounds or truncates is not documented for
cuBLAS; either way the error is of the same order (2^-11 against 2^-10 relative).

``rounded_bmm`` is ``torch.bmm`` with every operand of its forward and backward products rounded so:
y = r(x) r(W), dx = r(dy) r(W)^T, dW = r(x)^T r(dy), the three TF32 products of a linear layer.
``emulate_matmuls(net, fmt)`` (or the context ``emulated_matmuls``) runs every ``SLinear`` of a net through it,
which covers every product of the feed-forward Hanabi net: the collection's forward and the update's forward
and backward alike, as on the GPU. Not emulated: the order in which a GPU sums inside a product.

``"bf16-autocast"`` is ``TrainConfig.bf16_update`` instead: bfloat16 autocast around the update's forward only.
There a product's result is bfloat16 too, and so are the gradient products' results (autocast casts them back
to float32 for the float32 weights and inputs), so y = r(r(x) r(W)), dx = r(r(dy) r(W)^T), dW = r(r(x)^T r(dy)),
and the bias is added in float32; the collection, which runs without gradients, multiplies in float32. Checked
against torch's own CPU autocast (``tests/deep/nets/test_precision.py``). ``"bf16-autocast-float32-heads"``
is the same but for the output layers (the logits' and the value's products), left in float32: a variant not
built for the GPU, to test whether bfloat16 logits and values are what slows Hanabi-Full's learning under it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from ers_deep.nets.layers import SLayerNorm, SLinear

#: explicit mantissa bits of each emulated format (float32 keeps 23)
MANTISSA_BITS = {"tf32": 10, "bf16": 7, "bf16-autocast": 7, "bf16-autocast-float32-heads": 7}
#: the formats whose products also round their results, and only where gradients are on (autocast's around the
#: update's forward: ``TrainConfig.bf16_update``)
AUTOCAST_FORMATS = frozenset({"bf16-autocast", "bf16-autocast-float32-heads"})
#: the formats that leave the output layers (``HEADS``: the logits' and the value's products) in float32
FLOAT32_HEADS = frozenset({"bf16-autocast-float32-heads"})
HEADS = ("actor_out", "critic_out")


def round_mantissa(x: Tensor, bits: int) -> Tensor:
    """float32 ``x`` rounded to ``bits`` explicit mantissa bits (1 <= bits <= 23), to nearest, ties to even;
    infinities and NaNs pass unchanged, a value that rounds past the largest float32 becomes infinite. (No 0: with
    no mantissa bit a tie such as 3 = 1.5 x 2 has no even neighbour; the bit pattern's rule would take the even
    exponent, 2, a multiple-of-the-quantum rule 4. A Hypothesis run found that disagreement.)"""
    if x.dtype != torch.float32:
        raise TypeError(f"round_mantissa needs float32, got {x.dtype}")
    if not 1 <= bits <= 23:
        raise ValueError(f"bits must be in [1, 23], got {bits}")
    drop = 23 - bits
    if drop == 0:
        return x
    i = x.contiguous().view(torch.int32)
    lsb = (i >> drop) & 1  # the last kept bit: a tie rounds to make it even
    rounded = ((i + ((1 << (drop - 1)) - 1) + lsb) >> drop) << drop
    finite = (i & 0x7F800000) != 0x7F800000
    return torch.where(finite, rounded, i).view(torch.float32)


class _RoundedBmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, bits: int, results: bool) -> Tensor:
        xr, wr = round_mantissa(x, bits), round_mantissa(w, bits)
        ctx.save_for_backward(xr, wr)
        ctx.bits, ctx.results = bits, results
        y = torch.bmm(xr, wr)
        return round_mantissa(y, bits) if results else y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:
        xr, wr = ctx.saved_tensors
        g = round_mantissa(dy.contiguous(), ctx.bits)
        r = (lambda t: round_mantissa(t, ctx.bits)) if ctx.results else (lambda t: t)
        dx = r(torch.bmm(g, wr.transpose(1, 2))) if ctx.needs_input_grad[0] else None
        dw = r(torch.bmm(xr.transpose(1, 2), g)) if ctx.needs_input_grad[1] else None
        return dx, dw, None, None


def rounded_bmm(x: Tensor, w: Tensor, bits: int, results: bool = False) -> Tensor:
    """``torch.bmm(x, w)`` [S, M, K] x [S, K, N] with the operands of the product and of both gradient
    products rounded to ``bits`` mantissa bits (``round_mantissa``), accumulated in float32; ``results``: the
    three products' results rounded too (bfloat16 autocast's)."""
    return _RoundedBmm.apply(x, w, bits, results)


def _rounded_forward(layer: SLinear, fmt: str) -> Any:
    bits, autocast = MANTISSA_BITS[fmt], fmt in AUTOCAST_FORMATS

    def forward(x: Tensor) -> Tensor:
        if autocast and not torch.is_grad_enabled():  # autocast wraps the update's forward only
            return SLinear.forward(layer, x)
        y = rounded_bmm(x, layer.weight, bits, autocast)
        return y + layer.bias if layer.bias is not None else y

    return forward


def emulate_matmuls(net: nn.Module, fmt: str) -> list[SLinear]:
    """From now on every ``SLinear`` of ``net`` multiplies as the format ``fmt`` (``"tf32"``, ``"bf16"``,
    ``"bf16-autocast"``; ``"float32"``: unchanged) would: ``rounded_bmm``. Returns the layers changed (``del layer.forward``
    restores one). Raises for a net with products outside ``SLinear`` (convolutions, GRU cells, tables: not
    emulated) unless ``fmt`` is ``"float32"``."""
    if fmt == "float32":
        return []
    if fmt not in MANTISSA_BITS:
        raise ValueError(f"fmt must be 'float32' or one of {sorted(MANTISSA_BITS)}, not {fmt!r}")
    other = sorted({type(m).__name__ for m in net.modules() if _has_own_products(m)})
    if other:
        raise ValueError(f"emulate_matmuls covers SLinear layers only; {other} multiply by themselves")
    skip = HEADS if fmt in FLOAT32_HEADS else ()
    layers = [
        m for name, m in net.named_modules() if isinstance(m, SLinear) and name.rsplit(".", 1)[-1] not in skip
    ]
    for layer in layers:
        layer.forward = _rounded_forward(layer, fmt)  # type: ignore[method-assign]
    return layers


@contextlib.contextmanager
def emulated_matmuls(net: nn.Module, fmt: str) -> Iterator[int]:
    """``emulate_matmuls`` while the context is open; yields the number of layers changed."""
    layers = emulate_matmuls(net, fmt)
    try:
        yield len(layers)
    finally:
        for layer in layers:
            del layer.forward  # back to the class's forward


def _has_own_products(m: nn.Module) -> bool:
    """A module with parameters of its own that is neither an ``SLinear`` nor a layer norm (a convolution, a GRU
    cell, a table: its products would stay float32)."""
    own = [n for n, _ in m.named_parameters(recurse=False)]
    return bool(own) and not isinstance(m, (SLinear, SLayerNorm))
