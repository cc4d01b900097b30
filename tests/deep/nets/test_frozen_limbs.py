"""``nets.layers.frozen_limbs``: inside a collection the int8 embedding's limbs are computed once, not at every
step. Checked against the layer that recomputes them (bit for bit), in learners' collections (eager and compiled
against the learner without the scope), and for what it must refuse or leave alone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from ers_deep.nets import int8
from ers_deep.nets.layers import SLinear, frozen_limbs
from ers_deep.train import evaluate, ippo
from tests.deep.nets.test_int8 import hanabi_observations
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import rollouts, tiny_config


@pytest.fixture(autouse=True)
def int8_on() -> Iterator[None]:
    """The switch on for each test, then as it was."""
    on = int8.int8_inputs()
    int8.use_int8_inputs(True)
    yield
    int8.use_int8_inputs(on)


def layers() -> tuple[SLinear, SLinear]:
    g = [torch.Generator().manual_seed(s) for s in (0, 1)]
    return SLinear(658, 64, g, binary_input=True), SLinear(658, 64, g)


def test_inside_it_the_layer_equals_the_one_that_recomputes_the_limbs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binary, plain = layers()
    x = torch.cat([hanabi_observations(96, seed=s) for s in (0, 1)])
    with torch.no_grad():
        expected = binary(x)
        calls = []
        real = int8.int8_limbs
        monkeypatch.setattr(int8, "int8_limbs", lambda w: calls.append(1) or real(w))
        with frozen_limbs(torch.nn.ModuleList([binary, plain])):
            assert binary.limbs_frozen and not plain.limbs_frozen
            inside = [binary(x[:, i : i + 16]) for i in range(0, 96, 16)]
        assert len(calls) == 1  # once on entry for the one binary layer, not once per product
        assert not binary.limbs_frozen
    assert torch.equal(torch.cat(inside, dim=1), expected)
    assert "limbs" not in binary.state_dict() and "limb_scale" not in binary.state_dict()  # not saved


def test_a_gradient_inside_it_takes_the_differentiable_product() -> None:
    binary, _ = layers()
    x = hanabi_observations(32).expand(2, -1, -1)
    with frozen_limbs(binary):
        binary(x).sum().backward()
    assert binary.weight.grad is not None and bool(binary.weight.grad.abs().sum() > 0)


@pytest.mark.parametrize("how", ["in place", ".data"])
def test_a_weight_changed_inside_is_refused_and_the_scope_ends(how: str) -> None:
    binary, _ = layers()
    with pytest.raises(RuntimeError, match="changed inside"), frozen_limbs(binary), torch.no_grad():
        if how == "in place":
            binary.weight.mul_(2.0)
        else:
            binary.weight.data = binary.weight.data * 2.0
    assert not binary.limbs_frozen


def test_with_the_switch_off_it_does_nothing() -> None:
    binary, _ = layers()
    int8.use_int8_inputs(False)
    with frozen_limbs(binary):
        assert not binary.limbs_frozen
        assert not bool(binary.limbs.any())  # never filled


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_a_learners_collection_is_the_one_without_it(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Two collections of a Hanabi learner with the int8 embedding: with the scope (the learner's) and with it
    replaced by nothing (the limbs recomputed at every step), equal bit for bit, eager and compiled."""
    cfg = tiny_config("hanabi", collect_mode=mode, update_mode="eager", int8_inputs=True)
    ours = rollouts(cfg, 2)
    monkeypatch.setattr(ippo, "frozen_limbs", lambda net: contextlib.nullcontext())
    recomputed = rollouts(cfg, 2)
    for (a, _), (b, _) in zip(ours, recomputed, strict=True):
        for name in ("obs", "action", "logp", "value", "last_value"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_play_computes_the_limbs_once_per_net_and_equals_recomputing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``train.evaluate.play`` runs its games inside the scope, once per distinct net (one net in both seats here),
    and plays the same games as with the limbs recomputed at every step."""
    cfg = tiny_config("hanabi", seeds=(0,), int8_inputs=True)
    net = ippo.Learner(cfg).net
    agents = [evaluate.Agent(net), evaluate.Agent(net)]
    calls: list[int] = []
    real = int8.int8_limbs
    monkeypatch.setattr(int8, "int8_limbs", lambda w: calls.append(1) or real(w))
    ours = evaluate.play(agents, cfg, 16, seed=3)
    assert len(calls) == 1
    monkeypatch.setattr(evaluate, "frozen_limbs", lambda net: contextlib.nullcontext())
    recomputed = evaluate.play(agents, cfg, 16, seed=3)
    assert len(calls) > 10  # now once per step and seat
    assert ours == recomputed
