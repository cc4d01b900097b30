"""The CUDA-graph fast paths (marker ``gpu``; skipped without CUDA): a captured step equals the eager step of a
twin env on every field (state, observations, rewards, dones, legal masks) over 400+ steps of 512 games with
auto-resets, for the three env families (tabular: Dec-Tiger); a captured k-step rollout equals k eager steps (random legal moves and a policy
network); replays draw fresh random numbers and stay reproducible. Imports torch and ers-deep only."""

from __future__ import annotations

import pytest
import torch

from ers_deep.accel import FastRollout, FastStep, RandomLegal
from tests.deep.accel.twins import check_fast_rollout, check_fast_step, check_rollout_sees_reset, make_env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
ENVS = [("hanabi", {}), ("overcooked-v2", {}), ("tabular", {})]


@pytest.mark.parametrize("mode", ["graph", "compile-graph"])
@pytest.mark.parametrize("name, kw", ENVS)
def test_captured_step_equals_eager_step(name: str, kw: dict, mode: str) -> None:
    restarts = check_fast_step(name, batch=512, steps=420, device="cuda", mode=mode, **kw)
    assert restarts >= 512  # every game restarted at least once on average


@pytest.mark.parametrize("actor", ["random", "policy"])
@pytest.mark.parametrize("name, kw", ENVS)
def test_captured_rollout_equals_eager_steps(name: str, kw: dict, actor: str) -> None:
    check_fast_rollout(name, batch=512, k=16, calls=3, device="cuda", mode="graph", actor=actor, **kw)


def test_compiled_captured_rollout_equals_eager_steps() -> None:
    check_fast_rollout(
        "overcooked-v2", batch=512, k=8, calls=2, device="cuda", mode="compile-graph", actor="policy"
    )


@pytest.mark.parametrize("name", ["hanabi", "overcooked-v2"])
def test_replays_draw_fresh_numbers_reproducibly(name: str) -> None:
    """Two replays of a captured rollout draw different actions (the RNG is not frozen into the graph), and
    a second env + actor with the same seeds replays the same numbers."""
    runs = []
    for _ in range(2):
        env = make_env(name, 256, "cuda")
        roll = FastRollout(
            env, RandomLegal(env, seed=1), 8, mode="graph", record=("action",), clone_outputs=True
        )
        runs.append([roll()["action"] for _ in range(3)])
    assert not torch.equal(runs[0][0], runs[0][1]) and not torch.equal(runs[0][1], runs[0][2])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_reset_between_replays_is_seen() -> None:
    env, twin = make_env("hanabi", 256, "cuda"), make_env("hanabi", 256, "cuda")
    fast = FastStep(env, mode="graph", clone_outputs=True)
    moves = torch.zeros(256, dtype=torch.long, device="cuda") + 5  # play slot 0: always legal
    fast(moves), twin.step(moves)
    env.reset(seed=9), twin.reset(seed=9)
    a, b = fast(moves), twin.step(moves)
    assert torch.equal(a.obs, b.obs) and torch.equal(env.state.deck, twin.state.deck)


def test_rollout_notices_a_reset_between_replays() -> None:
    check_rollout_sees_reset("overcooked-v2", 256, "cuda", "graph")
