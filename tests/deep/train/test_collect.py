"""The one collection path: ``FastCollection`` (eager, compiled, emulated graph) gives the rollouts of the
reference, TorchRL's ``Collector`` over the same env with the same sampler, bit for bit, on a tabular game
(Dec-Tiger: chance in T and U, episodes of 2 steps ending mid-rollout), Hanabi and Overcooked V2 (recurrent,
episodes ending mid-rollout); the legacy loop too; resume is exact."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ers_deep.accel import game_to_actors
from ers_deep.accel import rollout as rollout_module
from ers_deep.accel import step as step_module
from ers_deep.other_play import op_net, op_symmetries
from ers_deep.train import Learner
from ers_deep.train import learner_setup as learner_setup_module
from ers_deep.train.collect import Rollout, RunnerState
from ers_deep.train.config import TrainConfig
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


@pytest.mark.parametrize("env", ENVS)
def test_compiled_collection_equals_torchrl_collector_and_native_loop(env: str) -> None:
    cfg = tiny_config(env, collect_mode="compile")
    fast = rollouts(cfg.replace(collector="fast"), calls=2)
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="torchrl"), calls=2))
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="native"), calls=2))


def test_compiled_collection_with_the_v0_belief_equals_torchrl_collector() -> None:
    """Hanabi with JaxMARL's knowledge encoding (``hanabi_knowledge="v0-belief"``): the compiled step's
    concatenated observation (belief included) gives the reference's rollouts, and the belief is in them."""
    cfg = tiny_config("hanabi", collect_mode="compile", hanabi_knowledge="v0-belief")
    fast = rollouts(cfg.replace(collector="fast"), calls=2)
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="torchrl"), calls=2))
    assert bool((fast[0][0].obs % 1 != 0).any())


@pytest.mark.parametrize("env", ENVS)
def test_emulated_graph_collection_equals_torchrl_collector_and_native_loop(
    env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rollout_module, "capture", emulated_capture)
    for module in (step_module, learner_setup_module):  # graph modes on a CPU env
        monkeypatch.setattr(module, "resolve_mode", lambda mode, env: "eager" if mode == "auto" else mode)
    cfg = tiny_config(env)
    fast = rollouts(cfg.replace(collector="fast", collect_mode="graph"), calls=3)
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="torchrl", collect_mode="graph"), calls=3))
    assert_rollouts_equal(fast, rollouts(cfg.replace(collector="native", collect_mode="graph"), calls=3))


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
    ta, tb = ra.tensors(), rb.tensors()
    assert ta.keys() == tb.keys() and all(torch.equal(v, tb[k]) for k, v in ta.items())
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


@pytest.mark.parametrize(
    ("env", "other_play"),
    [("hanabi", False), ("hanabi", True), ("overcooked-v2", False), ("overcooked-v2", True)],
    ids=["mlp", "mlp-op", "cnn-gru", "cnn-gru-op"],
)
def test_a_one_tensor_hidden_checkpoint_loads(env: str, other_play: bool) -> None:
    """Checkpoints written before the net's state had named fields stored it as one tensor ``runner/hidden``
    [S, N, H] (H = 0 for feed-forward nets), other-play's actor id and episode counter (as floats) in two
    more columns at the end: it loads into the named fields and the collection continues the same."""
    cfg = tiny_config(env, collect_mode="eager")

    def learner(cfg: TrainConfig = cfg) -> Learner:
        return Learner(cfg, net=op_net(cfg, op_symmetries(cfg, "mdp")) if other_play else None)

    a = learner()
    a.collect()
    tensors = {k: v.clone() for k, v in a.state_tensors().items() if not k.startswith("runner/hidden/")}
    h = a.runner.hidden
    columns = [h.gru if h.gru is not None else torch.zeros(a.S, a.N, 0)]
    if other_play:
        assert h.actor is not None and h.episode is not None and bool((h.episode > 0).all())
        columns += [h.actor.float()[..., None], h.episode.float()[..., None]]
    tensors["runner/hidden"] = torch.cat(columns, -1)  # the old layout
    b = learner()
    b.load_state_tensors(tensors, a.counters())
    old, new = a.runner.hidden.tensors(), b.runner.hidden.tensors()
    assert old.keys() == new.keys() and all(
        torch.equal(v, new[k]) and v.dtype == new[k].dtype for k, v in old.items()
    )
    ra, rb = a.collect()[0], b.collect()[0]
    assert torch.equal(ra.action, rb.action) and torch.equal(ra.logp, rb.logp)


def _count_outside_step(learner: Learner, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of the env's ``observe`` / ``legal_mask`` made outside its own step (``step``, ``step_state``)
    from now on (the counts fill in as the learner runs)."""
    env, inside, counts = learner.env, [0], {"observe": 0, "legal_mask": 0}
    for name in ("step", "step_state"):
        if hasattr(env, name):
            original = getattr(env, name)

            def stepping(*a: object, _f: Any = original, **k: object) -> Any:
                inside[0] += 1
                try:
                    return _f(*a, **k)
                finally:
                    inside[0] -= 1

            monkeypatch.setattr(env, name, stepping)
    for name in counts:
        original = getattr(env, name)

        def counted(*a: object, _f: Any = original, _n: str = name, **k: object) -> Any:
            counts[_n] += inside[0] == 0
            return _f(*a, **k)

        monkeypatch.setattr(env, name, counted)
    return counts


@pytest.mark.parametrize("env", ENVS)
def test_the_fast_collection_never_observes_after_a_step(env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step's own observation and legal moves feed the next step: a collection asks the env for neither
    outside its step (Overcooked V2's steps return no legal mask; every move is legal there, so its constant
    mask is built per step). The earlier native loop re-observed at every step, so the count can fail."""
    counts = {}
    for collector in ("fast", "native"):
        learner = Learner(tiny_config(env, collect_mode="eager", collector=collector))
        learner.collect()  # after the first: a rollout continues the last one
        counts[collector] = _count_outside_step(learner, monkeypatch)
        learner.collect()
    assert counts["fast"]["observe"] == 0, counts
    if env != "overcooked-v2":
        assert counts["fast"]["legal_mask"] == 0, counts
    assert counts["native"]["observe"] >= tiny_config(env).num_steps, counts


def _resumed_rollouts(cfg: TrainConfig, warm: bool) -> tuple[list[Rollout], list[Rollout]]:
    """Two rollouts of a learner after one update, and those of a second learner that loads its state at that
    point (``warm``: it collected and updated itself first, so a graph mode has captured what it replaces)."""
    a = Learner(cfg)
    a.train_step()
    clock = a.env.state.step  # Overcooked V2's episode clocks, in place: every game ends in the next 15 steps
    clock.copy_(torch.arange(len(clock)) * 7 % 15 + 385)
    tensors = {k: v.clone() for k, v in a.state_tensors().items()}
    counters = a.counters()
    b = Learner(cfg)
    if warm:
        b.train_step()
    b.load_state_tensors(tensors, counters)
    return [a.collect()[0].clone() for _ in range(2)], [b.collect()[0].clone() for _ in range(2)]


@pytest.mark.parametrize("mode", ["compile", "graph"])
@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
def test_a_checkpoint_resumes_a_compiled_or_captured_collection_exactly(
    mode: str, warm: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overcooked V2 (recurrent, episodes ending mid-rollout) in the compiled and the (emulated) captured
    collection: a learner loading another's checkpoint tensors, fresh or after capturing its own graph,
    collects the same rollouts as the learner it was taken from, bit for bit."""
    if mode == "graph":
        monkeypatch.setattr(rollout_module, "capture", emulated_capture)
        for module in (step_module, learner_setup_module):
            monkeypatch.setattr(module, "resolve_mode", lambda mode, env: "eager" if mode == "auto" else mode)
    cfg = tiny_config("overcooked-v2", collect_mode=mode, update_mode="eager")
    ra, rb = _resumed_rollouts(cfg, warm)
    assert any(bool(r.done.any()) for r in ra), "no episode ended: the check must include resets"
    for x, y in zip(ra, rb, strict=True):
        tx, ty = x.tensors(), y.tensors()
        assert tx.keys() == ty.keys()
        for k, v in tx.items():
            assert torch.equal(v, ty[k]), k
