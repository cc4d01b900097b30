"""``nets.blas``: the CPU products through numpy's OpenBLAS equal torch's (a second BLAS, written by neither of us),
their gradients are the analytic ones, ``torch.compile`` keeps the op, and the dispatch, the machine rule and the
run directory's record behave as documented."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import blas
from ers_deep.train import TrainConfig
from ers_deep.train.run import resume, train
from ers_exact.util.options import UsageError
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, mode_vs_eager_params, tiny_config, trained_params

pytestmark = pytest.mark.skipif(blas.numpy_blas() != "openblas", reason="numpy's BLAS here is not OpenBLAS")


@pytest.fixture(autouse=True)
def restore_products() -> Iterator[None]:
    """Each test leaves the process's products as it found them."""
    before = blas.cpu_products()
    yield
    blas.use_cpu_products(before)


@settings(max_examples=40, deadline=None)
@given(
    S=st.integers(1, 3),
    M=st.integers(1, 70),
    K=st.integers(1, 40),
    N=st.integers(1, 40),
    tx=st.booleans(),
    tw=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_openblas_bmm_equals_torch_bmm(S: int, M: int, K: int, N: int, tx: bool, tw: bool, seed: int) -> None:
    """Any shapes, operands contiguous or transposed views (as the gradients pass them): float64 results equal
    torch's to 1e-12, float32 to float32 rounding."""
    g = torch.Generator().manual_seed(seed)

    def operand(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        """[S, rows, cols] float64, stored as such or as the transposed view of [S, cols, rows]."""
        shape = (S, cols, rows) if transposed else (S, rows, cols)
        a = torch.randn(*shape, generator=g, dtype=torch.float64)
        return a.transpose(1, 2) if transposed else a

    x, w = operand(M, K, tx), operand(K, N, tw)
    ref = torch.bmm(x, w)
    got = blas.openblas_bmm(x, w)
    assert got.shape == ref.shape and got.is_contiguous()
    assert torch.allclose(got, ref, rtol=1e-12, atol=1e-12)
    got32 = blas.openblas_bmm(x.float(), w.float())
    assert got32.dtype == torch.float32
    assert torch.allclose(got32, ref.float(), rtol=1e-5, atol=1e-5 * K**0.5)


def test_gradients_are_the_analytic_ones_and_the_op_is_registered_whole() -> None:
    """gradcheck in float64 (finite differences), and torch's opcheck: the fake (meta) kernel, the autograd
    registration and the schema agree with the op, so ``torch.compile`` can trace it."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 9, 5, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(blas.openblas_bmm, (x, w))
    torch.library.opcheck(blas.openblas_bmm, (x.detach().float().requires_grad_(), w.detach().float()))


def test_bmm_dispatches_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's products by default (bit for bit torch.bmm); with OpenBLAS, the op for float32 CPU operands of at
    least MIN_MACS multiply-adds per seed, but torch's for outer products (K = 1), smaller products, other dtypes
    and inside CPU autocast. Which library ran is seen by a spy on the op, not by the last bits of its result:
    on an AVX-512 Intel host (2026-12-07) MKL's and OpenBLAS's sums of this product are bit for bit equal."""
    calls: list[tuple[int, ...]] = []
    real = blas.openblas_bmm

    def spy(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return real(x, w)

    monkeypatch.setattr(blas, "openblas_bmm", spy)
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(2, 1024, 256, generator=g), torch.randn(2, 256, 128, generator=g)  # 2^25 MACs per seed
    blas.use_cpu_products("torch")
    assert torch.equal(blas.bmm(x, w), torch.bmm(x, w)) and calls == []
    assert blas.use_cpu_products("openblas") == "openblas" == blas.cpu_products()
    assert torch.equal(blas.bmm(x, w), real(x, w)) and calls == [(2, 1024, 256)]
    small = x[:, :1023], w
    outer = torch.randn(1, 300, 1, generator=g), torch.randn(1, 1, 48, generator=g)
    half = x.bfloat16(), w.bfloat16()
    for operands in (small, outer, half):
        assert torch.equal(blas.bmm(*operands), torch.bmm(*operands))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert blas.bmm(x, w).dtype == torch.bfloat16
    assert calls == [(2, 1024, 256)]  # none of the four went to OpenBLAS


def test_openblas_runs_torchs_thread_count() -> None:
    """``use_cpu_products`` limits numpy's BLAS to torch's threads (one here, the fixture's)."""
    from threadpoolctl import threadpool_info

    blas.use_cpu_products("openblas")
    numpy_libs = [lib for lib in threadpool_info() if "numpy" in str(lib.get("filepath", ""))]
    assert numpy_libs and all(lib["num_threads"] == torch.get_num_threads() == 1 for lib in numpy_libs)


def test_the_machine_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto: OpenBLAS on AMD x86 with torch's MKL and numpy's OpenBLAS, torch elsewhere; openblas without numpy's
    OpenBLAS and unknown names are refused, also by the config."""
    monkeypatch.setattr(blas.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(blas, "_cpuinfo", {"vendor_id": "AuthenticAMD"}.get)
    assert blas.resolve_cpu_products("auto") == ("openblas" if torch.backends.mkl.is_available() else "torch")
    monkeypatch.setattr(blas, "_cpuinfo", {"vendor_id": "GenuineIntel"}.get)
    assert blas.resolve_cpu_products("auto") == "torch"
    assert blas.resolve_cpu_products("openblas") == "openblas"
    monkeypatch.setattr(blas, "numpy_blas", lambda: "mkl")
    with pytest.raises(ValueError, match="numpy's BLAS here is mkl"):
        blas.resolve_cpu_products("openblas")
    with pytest.raises(ValueError, match="choose auto, torch, openblas"):
        blas.resolve_cpu_products("blis")
    with pytest.raises(UsageError, match="cpu_products"):
        TrainConfig(cpu_products="blis")  # type: ignore[arg-type]


def test_a_learner_on_openblas_trains_as_on_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same 3 updates with either library's products end within float32 rounding's drift of each other, and
    both moved far from it; the compiled update on OpenBLAS equals its eager update within 1e-6. (Every product
    of the tiny net goes to OpenBLAS here: MIN_MACS 0.)"""
    monkeypatch.setattr(blas, "MIN_MACS", 0)
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager", bf16_gradients=False)
    start = trained_params(cfg.replace(cpu_products="torch"), 0)
    on_torch = trained_params(cfg.replace(cpu_products="torch"), 3)
    on_blas = trained_params(cfg.replace(cpu_products="openblas"), 3)
    assert max_difference(on_torch, start) > 1e-3
    # > 0: the two libraries did run (they sum differently)
    assert 0 < max_difference(on_torch, on_blas) < 1e-4
    diff = mode_vs_eager_params(cfg.replace(cpu_products="openblas"), "compile", updates=3)
    assert diff < 1e-6, diff


def test_a_resumed_run_keeps_the_products_it_began_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config.json records what auto resolved to; a resume on a machine where auto resolves otherwise uses it (and,
    since 2026-12-07, records the run's own "auto" in its config, as the uninterrupted run does)."""
    import json

    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager", total_env_steps=2 * 8 * 30)
    monkeypatch.setattr(blas, "resolve_cpu_products", lambda kind: "openblas" if kind == "auto" else kind)
    learner, _ = train(cfg, tmp_path / "run", max_updates=1, progress=False)
    assert learner.cpu_products == "openblas"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["cpu_products"] == "openblas"
    monkeypatch.setattr(blas, "resolve_cpu_products", lambda kind: "torch" if kind == "auto" else kind)
    learner, _ = resume(tmp_path / "run", progress=False)
    assert learner.cpu_products == "openblas" and learner.config.cpu_products == "auto"
