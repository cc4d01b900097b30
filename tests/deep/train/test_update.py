"""The compiled PPO update (``update_mode="compile"``) equals the eager one: parameters after 3 updates from the
same seeds within 1e-6 (Hanabi's MLP, Overcooked V2's CNN + fused GRU). Tabular heads train with learning
rate 0.5: Adam turns float32 rounding noise in near-zero gradients (~1e-9, which compiled kernels sum in
another order) into steps of lr * g / (|g| + eps) ~ 5e-5, so there the bound is 1e-3."""

from __future__ import annotations

import warnings

import pytest
import torch

from ers_deep.train import Learner
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import (
    max_difference,
    mode_vs_eager_params,
    same_rollouts_params,
    tiny_config,
    trained_params,
)


def test_compiled_update_equals_eager_update_hanabi() -> None:
    """The float32 embedding: with ``int8_inputs`` a last-bit difference between the two can round a weight to
    other int8 limbs, so that learner has its own bounds (``tests/deep/nets/test_int8.py``)."""
    cfg = tiny_config("hanabi", collect_mode="eager", int8_inputs=False)
    diff = mode_vs_eager_params(cfg, "compile", updates=3)
    assert diff < 1e-6, diff


def test_learners_of_other_seeds_reuse_the_compiled_update() -> None:
    """In one process, compiled learners of the same config but other seeds (a pool, a population) reuse the
    first one's compiled loss and clipping without recompiling, and each still updates as its eager twin. Before,
    the loss guarded on the net's seeds: every learner recompiled, and from the 9th on torch gave up compiling
    (its recompile limit) and ran the update eagerly, silently."""
    from torch._dynamo.utils import counters

    from ers_deep.nets import NetConfig

    # its own width; the float32 embedding, for the 1e-6 bound (as above)
    cfg = tiny_config("hanabi", collect_mode="eager", net=NetConfig(kind="mlp", hidden=20), int8_inputs=False)
    trained_params(cfg.replace(update_mode="compile"), 1)
    graphs = counters["stats"]["unique_graphs"]
    for seeds in ((2, 3), (4, 5)):
        other = cfg.replace(seeds=seeds)
        compiled = trained_params(other.replace(update_mode="compile"), 2)
        assert counters["stats"]["unique_graphs"] == graphs, "a learner of other seeds recompiled"
        assert max_difference(compiled, trained_params(other.replace(update_mode="eager"), 2)) < 1e-6


def test_configs_beyond_torchs_recompile_limit_still_compile() -> None:
    """Learners of other configs in one process each compile their update, also beyond torch's
    ``recompile_limit`` (8 by default; 1 here, so that two configs exceed it): before, from the 9th config of a
    process on, the update ran eagerly with only a log line. The raised limit holds only while the update runs."""
    from torch._dynamo.utils import counters

    from ers_deep.nets import NetConfig

    before = torch._dynamo.config.recompile_limit
    # torch's own patch: monkeypatch's undo deletes a key of dynamo's config module (it then "does not exist")
    with torch._dynamo.config.patch(recompile_limit=1):
        for width in (27, 29):  # widths no other test compiles (test_precompile's is 24): none in the caches
            net = NetConfig(kind="mlp", hidden=width)
            cfg = tiny_config("hanabi", collect_mode="eager", update_mode="compile", net=net)
            graphs = counters["stats"]["unique_graphs"]
            trained_params(cfg, 1)
            assert counters["stats"]["unique_graphs"] >= graphs + 2, f"width {width}: its update not compiled"
        assert torch._dynamo.config.recompile_limit == 1
    assert torch._dynamo.config.recompile_limit == before


@pytest.mark.slow  # two minutes of compilation on the 2-core machine
@pytest.mark.parametrize("env, tol", [("overcooked-v2", 1e-6), ("tabular:dectiger", 1e-3)])
def test_compiled_update_equals_eager_update(env: str, tol: float) -> None:
    diff = mode_vs_eager_params(tiny_config(env, collect_mode="eager"), "compile", updates=3)
    assert diff < tol, diff


def test_the_same_rollouts_harness_updates_as_train_step_does() -> None:
    """``twins.same_rollouts_params`` (what the gpu test of a CUDA update against the CPU one runs): its
    reference learner, collecting and drawing minibatches itself through ``Learner.minibatches`` and
    ``ppo_update(batches=...)``, equals a learner that runs ``train_step``, bit for bit; its twin on the same
    device and update mode, fed that learner's rollouts and minibatches, too. Parameters move in between."""
    cfg = tiny_config("hanabi", collect_mode="eager", update_mode="eager")
    ref, twin = same_rollouts_params(cfg, cfg, updates=3)
    start = [p.detach() for p in Learner(cfg).net.parameters()]
    for a, b, c in zip(ref, twin, trained_params(cfg, 3), strict=True):
        assert torch.equal(a, c) and torch.equal(b, c)
    assert max_difference(ref, start) > 1e-3


def test_a_twin_with_another_learning_rate_drifts_apart() -> None:
    """The harness can fail: a twin whose learning rate differs ends elsewhere."""
    cfg = tiny_config("hanabi", collect_mode="eager")
    ref, twin = same_rollouts_params(cfg, cfg.replace(lr=cfg.lr * 1.5), updates=2)
    assert max_difference(ref, twin) > 1e-4


@pytest.mark.parametrize("update_mode", ["eager", "compile"])
def test_an_error_in_the_first_eager_step_is_raised_once(
    update_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error in the loss of the first step is the error raised: the eager update raises it at once; the
    compiled one, whose fallback to eager is for compilation failures, retries eagerly once and raises it.
    (The eager step took its own loss for a compiled one that failed and retried itself, warning "torch.compile
    failed" each time, until a RecursionError hid the error.)"""
    import ers_deep.train.update as update

    calls: list[int] = []

    def broken_loss(*args: object, **kwargs: object) -> None:
        calls.append(1)
        raise ValueError("a real error in the loss")

    monkeypatch.setattr(update, "ppo_loss", broken_loss)
    learner = Learner(tiny_config("hanabi", collect_mode="eager", update_mode=update_mode))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with pytest.raises(ValueError, match="a real error in the loss"):
                learner.train_step()
        finally:
            # dynamo cannot resume after the raise inside the traced loss (its graph break gb0088): it marks
            # ``PPOUpdate._loss``'s code to be skipped for the rest of the process, so every later compiled learner
            # would run the loss's body as a frame of its own (another graph, which missed the caches the
            # precompile helper filled: test_precompile failed after this test). Forget that mark.
            torch.compiler.reset()
    assert len(calls) == (1 if update_mode == "eager" else 2)
    assert sum("torch.compile failed" in str(w.message) for w in caught) == len(calls) - 1
