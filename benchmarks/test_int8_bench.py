"""The int8 embedding of 0/1 observations (``TrainConfig.int8_inputs``, ``nets.int8.binary_bmm``) against the
float32 product it replaces (``nets.blas.bmm``: the process's products, OpenBLAS on AMD), same run, one torch
thread, at Hanabi-Full's first layer (658 x 512) over one 16,384-row minibatch of issue 21's 256 x 128 and one
collection step's 512 rows, on observations of real games (HLE's bits). The two must agree within the limbs'
bound. Each side is timed as the learner runs it: ``"compile"``, the layer (product, bias, ReLU) compiled without
a gradient, where the limbs' combination fuses with the bias and ReLU; ``"eager"``, as the collection runs it.
Both sides run with freed memory kept (``train.memory.keep_freed_memory``), as the learner runs by default
(``TrainConfig.keep_cpu_memory``); with glibc's defaults every call's large output is a fresh mmap whose pages
fault in (64 MB for the int8 side's [16,384, 1,024] int32 products: ~28 ms, a third of its product).
2026-12-07 (AMD Zen 4, AVX512-VNNI), float32 / int8, memory kept: compiled at 16,384 rows 107 / 68 ms (1.58x),
eager at 16,384 rows 113 / 84 ms (1.34x), eager at 512 rows 3.6 / 2.9 ms (1.27x). Without keeping it (the
thirty-eighth session's run): 130 / 144 ms (0.90x), 166 / 245 ms (0.68x), 3.47 / 3.22 ms (1.08x), which had left
the learner's 9 % faster update unexplained. A CPU without int8 dot products runs ``torch._int_mm`` slowly
(``native_int8`` is in the extra info)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from ers_deep.nets import blas, int8
from ers_deep.nets.layers import SLinear
from ers_deep.train.memory import keep_freed_memory
from tests.deep.nets.test_int8 import hanabi_observations


def layer(
    product: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], mode: str
) -> Callable[..., torch.Tensor]:
    """relu(product(x, w) + b), compiled (as in the compiled update) or eager (as in the collection)."""

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(product(x, w) + b)

    return torch.compile(run, dynamic=False) if mode == "compile" else run


@pytest.mark.parametrize(("rows", "mode"), [(16_384, "compile"), (16_384, "eager"), (512, "eager")])
def test_int8_embedding_against_float32(benchmark, one_thread, best_of, rows: int, mode: str) -> None:  # type: ignore[no-untyped-def]
    blas.use_cpu_products("auto")
    kept = (
        keep_freed_memory()
    )  # as the learner runs (TrainConfig.keep_cpu_memory): no page faults per product
    x = hanabi_observations(rows)
    w = SLinear(658, 512, [torch.Generator().manual_seed(0)]).weight.detach()
    b = torch.randn(1, 1, 512) * 0.01
    with_int8, with_float32 = layer(int8.binary_bmm, mode), layer(blas.bmm, mode)
    with torch.no_grad():
        got = benchmark.pedantic(lambda: with_int8(x, w, b), rounds=5, iterations=1, warmup_rounds=1)
        reference = with_float32(x, w, b)
        float32_s = best_of(lambda: with_float32(x, w, b), rounds=5)
    bound = x.sum(-1, keepdim=True) * w.abs().amax(1, keepdim=True) / 64_516 + 1e-5
    assert bool(((got - reference).abs() <= bound).all())  # ReLU moves no value further apart
    int8_s = benchmark.stats.stats.min
    benchmark.extra_info.update(
        {
            "rows": rows,
            "mode": mode,
            "native_int8": int8.native_int8(),
            "freed_memory_kept": kept,
            "cpu_products": blas.cpu_products(),
            "float32_ms": float32_s * 1e3,
            "int8_ms": int8_s * 1e3,
            "ratio_float32_over_int8": float32_s / int8_s,
        }
    )


@pytest.mark.parametrize("num_envs", [4, 256])
def test_collection_with_frozen_limbs(benchmark, one_thread, best_of, monkeypatch, num_envs: int) -> None:  # type: ignore[no-untyped-def]
    """The learner's collection (Hanabi-Full, MLP 512, 128 steps, int8 embedding on) with the limbs computed once
    (``nets.layers.frozen_limbs``, the learner's) against the same collection recomputing them at every step (the
    scope replaced by nothing), same learner, same run; their rollouts are equal bit for bit (tested in
    ``tests/deep/nets/test_frozen_limbs.py``). 2026-12-07 (Zen 4, one thread), frozen / recomputed: 4 envs (the
    collection compiled) 0.126 / 0.329 s (2.61x), 256 envs (eager) 1.35 / 1.49 s (1.11x)."""
    import contextlib

    from ers_deep.train import ippo
    from ers_deep.train.config import paper_config

    cfg = paper_config("hanabi", num_envs=num_envs, num_steps=128, update_mode="eager", int8_inputs=True)
    learner = ippo.Learner(cfg)
    learner.collect()  # compiles the collection where its mode does
    benchmark.pedantic(learner.collect, rounds=3, iterations=1, warmup_rounds=1)
    frozen_s = benchmark.stats.stats.min
    monkeypatch.setattr(ippo, "frozen_limbs", lambda net: contextlib.nullcontext())
    learner.collect()
    recomputed_s = best_of(learner.collect, rounds=3)
    benchmark.extra_info.update(
        {
            "num_envs": num_envs,
            "collect_mode": learner.fast.mode if learner.fast is not None else None,
            "frozen_s": frozen_s,
            "recomputed_s": recomputed_s,
            "ratio_recomputed_over_frozen": recomputed_s / frozen_s,
        }
    )
