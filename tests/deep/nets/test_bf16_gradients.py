"""``TrainConfig.bf16_gradients`` (``nets.blas.bf16_gradients_bmm``): the forward is the float32 product, the two
gradient products take bfloat16 operands and round their results to bfloat16. Checked against float64
products of operands rounded by torch's own dtype cast (not ers's code), against the float32 gradients (they
must differ: bfloat16 did run), by ``opcheck``, through the dispatch of ``blas.bmm``, and in a learner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import blas
from ers_deep.train import TrainConfig
from ers_exact.util.options import UsageError
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, mode_vs_eager_params, tiny_config, trained_params

#: bfloat16 keeps 7 explicit mantissa bits: a rounded result is within half of this of its value, relative
BF16_ULP = 2.0**-7


@pytest.fixture(autouse=True)
def restore_switches() -> Iterator[None]:
    """Each test leaves the process's products and bf16 switch as it found them."""
    products, bf16 = blas.cpu_products(), blas.bf16_gradients()
    yield
    blas.use_cpu_products(products)
    blas.use_bf16_gradients(bf16)


def rounded(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to bfloat16 by torch's cast, as float64."""
    return t.to(torch.bfloat16).to(torch.float64)


def bf16_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b of the bfloat16-rounded operands in float64 (exact up to float64 rounding), the result then rounded
    to bfloat16: what a bfloat16 product with float32 accumulation should return, up to its summation order."""
    return rounded(torch.bmm(rounded(a), rounded(b)))


def gradients(
    x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, op: object
) -> tuple[torch.Tensor, torch.Tensor]:
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    op(xr, wr).backward(g)  # type: ignore[operator]
    assert xr.grad is not None and wr.grad is not None
    return xr.grad, wr.grad


@settings(max_examples=25, deadline=None)
@given(
    S=st.integers(1, 2),
    M=st.integers(2, 60),
    K=st.integers(2, 40),
    N=st.integers(2, 40),
    products=st.sampled_from(["torch", "openblas"]),
    seed=st.integers(0, 2**16),
)
def test_forward_is_float32_and_gradients_are_bfloat16_products(
    S: int, M: int, K: int, N: int, products: str, seed: int
) -> None:
    """Any shapes: the forward equals the float32 product of ``blas.bmm`` without the switch (bit for bit, the same
    library); dx = g w^T and dw = x^T g equal the bfloat16 reference within one bfloat16 step of its result."""
    if products == "openblas" and blas.numpy_blas() != "openblas":
        products = "torch"
    blas.use_cpu_products(products)
    gen = torch.Generator().manual_seed(seed)
    x, w, g = (torch.randn(S, *shape, generator=gen) for shape in ((M, K), (K, N), (M, N)))
    plain = blas.openblas_bmm(x, w) if products == "openblas" else torch.bmm(x, w)
    assert torch.equal(blas.bf16_gradients_bmm(x, w), plain)
    dx, dw = gradients(x, w, g, blas.bf16_gradients_bmm)
    for got, ref in ((dx, bf16_reference(g, w.transpose(1, 2))), (dw, bf16_reference(x.transpose(1, 2), g))):
        assert got.dtype == torch.float32
        # the reference and the kernel may sum in other orders: a result near a rounding boundary can land on
        # the neighbouring bfloat16 value, one step apart; anything beyond that is a different computation
        step = BF16_ULP * ref.abs().clamp_min(1e-30)
        assert bool(((got.double() - ref).abs() <= step + 1e-6).all())


def test_the_gradients_do_differ_from_float32s() -> None:
    """The op's weight gradient is farther from the exact (float64) one than float32's is: bfloat16 did run (an
    op that silently multiplied in float32 would fail here)."""
    gen = torch.Generator().manual_seed(3)
    x, w, g = (
        torch.randn(1, 256, 64, generator=gen),
        torch.randn(1, 64, 32, generator=gen),
        torch.randn(1, 256, 32, generator=gen),
    )
    dx, dw = gradients(x, w, g, blas.bf16_gradients_bmm)
    fx, fw = gradients(x, w, g, torch.bmm)
    exact_dw = torch.bmm(x.double().transpose(1, 2), g.double())
    assert float((fw.double() - exact_dw).abs().max()) < 1e-4 < float((dw.double() - exact_dw).abs().max())
    assert not torch.equal(dx, fx)


def test_the_ops_are_registered_whole() -> None:
    """torch's opcheck: schema, fake kernel and autograd registration agree, so ``torch.compile`` can trace."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 9, 5, generator=gen), torch.randn(2, 5, 4, generator=gen)
    torch.library.opcheck(blas.bf16_gradients_bmm, (x.clone().requires_grad_(), w.clone().requires_grad_()))
    torch.library.opcheck(blas.bf16_bmm, (x, w))


def test_bmm_takes_it_only_for_large_float32_products_that_need_a_gradient() -> None:
    """With the switch, ``blas.bmm`` runs the op for a float32 product of at least MIN_MACS that needs a gradient;
    without a gradient (the collection), below MIN_MACS, or without the switch, the gradients are float32's."""
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(1, 1024, 256, generator=gen), torch.randn(1, 256, 128, generator=gen)  # 2^25 MACs
    g = torch.randn(1, 1024, 128, generator=gen)
    blas.use_cpu_products("torch")
    reference = gradients(x, w, g, torch.bmm)
    blas.use_bf16_gradients(True)
    assert blas.bf16_gradients()
    switched = gradients(x, w, g, blas.bmm)
    assert not torch.equal(switched[1], reference[1])
    assert all(
        torch.equal(a, b) for a, b in zip(switched, gradients(x, w, g, blas.bf16_gradients_bmm), strict=True)
    )
    small = x[:, :1023], w, g[:, :1023]
    assert all(
        torch.equal(a, b)
        for a, b in zip(gradients(*small, blas.bmm), gradients(*small, torch.bmm), strict=True)
    )
    with torch.no_grad():
        assert torch.equal(blas.bmm(x, w), torch.bmm(x, w))
    blas.use_bf16_gradients(False)
    assert all(torch.equal(a, b) for a, b in zip(gradients(x, w, g, blas.bmm), reference, strict=True))


def relative_distance(a: list[torch.Tensor], b: list[torch.Tensor], start: list[torch.Tensor]) -> float:
    """||a - b|| / ||a - start|| over all parameters: how far b is from a, against how far a moved."""
    gap = sum(float((p - q).norm() ** 2) for p, q in zip(a, b, strict=True))
    moved = sum(float((p - q).norm() ** 2) for p, q in zip(a, start, strict=True))
    return (gap / moved) ** 0.5


def test_a_learner_with_bf16_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three updates (48 Adam steps): within a few percent of the float32 learner's move (Adam's step hardly
    depends on a gradient's last bits, but a near-zero entry can change its sign), far more than float32's own
    rounding moves it (another BLAS: ~5e-7), so the switch ran; the compiled update equals its eager update
    within 1e-5. (Every product of the tiny net takes the switch here: MIN_MACS 0.)"""
    monkeypatch.setattr(blas, "MIN_MACS", 0)
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager", cpu_products="torch")
    start = trained_params(cfg, 0)
    plain = trained_params(cfg, 3)
    bf16 = trained_params(cfg.replace(bf16_gradients=True), 3)
    assert max_difference(plain, start) > 1e-3
    assert 1e-4 < relative_distance(plain, bf16, start) < 0.1
    diff = mode_vs_eager_params(cfg.replace(bf16_gradients=True), "compile", updates=3)
    assert diff < 1e-5, diff


def test_the_config_refuses_it_off_the_cpu_and_with_autocast() -> None:
    with pytest.raises(UsageError, match="bf16_gradients is for CPU products"):
        TrainConfig(bf16_gradients=True, device="cuda")
    with pytest.raises(UsageError, match="pick one"):
        TrainConfig(bf16_gradients=True, bf16_update=True)
    assert TrainConfig(bf16_gradients=True).bf16_gradients
