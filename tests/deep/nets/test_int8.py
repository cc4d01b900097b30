"""``TrainConfig.int8_inputs`` (``nets.int8``): the MLP's embedding of 0/1 observations as two int8 products of
its weights' limbs. Checked against float64 products (numpy's, not ers's code), against TF32's rounding of the
same product (the CUDA default, whose learning curve was measured unchanged: the int8 product must be nearer),
its weight gradient against the float products, compiled against eager, and in learners."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.envs.base import step_legal
from ers_deep.envs.hanabi import HanabiEnv
from ers_deep.nets import blas, build_net, int8
from ers_deep.nets.layers import SLinear
from ers_deep.nets.precision import round_mantissa
from ers_deep.train import TrainConfig
from ers_deep.train.ippo import Learner
from ers_exact.util.options import UsageError
from tests.deep.nets.test_bf16_gradients import fake_cpu
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, mode_vs_eager_params, tiny_config, trained_params


@pytest.fixture(autouse=True)
def restore_switches() -> Iterator[None]:
    """Each test leaves the process's switches as it found them."""
    on, bf16 = int8.int8_inputs(), blas.bf16_gradients()
    yield
    int8.use_int8_inputs(on)
    blas.use_bf16_gradients(bf16)


def hanabi_observations(
    rows: int, seed: int = 0, knowledge: Literal["plausible", "v0-belief"] = "plausible"
) -> torch.Tensor:
    """[1, rows, 658] observations of Hanabi-Full games under uniformly random legal moves."""
    env = HanabiEnv("Hanabi-Full", batch_size=64, seed=seed, check_legal=False, knowledge=knowledge)
    out, g, seen = env.reset(), torch.Generator().manual_seed(seed), []
    while sum(o.shape[0] for o in seen) < rows:
        seen.append(out.obs.reshape(-1, out.obs.shape[-1]).clone())
        legal = step_legal(env, out).float()
        legal[..., 0] += legal.sum(-1) == 0  # the waiting seat's move is ignored
        out = env.step(
            torch.multinomial(legal.view(-1, legal.shape[-1]), 1, generator=g).view(legal.shape[:-1])
        )
    return torch.cat(seen)[:rows].unsqueeze(0)


def test_hanabi_declares_binary_observations_only_for_hle_bits() -> None:
    """``binary_obs``: HLE's bits are all 0 or 1 over a rollout; the V0 belief's fractions are not."""
    assert (
        HanabiEnv("Hanabi-Full").binary_obs and not HanabiEnv("Hanabi-Full", knowledge="v0-belief").binary_obs
    )
    bits, belief = hanabi_observations(1024), hanabi_observations(1024, knowledge="v0-belief")
    assert bool(((bits == 0) | (bits == 1)).all()) and not bool(((belief == 0) | (belief == 1)).all())


def float64_product(x: torch.Tensor, w: torch.Tensor) -> np.ndarray:
    return np.matmul(x.double().numpy(), w.double().numpy())


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 12),
    st.floats(1e-6, 1e3),
    st.integers(0, 2**31 - 1),
)
def test_the_limbs_hold_every_weight_within_the_bound(K: int, N: int, size: float, seed: int) -> None:
    """|W - s (H + L / 254)| <= max_k |W_kj| / 64,516 for every entry (with 1 % for W / s's float32 rounding,
    ~127 * 2^-24 against the bound's 1 / 508), both limbs in [-127, 127]; a zero column is zeros."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(2, K, N, generator=g) * size
    w[1, :, 0] = 0.0
    limbs, scale = int8.int8_limbs(w)
    assert limbs.dtype == torch.int8 and int(limbs.abs().max()) <= 127
    high, low = limbs[..., :N].double(), limbs[..., N:].double()
    back = scale.double() * (high + low / int8.LOW_LIMB)
    bound = w.double().abs().amax(dim=1, keepdim=True) / (127 * 2 * int8.LOW_LIMB)
    assert bool(((back - w.double()).abs() <= bound * 1.01 + 1e-300).all())
    assert not back[1, :, 0].any()


def test_the_product_is_near_float64s_and_nearer_than_tf32s() -> None:
    """On Hanabi-Full's observations and the embedding's initial weights (and the same scaled by a trained
    net's spread): within the limbs' bound of float64's product, and nearer to it than TF32's rounding of the
    same product (10-bit mantissas: the CUDA default, learning curve unchanged) by a factor of at least 4."""
    x = hanabi_observations(2048)
    assert bool(((x == 0) | (x == 1)).all())
    w = SLinear(658, 512, [torch.Generator().manual_seed(3)]).weight.detach()
    for weights in (w, w * torch.linspace(0.2, 3.0, 512)):
        exact = float64_product(x, weights)
        err = np.abs(int8.binary_bmm(x, weights).double().numpy() - exact)
        bound = (
            x.sum(-1, keepdim=True).double().numpy() * weights.abs().amax(1, keepdim=True).double().numpy()
        )
        assert bool((err <= bound / (127 * 2 * int8.LOW_LIMB) + 1e-5).all())
        tf32 = torch.bmm(x, round_mantissa(weights, 10))  # x is exact in TF32
        tf32_err = np.abs(tf32.double().numpy() - exact)
        assert err.max() * 4 < tf32_err.max(), (err.max(), tf32_err.max())
        assert np.sqrt((err**2).mean()) * 4 < np.sqrt((tf32_err**2).mean())


def test_the_product_equals_its_integer_reference() -> None:
    """x H and x L as exact integer sums (numpy int64), then s (x H + x L / 254) in float64: the op's float32
    result within float32's rounding of it."""
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(3, 50, 37, generator=g) < 0.4).float()
    w = torch.randn(3, 37, 21, generator=g)
    limbs, scale = int8.int8_limbs(w)
    ints = np.matmul(x.numpy().astype(np.int64), limbs.numpy().astype(np.int64))
    ref = scale.double().numpy() * (ints[..., :21] + ints[..., 21:] / int8.LOW_LIMB)
    got = int8.binary_bmm(x, w).double().numpy()
    assert np.allclose(got, ref, rtol=2e-7, atol=1e-7)
    assert (ints == int8.int8_bmm(x.to(torch.int8), limbs).numpy()).all()  # the op's integers are exact


@pytest.mark.parametrize("bf16", [False, True])
def test_the_weight_gradient_is_the_float_products(bf16: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """dW = x^T g: float32's product (the process's products) or, with bfloat16 gradients on for a product of
    ``MIN_MACS`` multiply-adds (as ``blas.bmm`` takes them), ``blas``'s bfloat16 weight gradient, bit for bit; x
    gets no gradient (an input that asks for one is refused)."""
    blas.use_bf16_gradients(bf16)
    monkeypatch.setattr(blas, "MIN_MACS", 64 * 30 * 16)  # this product's: it takes bfloat16 where on
    g = torch.Generator().manual_seed(2)
    x = (torch.rand(2, 64, 30, generator=g) < 0.3).float()
    w = torch.randn(2, 30, 16, generator=g).requires_grad_()
    up = torch.randn(2, 64, 16, generator=g)
    int8.binary_bmm(x, w).backward(up)
    want = blas.bf16_weight_gradient(x, up.bfloat16()) if bf16 else blas.bmm(x.transpose(1, 2), up)
    assert w.grad is not None and torch.equal(w.grad, want)
    monkeypatch.setattr(blas, "MIN_MACS", 64 * 30 * 16 + 1)  # one more: float32's, as blas.bmm's
    w.grad = None
    int8.binary_bmm(x, w).backward(up)
    assert w.grad is not None and torch.equal(w.grad, blas.bmm(x.transpose(1, 2), up))
    with pytest.raises(ValueError, match="must not need a gradient"):
        int8.binary_bmm(x.requires_grad_(), w)


def test_compiled_equals_eager_bit_for_bit() -> None:
    g = torch.Generator().manual_seed(4)
    x = (torch.rand(2, 100, 658, generator=g) < 0.3).float()
    w = torch.randn(2, 658, 32, generator=g) * 0.05
    compiled = torch.compile(int8.binary_bmm, dynamic=False, fullgraph=True)
    assert torch.equal(compiled(x, w), int8.binary_bmm(x, w))


def test_slinear_takes_it_only_with_binary_input_while_on() -> None:
    x = (torch.rand(1, 8, 20) < 0.5).float()
    plain = SLinear(20, 6, [torch.Generator().manual_seed(0)])
    binary = SLinear(20, 6, [torch.Generator().manual_seed(0)], binary_input=True)
    int8.use_int8_inputs(False)
    assert torch.equal(plain(x), binary(x))
    int8.use_int8_inputs(True)
    assert torch.equal(plain(x), blas.bmm(x, plain.weight) + plain.bias)
    assert torch.equal(binary(x), int8.binary_bmm(x, binary.weight) + binary.bias)
    assert not torch.equal(binary(x), plain(x))  # the limbs did run (float32's last bits differ)


@pytest.mark.parametrize(
    ("machine", "flags", "native"),
    [
        ("x86_64", "fpu avx2 avx512f avx512_bf16 avx512_vnni", True),  # Zen 4, Cascade Lake and later
        ("x86_64", "fpu avx2 avx_vnni", True),  # Alder Lake
        ("x86_64", "fpu avx2 amx_tile amx_int8", True),  # Sapphire Rapids
        ("x86_64", "fpu avx2 fma", False),  # Zen 2, Zen 3
        ("aarch64", "avx512_vnni", False),
        ("x86_64", "", False),
    ],
)
def test_auto_is_on_where_the_cpu_has_int8_dot_products(
    monkeypatch: pytest.MonkeyPatch, machine: str, flags: str, native: bool
) -> None:
    fake_cpu(monkeypatch, machine, flags)
    assert int8.native_int8() is (native and torch.backends.mkldnn.is_available())
    on = int8.native_int8()
    assert int8.resolve_int8_inputs("auto") is on
    assert int8.resolve_int8_inputs("auto", "cpu:0") is on
    assert int8.resolve_int8_inputs("auto", "cuda") is False
    assert int8.resolve_int8_inputs("auto", bf16_update=True) is False
    assert int8.resolve_int8_inputs("auto", binary_obs=False) is False
    assert int8.resolve_int8_inputs("auto", memory_kept=False) is False
    assert int8.resolve_int8_inputs(True, memory_kept=False) is True
    for net in ("cnn-gru", "tabular"):
        assert int8.resolve_int8_inputs("auto", net=net) is False
    assert int8.resolve_int8_inputs(True) is True and int8.resolve_int8_inputs(False) is False
    with pytest.raises(ValueError, match="choose True, False or 'auto'"):
        int8.resolve_int8_inputs("on")  # type: ignore[arg-type]


@pytest.mark.parametrize("kept", [True, False])
def test_auto_needs_the_process_to_keep_freed_memory(monkeypatch: pytest.MonkeyPatch, kept: bool) -> None:
    """Without kept memory every product's int32 output faults its pages in afresh, and the update ran slower
    with the switch (``scripts/switch_ab.py --keep-cpu-memory off``): the learner asks the process's state."""
    from ers_deep.train import ippo

    fake_cpu(monkeypatch, "x86_64", "fpu avx2 avx512f avx512_bf16 avx512_vnni")
    monkeypatch.setattr(ippo, "freed_memory_kept", lambda: kept)
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager")
    assert Learner(cfg).int8_inputs is (kept and int8.native_int8())
    assert Learner(cfg.replace(int8_inputs=True)).int8_inputs is True  # asked for: on regardless


def test_the_config_and_the_learner_refuse_what_it_cannot_do() -> None:
    assert TrainConfig().int8_inputs == "auto"
    for bad in (1, "on", None):
        with pytest.raises(UsageError, match="choose True, False or 'auto'"):
            TrainConfig(int8_inputs=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="int8_inputs is for CPU products"):
        TrainConfig(int8_inputs=True, device="cuda")
    with pytest.raises(UsageError, match="pick one"):
        TrainConfig(int8_inputs=True, bf16_update=True)
    stored = TrainConfig().to_json()
    del stored["int8_inputs"]
    assert TrainConfig.from_json(stored).int8_inputs is False  # a run written before it: float32's
    v0 = tiny_config("hanabi", hanabi_knowledge="v0-belief", collect_mode="eager", update_mode="eager")
    with pytest.raises(UsageError, match="not all 0/1"):
        Learner(v0.replace(int8_inputs=True))
    assert Learner(v0).int8_inputs is False  # auto: off on the V0 belief's fractions
    # a net given to the learner (other-play's, discovery's) has no layer on 0/1 inputs: float32, recorded False
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager", int8_inputs=True)
    own = Learner(cfg)
    given = Learner(cfg, net=build_net(cfg.net, cfg.seeds, own.env.obs_shape, own.env.num_actions))
    assert own.int8_inputs is True and own.switches.int8_inputs is True
    assert given.int8_inputs is False and given.switches.int8_inputs is False


def test_a_learner_with_it() -> None:
    """Three updates: near the float32-embedding learner (within a few percent of how far it moved) but not
    equal (the switch ran); compiled equals eager within 1e-6 after one update. Later updates can differ more: a
    weight whose compiled and eager values differ in their last bit can round to limbs 1/64,516 of its column's
    largest apart (measured 1e-5 after three updates of this net), so that bound is 1e-4."""
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager", int8_inputs=False)
    learner = Learner(cfg.replace(int8_inputs=True))
    assert learner.int8_inputs and learner.net.embed.binary_input  # type: ignore[union-attr]
    start, plain = trained_params(cfg, 0), trained_params(cfg, 3)
    with_int8 = trained_params(cfg.replace(int8_inputs=True), 3)
    assert max_difference(plain, with_int8) > 1e-7
    gap = sum(float((p - q).norm() ** 2) for p, q in zip(plain, with_int8, strict=True))
    moved = sum(float((p - q).norm() ** 2) for p, q in zip(plain, start, strict=True))
    assert (gap / moved) ** 0.5 < 0.1
    assert mode_vs_eager_params(cfg.replace(int8_inputs=True), "compile", updates=1) < 1e-6
    assert mode_vs_eager_params(cfg.replace(int8_inputs=True), "compile", updates=3) < 1e-4
