"""A learner's CPU product switches (``ProductSwitches``) hold inside its collection and update only: the process
keeps its own before, between and after, so a policy evaluated beside a learner multiplies as one loaded from disk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ers_deep.nets import blas
from ers_deep.train.ippo import Learner, ProductSwitches
from tests.deep.threads import single_thread
from tests.deep.train.twins import tiny_config

pytestmark = pytest.mark.skipif(blas.numpy_blas() != "openblas", reason="cpu_products='openblas' needs it")

OWN = ProductSwitches("openblas", True, True)


def _learner() -> Learner:
    cfg = tiny_config(
        "hanabi",
        collect_mode="eager",
        update_mode="eager",
        cpu_products="openblas",
        bf16_gradients=True,
        int8_inputs=True,
    )
    return Learner(cfg)


def _seen_in_phases(learner: Learner, read: Callable[[], object]) -> dict[str, object]:
    """``read()`` at the collection's first forward ("collect") and at the last minibatch update ("update"),
    filled in as the learner runs (spies on its net's forward and its updater)."""
    seen: dict[str, object] = {}
    forward, update = learner.net.forward, learner.updater.__call__

    def spy_forward(*args: Any, **kwargs: Any) -> Any:
        seen.setdefault("collect", read())
        return forward(*args, **kwargs)

    def spy_update(*args: Any, **kwargs: Any) -> Any:
        seen["update"] = read()
        return update(*args, **kwargs)

    learner.net.forward = spy_forward  # type: ignore[method-assign]
    learner.updater = type(
        "Spy", (), {"__call__": staticmethod(spy_update), "set_lr": learner.updater.set_lr}
    )()
    return seen


def test_a_learner_enters_its_switches_and_leaves_the_process_as_it_found_them() -> None:
    process = ProductSwitches.now()
    assert process != OWN  # the import's switches (a test beside this one that left them set would fail here)
    learner = _learner()
    assert learner.switches == OWN and ProductSwitches.now() == process
    seen = _seen_in_phases(learner, ProductSwitches.now)
    learner.train_step()
    assert seen == {"collect": OWN, "update": OWN}
    assert ProductSwitches.now() == process
    ro, _ = learner.collect()  # called alone (benchmarks), too
    assert ProductSwitches.now() == process and ro.obs.shape[1] == learner.config.num_steps


def test_the_switches_are_restored_after_an_exception() -> None:
    process = ProductSwitches.now()
    with pytest.raises(RuntimeError, match="inside"), OWN.applied():
        assert ProductSwitches.now() == OWN
        raise RuntimeError("inside")
    assert ProductSwitches.now() == process
    with pytest.raises(ValueError, match="resolved"):
        blas.set_cpu_products("auto")


def test_switches_set_on_the_learner_reach_its_collection() -> None:
    """``scripts/switch_ab.py`` times one learner with a switch off and on by setting ``learner.switches``: the
    collection reads the learner's value at each call (it kept a copy made at construction)."""
    import dataclasses

    learner = _learner()
    off = dataclasses.replace(OWN, int8_inputs=False)
    learner.switches = off
    seen: list[ProductSwitches] = []
    forward = learner.net.forward

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(ProductSwitches.now())
        return forward(*args, **kwargs)

    learner.net.forward = spy  # type: ignore[method-assign]
    learner.collect()
    assert seen and all(s == off for s in seen)


def test_numpy_blas_runs_torchs_threads_inside_the_learner_only() -> None:
    """With OpenBLAS's products numpy's BLAS runs torch's thread count inside the collection and the update, and
    the process's count before, between and after (the learner set it for the rest of the process before
    2026-12-08, so ers-exact's numpy code beside a one-thread learner ran one thread)."""
    import torch
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"), single_thread():
        if blas.blas_threads() != 2:
            pytest.skip("numpy's BLAS cannot run 2 threads here")
        assert torch.get_num_threads() == 1
        learner = _learner()
        assert blas.blas_threads() == 2
        seen = _seen_in_phases(learner, blas.blas_threads)
        learner.train_step()
        assert seen == {"collect": 1, "update": 1}
        assert blas.blas_threads() == 2
        with pytest.raises(RuntimeError, match="inside"), OWN.applied():
            assert blas.blas_threads() == 1
            raise RuntimeError("inside")
        assert blas.blas_threads() == 2
