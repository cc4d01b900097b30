"""The bfloat16 weight gradient of the CPU learner's products (``TrainConfig.bf16_gradients``) at Hanabi-Full's
update shapes (MLP 512, one 16,384-row minibatch of issue 21's 256 x 128; the actor head's 8,192 acting rows):
``nets.blas.bf16_weight_gradient`` (dW = x^T g as (g^T x)^T where x is the wider side) against the plain x^T g
(``bf16_bmm`` on the transposed x), same run, one torch thread. The two must agree within one bfloat16 step (the
same products summed in another order). ``bf16_weight_gradient`` turns the product only where x is the wider
side (K > N); on the square hidden layer (K = N) it is the plain product itself, so that case times the turned
product (g^T x)^T, which it does not take, against the plain one: the reason it keeps the plain order there
(``timed`` in the extra info says which). On 2026-12-07 (AMD Zen 4, AVX512-BF16) the first layer's 658 x 512 ran
58 ms against 66, 512 x 20 1.1 against 1.9, square shapes even; a CPU without bfloat16 units only emulates the
product (``native_bf16`` is in the extra info)."""

from __future__ import annotations

import pytest
import torch

from ers_deep.nets import blas

#: (rows M, input width K, output width N) of x [M, K], g [M, N]: the update's weight gradients
SHAPES = {
    "embed-658x512": (16_384, 658, 512),
    "hidden-512x512": (16_384, 512, 512),
    "actor-out-512x20": (8_192, 512, 20),
    "value-512x1": (16_384, 512, 1),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_bf16_weight_gradient_orientation(benchmark, one_thread, best_of, shape: str) -> None:  # type: ignore[no-untyped-def]
    M, K, N = SHAPES[shape]
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(1, M, K, generator=gen) < 0.34).float()  # binary, as the observation (the first layer)
    g = torch.randn(1, M, N, generator=gen).bfloat16()  # the backward passes g rounded
    plain = blas.bf16_bmm(x.transpose(1, 2), g)
    if K > N:  # the oriented product turns this one: time what it runs
        timed, fn = "bf16_weight_gradient: (g^T x)^T", lambda: blas.bf16_weight_gradient(x, g)
    else:  # it keeps the plain order here (it would be the same call): time the turned order it does not take
        timed, fn = (
            "turned, not taken: (g^T x)^T",
            lambda: blas.bf16_bmm(g.transpose(1, 2), x).transpose(1, 2),
        )
        assert torch.equal(blas.bf16_weight_gradient(x, g), plain)
    oriented = benchmark.pedantic(fn, rounds=5, iterations=1, warmup_rounds=1)
    reference = plain.double()
    assert oriented.shape == plain.shape == (1, K, N)
    assert bool(((oriented.double() - reference).abs() <= 2.0**-7 * reference.abs() + 1e-6).all())
    plain_s = best_of(lambda: blas.bf16_bmm(x.transpose(1, 2), g), rounds=5)
    oriented_s = benchmark.stats.stats.min
    benchmark.extra_info.update(
        {
            "rows": M,
            "weight": [K, N],
            "timed": timed,
            "native_bf16": blas.native_bf16(),
            "plain_ms": plain_s * 1e3,
            "oriented_ms": oriented_s * 1e3,
            "ratio_plain_over_oriented": plain_s / oriented_s,
        }
    )
