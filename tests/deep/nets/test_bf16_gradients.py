"""``TrainConfig.bf16_gradients`` (``nets.blas.bf16_gradients_bmm``): the forward is the float32 product, the two
gradient products take bfloat16 operands and round their results to bfloat16. Checked against float64
products of operands rounded by torch's own dtype cast (not ers's code), against the float32 gradients (they
must differ: bfloat16 did run), by ``opcheck``, through the dispatch of ``blas.bmm``, and in a learner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import blas, int8
from ers_deep.train import TrainConfig
from ers_deep.train.ippo import Learner
from ers_deep.train.run import resume, train
from ers_exact.util.options import UsageError
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, mode_vs_eager_params, tiny_config, trained_params

#: bfloat16 keeps 7 explicit mantissa bits: a rounded result is within half of this of its value, relative
BF16_ULP = 2.0**-7


@pytest.fixture(autouse=True)
def restore_switches() -> Iterator[None]:
    """Each test leaves the process's products and bf16 switch as it found them."""
    products, bf16, on = blas.cpu_products(), blas.bf16_gradients(), int8.int8_inputs()
    yield
    blas.use_cpu_products(products)
    blas.use_bf16_gradients(bf16)
    int8.use_int8_inputs(on)


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
    torch.library.opcheck(blas.bf16_bmm, (x.bfloat16(), w))  # the backward passes g already rounded


@pytest.mark.parametrize(("K", "N"), [(17, 9), (9, 17), (12, 12), (40, 1)])
def test_the_backward_rounds_g_once_and_orients_the_weight_gradient(K: int, N: int) -> None:
    """The backward rounds g to bfloat16 once for both products: dx bit for bit ``bf16_bmm`` on the float32 g
    (which rounds it itself; a bfloat16 operand is taken as it is); dW = x^T g as (g^T x)^T where x is the wider,
    bit for bit that product and within one bfloat16 step of x^T g (the same products, another order)."""
    gen = torch.Generator().manual_seed(4)
    x, w, g = (torch.randn(2, *shape, generator=gen) for shape in ((33, K), (K, N), (33, N)))
    dx, dw = gradients(x, w, g, blas.bf16_gradients_bmm)
    assert torch.equal(dx, blas.bf16_bmm(g, w.transpose(1, 2)))
    assert torch.equal(blas.bf16_bmm(g.bfloat16(), w.transpose(1, 2)), dx) and dx.dtype == torch.float32
    oriented = (
        blas.bf16_bmm(g.transpose(1, 2), x).transpose(1, 2) if K > N else blas.bf16_bmm(x.transpose(1, 2), g)
    )
    assert torch.equal(dw, oriented) and dw.shape == w.shape
    plain = blas.bf16_bmm(x.transpose(1, 2), g).double()
    assert bool(((dw.double() - plain).abs() <= BF16_ULP * plain.abs() + 1e-6).all())


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
    cfg = tiny_config(
        "hanabi", collect_mode="eager", update_mode="eager", cpu_products="torch", bf16_gradients=False
    )
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


def fake_cpu(monkeypatch: pytest.MonkeyPatch, machine: str, flags: str) -> None:
    """This process sees an x86 or other ``machine`` whose /proc/cpuinfo lists ``flags``."""
    monkeypatch.setattr(blas.platform, "machine", lambda: machine)
    monkeypatch.setattr(blas, "_cpuinfo", {"flags": flags, "vendor_id": "AuthenticAMD"}.get)


@pytest.mark.parametrize(
    ("machine", "flags", "native"),
    [
        ("x86_64", "fpu avx2 avx512f avx512_bf16 avx512_vnni", True),  # Zen 4, Cooper Lake
        ("x86_64", "fpu avx2 avx512f amx_tile amx_bf16", True),  # Sapphire Rapids
        ("x86_64", "fpu avx2 avx512f avx512_vnni", False),  # Skylake-X, Ice Lake
        ("x86_64", "fpu avx2 fma", False),  # Zen 2, Zen 3
        ("aarch64", "avx512_bf16", False),  # not an x86 core
        ("x86_64", "", False),  # no /proc/cpuinfo
    ],
)
def test_auto_is_on_where_the_cpu_multiplies_bfloat16_natively(
    monkeypatch: pytest.MonkeyPatch, machine: str, flags: str, native: bool
) -> None:
    """``"auto"``: on for a CPU learner where the core has AVX512-BF16 or AMX-BF16 (and torch has oneDNN), off
    on CUDA and beside ``bf16_update``; True and False are themselves; anything else is refused."""
    fake_cpu(monkeypatch, machine, flags)
    assert blas.native_bf16() is (native and torch.backends.mkldnn.is_available())
    assert blas.resolve_bf16_gradients("auto") is blas.native_bf16()
    assert blas.resolve_bf16_gradients("auto", "cpu:0") is blas.native_bf16()
    assert blas.resolve_bf16_gradients("auto", "cuda") is False
    assert blas.resolve_bf16_gradients("auto", bf16_update=True) is False
    assert blas.resolve_bf16_gradients("auto", net="mlp") is blas.native_bf16()
    for net in ("cnn-gru", "tabular"):  # curves not studied with it
        assert blas.resolve_bf16_gradients("auto", net=net) is False
        assert blas.resolve_bf16_gradients(True, net=net) is True
    assert blas.resolve_bf16_gradients(True) is True and blas.resolve_bf16_gradients(False) is False
    with pytest.raises(ValueError, match="choose True, False or 'auto'"):
        blas.resolve_bf16_gradients("on")  # type: ignore[arg-type]


def test_this_machines_flags_decide_auto() -> None:
    """On this machine, what ``auto`` resolves to follows /proc/cpuinfo's flags, read here without ers's code."""
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []
    )
    native = bool({"avx512_bf16", "amx_bf16"} & set(flags)) and torch.backends.mkldnn.is_available()
    assert blas.native_bf16() is (native and blas.platform.machine() in ("x86_64", "AMD64"))


def test_the_config_takes_auto_and_refuses_other_values() -> None:
    """The default is ``"auto"`` on every device (it resolves off on CUDA and beside autocast); values other than
    True, False and ``"auto"`` are refused when the config is made; a stored config without the field (written
    before it) loads as the float32 run it was."""
    assert TrainConfig().bf16_gradients == "auto"
    TrainConfig(bf16_gradients="auto", device="cuda")
    TrainConfig(bf16_gradients="auto", bf16_update=True)
    for bad in (1, 0, "on", "true", None):
        with pytest.raises(UsageError, match="choose True, False or 'auto'"):
            TrainConfig(bf16_gradients=bad)  # type: ignore[arg-type]
    stored = TrainConfig().to_json()
    del stored["bf16_gradients"]
    assert TrainConfig.from_json(stored).bf16_gradients is False


def test_a_learner_resolves_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner's switch is what ``auto`` resolves to on this (faked) CPU."""
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager")
    for flags, on in (("avx512f avx512_bf16", torch.backends.mkldnn.is_available()), ("avx2", False)):
        fake_cpu(monkeypatch, "x86_64", flags)
        learner = Learner(cfg)
        assert learner.bf16_gradients is on and learner.switches.bf16_gradients is on
    learner = Learner(cfg.replace(bf16_gradients=True))  # the switch on a CPU without it: emulated, slower
    assert learner.bf16_gradients is True and learner.switches.bf16_gradients
    fake_cpu(monkeypatch, "x86_64", "avx512f avx512_bf16")
    learner = Learner(tiny_config("overcooked-v2", collect_mode="eager", update_mode="eager"))
    assert learner.config.net.kind == "cnn-gru" and learner.bf16_gradients is False
    assert not learner.switches.bf16_gradients


@pytest.mark.parametrize(
    ("field", "flags"),
    [
        ("bf16_gradients", "avx512f avx512_bf16"),
        ("int8_inputs", "avx512f avx512_vnni"),  # nets.int8: the same record
    ],
)
def test_a_resumed_run_keeps_what_auto_resolved_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, flags: str
) -> None:
    """config.json records what ``auto`` resolved to; a resume on a CPU where it resolves otherwise keeps it, and
    a run begun before the record resumes with its config's own value."""
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager", total_env_steps=3 * 8 * 30)
    fake_cpu(monkeypatch, "x86_64", flags)
    learner, _ = train(cfg, tmp_path / "run", max_updates=1, progress=False)
    on = torch.backends.mkldnn.is_available()
    assert getattr(learner, field) is on
    stored = json.loads((tmp_path / "run" / "config.json").read_text())
    assert stored[field] is on and stored["config"][field] == "auto"
    fake_cpu(monkeypatch, "x86_64", "avx2")
    learner, _ = resume(tmp_path / "run", max_updates=2, progress=False)
    assert getattr(learner, field) is on and getattr(learner.switches, field) is on and learner.update == 2
    del stored[field]  # as written before the record: auto resolves here, on this (faked) CPU
    (tmp_path / "run" / "config.json").write_text(json.dumps(stored))
    learner, _ = resume(tmp_path / "run", max_updates=3, progress=False)
    assert getattr(learner, field) is False and learner.update == 3
