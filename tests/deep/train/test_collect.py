"""The one collection path: ``FastCollection`` (eager, compiled, emulated graph) gives the rollouts of the
reference, TorchRL's ``Collector`` over the same env with the same sampler, bit for bit, on a tabular game,
Hanabi and Overcooked V2 (recurrent, episodes ending mid-rollout); the legacy loop too; resume is exact."""

from __future__ import annotations

import pytest
import torch

from ers_deep.accel import game_to_actors
from ers_deep.accel import rollout as rollout_module
from ers_deep.accel import step as step_module
from ers_deep.train import Learner
from ers_deep.train import ippo as ippo_module
from ers_deep.train.collect import RunnerState
from tests.deep.accel.test_graph_emulated import emulated_capture
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import assert_rollouts_equal, rollouts, tiny_config

ENVS = ["tabular:dectiger", "hanabi", "overcooked-v2"]


@pytest.mark.parametrize("env", ENVS)
def test_fast_eager_collection_equals_torchrl_collector_and_native_loop(env: str) -> None:
    cfg = tiny_config(env)
    fast = rollouts(cfg.replace(collector="fast", collect_mode="eager"), calls=3)
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="torchrl", collect_mode="eager"), calls=3))
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="native", collect_mode="eager"), calls=3))


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_compiled_collection_equals_torchrl_collector(env: str) -> None:
    cfg = tiny_config(env, collect_mode="compile")
    fast = rollouts(cfg.replace(collector="fast"), calls=2)
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="torchrl"), calls=2))


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_emulated_graph_collection_equals_torchrl_collector(
    env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rollout_module, "capture", emulated_capture)
    for module in (step_module, ippo_module):  # graph modes on a CPU env
        monkeypatch.setattr(module, "resolve_mode", lambda mode, env: "eager" if mode == "auto" else mode)
    cfg = tiny_config(env)
    fast = rollouts(cfg.replace(collector="fast", collect_mode="graph"), calls=3)
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="torchrl", collect_mode="graph"), calls=3))


def test_runner_state_round_trip_continues_exactly() -> None:
    """Loading a cloned runner state (and env state, generators) into a fresh learner continues the same
    collection: what a checkpoint restores."""
    cfg = tiny_config("hanabi", collect_mode="eager")
    a = Learner(cfg)
    a.collect()
    tensors = {k: v.clone() for k, v in a.state_tensors().items()}  # on CPU they alias the live state
    counters = a.counters()
    b = Learner(cfg)
    b.load_state_tensors(tensors, counters)
    ra, rb = a.collect()[0], b.collect()[0]
    assert all(torch.equal(getattr(ra, k), getattr(rb, k)) for k in vars(ra))
    assert isinstance(a.runner, RunnerState) and torch.equal(a.runner.ep_return, b.runner.ep_return)


def test_a_per_actor_first_flag_checkpoint_loads() -> None:
    """Checkpoints written before the runner state stored ``first`` per game ([S, N] per actor) still load."""
    cfg = tiny_config("hanabi", collect_mode="eager")
    a = Learner(cfg)
    a.collect()
    tensors = {k: v.clone() for k, v in a.state_tensors().items()}
    per_game = tensors["runner/first"]
    tensors["runner/first"] = game_to_actors(per_game, a.S, a.P)  # the old layout
    b = Learner(cfg)
    b.load_state_tensors(tensors, a.counters())
    assert torch.equal(b.runner.first, per_game)
