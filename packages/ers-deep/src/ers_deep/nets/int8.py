"""The first layer's product on 0/1 observations through the CPU's integer units (``TrainConfig.int8_inputs``).

Hanabi's observation (HLE's canonical bits) is a vector of 0s and 1s, so in its embedding y = x W only W needs a
format: each column j of W [K, N] is written as two int8 limbs with one float32 scale,

    W_kj ~ s_j (H_kj + L_kj / 254),   s_j = max_k |W_kj| / 127,   H = round(W / s),   L = round(254 (W / s - H)),

within s_j / 508 = max_k |W_kj| / 64,516 of W_kj, and x W = s (x H + x L / 254), where x H and x L are integer
products (``torch._int_mm``: oneDNN's VNNI kernels on x86, exact int32 sums: |x H| <= 127 K). Against float32's
product that is an error of at most sum(x) max|W_j| / 64,516 in y_j (1.4e-4 at outputs up to 4.6 on Hanabi-Full's
observations and initial weights, tested against float64); TF32's rounding of the same product (10-bit mantissas,
the CUDA default, whose learning curve was measured unchanged) is about six times larger there (5.6x at the
largest error, 6.8x in RMS; tested: at least 4x). On an AMD Zen 4 core (AVX512-VNNI) the two int8 products of
Hanabi-Full's embedding run in ~52 ms per 16,384 rows against ~107 for OpenBLAS's float32 one, and the learner's
compiled update took ~9 % less time (2026-12-07, ``docs/measurements``). The layer alone (limbs, products,
combination, bias, ReLU; ``benchmarks/test_int8_bench.py``) ran 1.58x float32's speed compiled and 1.34x eager at
16,384 rows, 1.27x at a collection step's 512, with freed memory kept as the learner keeps it
(``train.memory.keep_freed_memory``). Without that, each product's fresh [16,384, 1,024] int32 output faults in
64 MB of pages (~28 ms, a third of the product), which made the layer look slower in isolation (0.90x compiled,
0.68x eager) than inside the learner.

The weight gradient dW = x^T g stays a floating product (``nets.blas``: bfloat16 gradient products where those
are on and the product has ``blas.MIN_MACS`` multiply-adds, float32 otherwise); x needs none (observations). ``use_int8_inputs`` is a process-wide switch, as
``blas.use_bf16_gradients``: ``SLinear`` layers built with ``binary_input=True`` (the MLP's embedding, where the
env's observations are 0/1: ``BatchedEnv.binary_obs``) take this product while it is on, in collection and update
alike, so the PPO ratio starts at 1. A collection computes the limbs once (``nets.layers.frozen_limbs``: the weights
do not change over its steps; ``limb_bmm`` on them, equal bit for bit to recomputing them at each step): at every
step they had cost ~1 ms, as much as a 512-row product saves, and a small batch's collection ran up to twice as
long with the switch as without it (4 envs: 0.26 against 0.12 s per 128 steps, 2026-12-07).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.flop_counter import bmm_flop, register_flop_formula

from ers_deep.nets import blas
from ers_deep.nets.cache_tag import tag_compile_caches

__all__ = [
    "INT8_STUDIED_NETS",
    "LOW_LIMB",
    "NATIVE_INT8_FLAGS",
    "Int8Inputs",
    "binary_bmm",
    "int8_bmm",
    "int8_inputs",
    "int8_limbs",
    "limb_bmm",
    "native_int8",
    "resolve_int8_inputs",
    "use_int8_inputs",
]

Int8Inputs = bool | Literal["auto"]
#: the net kinds whose learning curve was compared with and without it (``"auto"`` turns it on for them)
INT8_STUDIED_NETS = ("mlp",)
#: /proc/cpuinfo flags of a native int8 dot product (VNNI: AMD Zen 4 and later, Intel Cascade Lake and later)
NATIVE_INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
#: the low limb's weight: L = round(254 r) for the high limb's remainder r in [-1/2, 1/2] stays in int8
LOW_LIMB = 254

# the custom op's fake kernel and the product's backward are traced into compiled graphs: this file's hash goes
# into torch's cache keys (nets.cache_tag)
tag_compile_caches(__file__)
_on = False


@torch.library.custom_op("ers::int8_bmm", mutates_args=())
def int8_bmm(x: Tensor, q: Tensor) -> Tensor:
    """x [S, M, K] int8 @ q [S, K, N] int8 -> [S, M, N] int32, exact (``torch._int_mm`` per seed, each into its
    slice of the output: no stacking copy)."""
    out = x.new_empty(x.shape[0], x.shape[1], q.shape[2], dtype=torch.int32)
    for s in range(x.shape[0]):
        torch._int_mm(x[s], q[s], out=out[s])
    return out


@int8_bmm.register_fake
def _(x: Tensor, q: Tensor) -> Tensor:
    return x.new_empty(x.shape[0], x.shape[1], q.shape[2], dtype=torch.int32)


@register_flop_formula(torch.ops.ers.int8_bmm)
def _flops(x_shape: torch.Size, q_shape: torch.Size, *args: object, **kwargs: object) -> int:
    """Counted as the float product it stands for (the two limbs side by side are one product of width N)."""
    return int(bmm_flop(x_shape, (q_shape[0], q_shape[1], q_shape[2] // 2)))


def int8_limbs(w: Tensor) -> tuple[Tensor, Tensor]:
    """W [S, K, N] as int8 limbs [S, K, 2N] (H beside L) and per-column scales s [S, 1, N] (the module
    docstring): W ~ s (H + L / 254), within max_k |W_kj| / 64,516 per entry."""
    w = w.detach()
    scale = w.abs().amax(dim=1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny) / 127
    q = w / scale
    high = q.round()
    low = ((q - high) * LOW_LIMB).round()
    return torch.cat([high, low], dim=2).to(torch.int8), scale


def limb_bmm(x: Tensor, limbs: Tensor, scale: Tensor) -> Tensor:
    """x [S, M, K] of 0s and 1s @ the weight whose ``int8_limbs`` are ``limbs``, ``scale``: s (x H + x L / 254),
    float32 [S, M, N]; no gradient (``binary_bmm`` is the differentiable product)."""
    a = int8_bmm(x.to(torch.int8), limbs)
    n = scale.shape[2]
    return a[..., :n].float() * scale + a[..., n:].float() * (scale / LOW_LIMB)


class _BinaryProduct(torch.autograd.Function):
    """y = x W for x of 0s and 1s, through ``int8_limbs``; dW = x^T g as ``nets.blas`` multiplies gradients.
    Under ``torch.vmap`` (TorchRL's GAE maps its value net over a batch dimension) one product per entry."""

    @staticmethod
    def forward(x: Tensor, w: Tensor) -> Tensor:
        return limb_bmm(x, *int8_limbs(w))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def vmap(info: Any, in_dims: tuple[int | None, int | None], x: Tensor, w: Tensor) -> tuple[Tensor, int]:
        xs, ws = (
            t.movedim(d, 0) if d is not None else t.expand(info.batch_size, *t.shape)
            for t, d in zip((x, w), in_dims, strict=True)
        )
        return torch.stack([_BinaryProduct.apply(xs[b], ws[b]) for b in range(info.batch_size)]), 0

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[None, Tensor | None]:
        (x,) = ctx.saved_tensors
        if not ctx.needs_input_grad[1]:
            return None, None
        g = g.contiguous()
        # bfloat16 where blas.bmm would take it for this product (bfloat16 gradients on, MIN_MACS multiply-adds)
        if blas.bf16_gradients() and x.shape[1] * x.shape[2] * g.shape[2] >= blas.MIN_MACS:
            return None, blas.bf16_weight_gradient(x, g.bfloat16())
        return None, blas.bmm(x.transpose(1, 2), g)


def binary_bmm(x: Tensor, w: Tensor) -> Tensor:
    """x [S, M, K] @ w [S, K, N] for x of 0s and 1s (float; not checked: the caller vouches, e.g. an env's
    ``binary_obs``) through the int8 limbs of w; float32 [S, M, N]."""
    if x.requires_grad:
        raise ValueError("binary_bmm: x must not need a gradient (its product has only dW)")
    return _BinaryProduct.apply(x, w)


def native_int8() -> bool:
    """Whether this CPU has a native int8 dot product (an x86 core with ``NATIVE_INT8_FLAGS``) and torch has
    oneDNN, whose int8 kernels use it. Elsewhere ``torch._int_mm`` is not faster than float32's product."""
    return blas.native_units(NATIVE_INT8_FLAGS)


def resolve_int8_inputs(
    choice: Int8Inputs,
    device: str = "cpu",
    bf16_update: bool = False,
    net: str = "mlp",
    binary_obs: bool = True,
    memory_kept: bool = True,
) -> bool:
    """What ``choice`` (``TrainConfig.int8_inputs``) resolves to: True and False are themselves; ``"auto"`` is on
    for a learner on the CPU (``device``) without ``bf16_update`` whose net kind was studied with it
    (``INT8_STUDIED_NETS``), on an env with 0/1 observations (``binary_obs``), in a process that keeps freed
    memory (``memory_kept``: ``train.memory.freed_memory_kept``; without it each product's int32 output faults
    in its pages afresh and the update ran ~5 % slower with the switch, 2026-12-07), where ``native_int8()``."""
    return blas.resolve_cpu_switch(
        "int8_inputs",
        choice,
        device,
        bf16_update,
        net,
        INT8_STUDIED_NETS,
        lambda: binary_obs and memory_kept and native_int8(),
    )


def use_int8_inputs(on: bool) -> None:
    """From now on (process-wide) ``SLinear`` layers with ``binary_input`` multiply through ``binary_bmm``."""
    global _on  # noqa: PLW0603  (a process-wide switch, as blas.use_bf16_gradients)
    _on = bool(on)


def int8_inputs() -> bool:
    """Whether ``use_int8_inputs`` is on in this process."""
    return _on
