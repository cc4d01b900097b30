"""The CPU fast paths (``ers_deep.accel``): FastStep and FastRollout, eager and compiled, equal the eager
``env.step`` of twin envs on every field; the compiled Hanabi observation equals the eager one; bad
configurations are refused. The CUDA-graph modes: ``test_gpu.py``."""

from __future__ import annotations

import pytest
import torch

from ers_deep.accel import FastRollout, FastStep, RandomLegal, resolve_mode
from ers_deep.envs import HanabiEnv, OvercookedV2Env, TabularEnv
from tests.deep.accel.twins import check_fast_rollout, check_fast_step, make_env
from tests.deep.threads import one_thread  # noqa: F401


@pytest.mark.parametrize("mode", ["eager", "compile"])
@pytest.mark.parametrize(
    "name, kw",
    [("hanabi", {"preset": "Hanabi-Very-Small"}), ("overcooked-v2", {"max_steps": 20}), ("tabular", {})],
)
def test_fast_step_equals_eager_step(name: str, kw: dict, mode: str) -> None:
    restarts = check_fast_step(name, batch=16, steps=60, device="cpu", mode=mode, **kw)
    assert restarts >= 16  # auto-resets happened inside the checked window


@pytest.mark.parametrize("actor", ["random", "policy"])
@pytest.mark.parametrize(
    "name, kw",
    [("hanabi", {"preset": "Hanabi-Very-Small"}), ("overcooked-v2", {"max_steps": 7}), ("tabular", {})],
)
def test_fast_rollout_equals_eager_steps(name: str, kw: dict, actor: str) -> None:
    check_fast_rollout(name, batch=8, k=5, calls=3, device="cpu", mode="eager", actor=actor, **kw)


def test_compiled_rollout_equals_eager_steps() -> None:
    check_fast_rollout(
        "overcooked-v2", batch=8, k=4, calls=2, device="cpu", mode="compile", actor="random", max_steps=5
    )


@pytest.mark.parametrize(
    "preset, players", [("Hanabi-Full", 2), ("Hanabi-Full", 4), ("Hanabi-Small", 3), ("minimal", 2)]
)
def test_concatenated_observation_equals_in_place(preset: str, players: int) -> None:
    """The observation torch.compile traces (one concatenation) equals the eager one (written in place),
    which the HLE differential tests check."""
    env = HanabiEnv(preset, batch_size=32, seed=2, players=players, check_legal=False)
    g = torch.Generator().manual_seed(0)
    for _ in range(80):
        out = env.step((torch.rand(env.legal_mask().shape, generator=g) * env.legal_mask()).argmax(-1))
        assert torch.equal(env._observe_concat(env.state), out.obs)


def test_rollout_records_what_is_asked() -> None:
    env = make_env("hanabi", 4, "cpu", preset="Hanabi-Very-Small")
    roll = FastRollout(env, RandomLegal(env), 3, mode="eager", record=("action", "reward"))
    got = roll()
    assert set(got) == {"action", "reward"} and got["action"].shape == (3, 4, 2)
    assert FastRollout(env, RandomLegal(env), 2, mode="eager", record=())() == {}
    with pytest.raises(ValueError, match="'rewards'"):
        FastRollout(env, RandomLegal(env), 2, mode="eager", record=("rewards",))()


def test_bad_configurations_are_refused() -> None:
    env = make_env("hanabi", 4, "cpu")
    with pytest.raises(ValueError, match="CUDA"):
        FastStep(env, mode="graph")
    with pytest.raises(ValueError, match="unknown mode"):
        FastStep(env, mode="fast")
    with pytest.raises(ValueError, match="branch_free=True"):
        FastStep(OvercookedV2Env(batch_size=2), mode="compile")
    with pytest.raises(ValueError, match="observe=False"):
        FastStep(OvercookedV2Env(batch_size=2), mode="eager", observe=False)
    with pytest.raises(ValueError, match="check_legal=False"):
        FastStep(HanabiEnv(batch_size=2, branch_free=True), mode="eager")
    with pytest.raises(ValueError, match="branch_free=True"):
        FastStep(TabularEnv("dectiger", batch_size=2, check_legal=False), mode="compile")
    with pytest.raises(ValueError, match="check_legal=False"):
        FastStep(TabularEnv("dectiger", batch_size=2, branch_free=True), mode="eager")
    with pytest.raises(ValueError, match="steps"):
        FastRollout(env, RandomLegal(env), 0)


def test_auto_mode_on_cpu_compiles_small_batches_only() -> None:
    assert resolve_mode("auto", make_env("overcooked-v2", 512, "cpu")) == "compile"
    assert resolve_mode("auto", make_env("overcooked-v2", 1024, "cpu")) == "eager"
    assert resolve_mode("auto", make_env("hanabi", 16, "cpu")) == "compile"
    assert resolve_mode("auto", make_env("hanabi", 32, "cpu")) == "eager"
    assert resolve_mode("auto", make_env("tabular", 1, "cpu")) == "eager"  # AUTO_EAGER: compiled on request


def test_every_stepper_has_its_own_compile_budget() -> None:
    """torch.compile allows a few variants per code object (a hard error beyond with fullgraph); envs of
    several batch sizes in one process must not share that budget."""
    import torch._dynamo.config as dynamo_config

    with dynamo_config.patch(recompile_limit=1):  # the config's own patcher (monkeypatch breaks its aliases)
        for batch in (2, 3):
            env = make_env("overcooked-v2", batch, "cpu", max_steps=5)
            out = FastStep(env, mode="compile")(torch.zeros(batch, 2, dtype=torch.long))
            assert out.obs.shape[0] == batch


def test_auto_falls_back_when_compilation_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled mode chosen by "auto" steps eagerly, with a warning and the same numbers, when torch.compile
    fails (e.g. no C++ compiler); an explicit compiled mode raises."""
    from ers_deep.accel import step as step_module

    def broken(fn: object) -> object:
        def fail(*args: object) -> None:
            raise RuntimeError("no compiler here")

        return fail

    monkeypatch.setattr(step_module, "compile_fn", broken)
    env, twin = (
        make_env("overcooked-v2", 8, "cpu", max_steps=5),
        make_env("overcooked-v2", 8, "cpu", max_steps=5),
    )
    fast = FastStep(env)  # auto: compile at this batch size on CPU
    actions = torch.randint(6, (8, 2), generator=torch.Generator().manual_seed(0))
    with pytest.warns(UserWarning, match="no compiler here"):
        out = fast(actions)
    assert fast.mode == "eager" and torch.equal(out.obs, twin.step(actions).obs)
    with pytest.raises(RuntimeError, match="no compiler here"):
        FastStep(make_env("overcooked-v2", 8, "cpu"), mode="compile")(actions)


def test_rollout_restart_after_reset() -> None:
    """After env.reset(seed), restart() continues from the new games: the next rollout equals a fresh
    rollout of a twin env reset the same way."""
    env, twin = (
        make_env("hanabi", 6, "cpu", preset="Hanabi-Very-Small"),
        make_env("hanabi", 6, "cpu", preset="Hanabi-Very-Small"),
    )
    roll = FastRollout(env, RandomLegal(env, seed=4), 5, mode="eager")
    roll()
    env.reset(seed=11)
    twin.reset(seed=11)
    roll.restart()
    fresh = FastRollout(twin, RandomLegal(twin, seed=4), 5, mode="eager")
    fresh.actor.generator.set_state(roll.actor.generator.get_state())
    a, b = roll(), fresh()
    assert all(torch.equal(a[k], b[k]) for k in b)


@pytest.mark.parametrize("name", ["hanabi", "overcooked-v2", "tabular"])
def test_state_only_step_equals_eager_state(name: str) -> None:
    """observe=False skips the observation only: the state and every other output equal the eager step's."""
    kw = (
        {"preset": "Hanabi-Very-Small"} if name == "hanabi" else {"max_steps": 6} if name != "tabular" else {}
    )
    env, twin = make_env(name, 8, "cpu", **kw), make_env(name, 8, "cpu", **kw)
    fast = FastStep(env, mode="eager", observe=False)
    g = torch.Generator().manual_seed(1)
    legal = twin.legal_mask()
    for _ in range(12):
        actions = (torch.rand(legal.shape, generator=g) * legal).argmax(-1)
        a, b = fast(actions), twin.step(actions)
        assert a.obs.shape == (8, env.num_agents, 0)
        assert all(torch.equal(x, getattr(b, k)) for k, x in a._asdict().items() if k != "obs")
        assert all(torch.equal(getattr(env.state, k), v) for k, v in vars(twin.state).items())
        legal = b.legal if hasattr(b, "legal") else legal


def test_write_back_when_a_field_is_another_fields_buffer() -> None:
    """Hanabi's step sets last_player = cur, then rebinds cur: the copy back into the static buffers must use
    the old cur for last_player (a graph replay found this; see test_graph_emulated.py)."""
    from dataclasses import dataclass

    from ers_deep.accel.capture import state_tensors, write_back

    @dataclass
    class S:
        cur: torch.Tensor
        last: torch.Tensor

    s = S(torch.tensor([0, 1]), torch.tensor([9, 9]))
    static = state_tensors(s)
    s.last, s.cur = s.cur, (s.cur + 1) % 2  # the step's order
    write_back(s, static)
    assert s.cur is static["cur"] and s.last is static["last"]
    assert s.cur.tolist() == [1, 0] and s.last.tolist() == [0, 1]
