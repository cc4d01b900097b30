"""``ers_deep.nets.precision``: the mantissa rounding against a second method (float64 arithmetic: the nearest
multiple of the value's quantum, numpy's ties-to-even), the rounded products and their gradients against float64
products of the rounded operands, and the context that puts a net's layers through them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.nets import NetConfig, build_net
from ers_deep.nets.precision import emulate_matmuls, emulated_matmuls, round_mantissa, rounded_bmm
from ers_deep.train import Learner
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config


def reference_round(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 ``x`` (finite) to ``bits`` mantissa bits in float64: the nearest multiple of 2^(e - bits), e the
    binary exponent of x (-126 for float32's subnormals), ties to even; back to float32 (overflow: inf)."""
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.abs(x64)))
    e = np.maximum(np.where(np.isfinite(e), e, -126), -126)
    q = np.exp2(e - bits)
    with np.errstate(over="ignore"):
        return (np.round(x64 / q) * q).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=64),
    st.integers(1, 23),
)
def test_rounding_equals_the_float64_reference(values: list[float], bits: int) -> None:
    x = np.array(values, dtype=np.float32)
    got = round_mantissa(torch.from_numpy(x), bits).numpy()
    np.testing.assert_array_equal(got, reference_round(x, bits))


def test_ties_go_to_the_even_mantissa_and_specials_pass() -> None:
    u = 2.0**-10  # TF32's spacing above 1
    x = torch.tensor([1 + u / 2, 1 + 3 * u / 2, -(1 + u / 2), 1 + u / 2 + 2**-20], dtype=torch.float32)
    assert round_mantissa(x, 10).tolist() == [1.0, 1 + 2 * u, -1.0, 1 + u]
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), 3.4028235e38, 0.0, -0.0])
    out = round_mantissa(special, 10)
    assert out[:2].tolist() == [float("inf"), -float("inf")] and out[2].isnan()
    assert out[3] == float("inf")  # the largest float32 rounds past float32's range
    assert out[4:].tolist() == [0.0, -0.0] and out[5].signbit()


def test_rounding_refuses_other_dtypes_and_bits() -> None:
    with pytest.raises(TypeError, match="float32"):
        round_mantissa(torch.ones(2, dtype=torch.float64), 10)
    with pytest.raises(ValueError, match="bits"):
        round_mantissa(torch.ones(2), 24)
    with pytest.raises(ValueError, match="bits"):  # no mantissa bit: ties have no even neighbour
        round_mantissa(torch.ones(2), 0)


def test_ties_at_one_mantissa_bit_go_to_the_even_one() -> None:
    """At 1 bit the representable values near 2 are 2, 3, 4, 6: 2.5 (a tie) goes to 2 (mantissa 1.0), 3.5 to 4,
    5 to 4 and 7 to 8 (mantissa 1.0 of the next binade); the float64 reference agrees."""
    x = torch.tensor([2.5, 3.5, 5.0, 7.0])
    assert round_mantissa(x, 1).tolist() == [2.0, 4.0, 4.0, 8.0]
    assert reference_round(x.numpy(), 1).tolist() == [2.0, 4.0, 4.0, 8.0]


@pytest.mark.parametrize("bits", [10, 7])
def test_rounded_products_and_gradients_equal_float64_products_of_rounded_operands(bits: int) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 64, 48, generator=g, requires_grad=True)
    w = torch.randn(2, 48, 32, generator=g, requires_grad=True)
    dy = torch.randn(2, 64, 32, generator=g)
    y = rounded_bmm(x, w, bits)
    y.backward(dy)

    def r(t: torch.Tensor) -> torch.Tensor:
        return round_mantissa(t.detach(), bits).double()

    expected = {
        "y": r(x) @ r(w),
        "dx": r(dy) @ r(w).transpose(1, 2),
        "dw": r(x).transpose(1, 2) @ r(dy),
    }
    unrounded = {
        "y": x.detach().double() @ w.detach().double(),
        "dx": dy.double() @ w.detach().double().transpose(1, 2),
        "dw": x.detach().double().transpose(1, 2) @ dy.double(),
    }
    for name, got in {"y": y, "dx": x.grad, "dw": w.grad}.items():
        assert got is not None
        scale = float(expected[name].abs().max())
        assert float((got.detach().double() - expected[name]).abs().max()) < 1e-5 * scale, name
        # the rounding is felt: the float64 product of the operands as given is further away
        assert float((got.detach().double() - unrounded[name]).abs().max()) > 1e-4 * scale, name


@pytest.mark.filterwarnings("error::UserWarning")  # float() of a tensor that requires grad warns
def test_a_net_multiplies_rounded_inside_the_context_only() -> None:
    net = build_net(NetConfig(kind="mlp", hidden=32), [0, 1], (40,), 6)
    obs = torch.randn(2, 3, 4, 40, generator=torch.Generator().manual_seed(1))
    first = torch.zeros(2, 3, 4, dtype=torch.bool)
    logits, value, _ = net(obs, first, net.initial_state(4))
    with emulated_matmuls(net, "tf32") as changed:
        assert changed == 5
        logits_r, value_r, _ = net(obs, first, net.initial_state(4))
    after, value_after, _ = net(obs, first, net.initial_state(4))
    assert torch.equal(after, logits) and torch.equal(value_after, value)
    for rounded, exact in ((logits_r, logits), (value_r, value)):
        gap = float((rounded - exact).detach().abs().max() / exact.detach().abs().max())
        assert 1e-6 < gap < 1e-2, gap
    with emulated_matmuls(net, "float32") as changed:
        assert changed == 0
        assert torch.equal(net(obs, first, net.initial_state(4))[0], logits)


def test_nets_with_other_products_and_unknown_formats_are_refused() -> None:
    cnn = build_net(NetConfig(kind="cnn-gru", hidden=8, conv=8), [0], (5, 5, 3), 6)
    with pytest.raises(ValueError, match="SLinear layers only"):
        emulate_matmuls(cnn, "tf32")
    mlp = build_net(NetConfig(kind="mlp", hidden=8), [0], (4,), 3)
    with pytest.raises(ValueError, match="fmt"):
        emulate_matmuls(mlp, "fp8")


@pytest.mark.parametrize("fmt", ["tf32", "bf16-autocast"])
def test_a_learners_compiled_update_runs_rounded(fmt: str) -> None:
    """The context reaches the learner's collection and its compiled update: after two updates under an
    emulated format the compiled learner's parameters equal the eager one's (within float32 rounding), and both
    are away from float32's by far more than that."""
    params = {}
    for f, mode in (("float32", "eager"), (fmt, "eager"), (fmt, "compile")):
        learner = Learner(tiny_config("hanabi", update_mode=mode))
        with emulated_matmuls(learner.net, f):
            for _ in range(2):
                learner.train_step()
        params[f, mode] = torch.cat([p.detach().flatten() for p in learner.net.parameters()])
    same = float((params[fmt, "compile"] - params[fmt, "eager"]).abs().max())
    away = float((params[fmt, "eager"] - params["float32", "eager"]).abs().max())
    assert same < 1e-5 and away > 20 * max(same, 1e-8), (same, away)


def test_the_autocast_format_equals_torch_s_cpu_autocast() -> None:
    """``"bf16-autocast"`` (``TrainConfig.bf16_update``'s products) against torch's own bfloat16 autocast on the
    CPU, a second implementation: a layer's output (product in bfloat16, bias added in float32) and the gradients
    of its input, weight and bias agree within one bfloat16 step, and nearly all exactly."""
    g = torch.Generator().manual_seed(3)
    layer = build_net(NetConfig(kind="mlp", hidden=32), [0, 1], (48,), 6).critic_hidden
    with torch.no_grad():
        layer.bias.normal_(generator=g)
    x = torch.randn(2, 64, 32, generator=g, requires_grad=True)
    up = torch.randn(2, 64, 32, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    (y.float() * up).sum().backward()
    ref = [y.detach().float(), x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone()]
    x.grad = layer.weight.grad = layer.bias.grad = None
    with emulated_matmuls(layer, "bf16-autocast"):
        e = layer(x)
    (e * up).sum().backward()
    got = [e.detach(), x.grad, layer.weight.grad, layer.bias.grad]
    for name, a, b in zip(("y", "dx", "dW", "db"), ref, got):
        assert torch.allclose(a, b, rtol=2**-7, atol=1e-6), name
        assert float((a == b).float().mean()) > 0.99, name
    plain = emulated_matmuls(layer, "bf16")  # operands rounded, results not: far from autocast's outputs
    with plain:
        assert float((layer(x).detach() == ref[0]).float().mean()) < 0.5


def test_the_autocast_format_leaves_the_gradient_free_collection_in_float32() -> None:
    """Autocast wraps the update's forward only: without gradients (the collection, the bootstrap value) the
    net multiplies in float32, bit for bit; with them, rounded."""
    net = build_net(NetConfig(kind="mlp", hidden=32), [0], (40,), 6)
    obs = torch.randn(1, 3, 4, 40, generator=torch.Generator().manual_seed(2))
    first = torch.zeros(1, 3, 4, dtype=torch.bool)
    with torch.no_grad():
        plain = net(obs, first, net.initial_state(4))[0]
    with emulated_matmuls(net, "bf16-autocast"):
        with torch.no_grad():
            assert torch.equal(net(obs, first, net.initial_state(4))[0], plain)
        rounded = net(obs, first, net.initial_state(4))[0].detach()
    assert not torch.equal(rounded, plain) and torch.allclose(rounded, plain, rtol=0.05, atol=1e-3)


def test_the_float32_heads_variant_rounds_the_hidden_layers_only() -> None:
    """``"bf16-autocast-float32-heads"``: every SLinear but the logits' and the value's output layers."""
    net = build_net(NetConfig(kind="mlp", hidden=16), [0], (12,), 5)
    layers = emulate_matmuls(net, "bf16-autocast-float32-heads")
    try:
        assert {id(m) for m in layers} == {id(net.embed), id(net.actor_hidden), id(net.critic_hidden)}
    finally:
        for layer in layers:
            del layer.forward
