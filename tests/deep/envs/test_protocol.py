"""Conformance of every registered env with ``ers_deep.envs.base.BatchedEnv``: the surface, the seeding rule,
the pure transition, the legal mask, and random legal play with auto-reset."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from ers_deep.envs import ENVS, BatchedEnv, Step, Transition, make_env, step_legal

B = 8
# env-specific constructor arguments that make episodes end within the tests' 50 steps
EXTRA: dict[str, dict[str, Any]] = {"overcooked-v2": {"max_steps": 20}}
NAMES = sorted(ENVS)


def _env(name: str, seed: int | None = 0, **kwargs: Any) -> BatchedEnv:
    return make_env(name, batch_size=B, seed=seed, **{**EXTRA.get(name, {}), **kwargs})


def _random_legal(env: BatchedEnv, gen: torch.Generator) -> torch.Tensor:
    """[B, P] a uniformly random legal action per agent (0 where an agent has none: not its turn)."""
    mask = env.legal_mask()
    return (torch.rand(mask.shape, generator=gen) * mask).argmax(-1)


def _fields(x: Any) -> dict[str, torch.Tensor]:
    """The tensors of a state dataclass or a step NamedTuple, by name."""
    if dataclasses.is_dataclass(x):
        return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    return dict(x._asdict())


def _equal(a: Any, b: Any) -> bool:
    fa, fb = _fields(a), _fields(b)
    return fa.keys() == fb.keys() and all(torch.equal(fa[k], fb[k]) for k in fa)


def _rollout(env: BatchedEnv, first: Step, steps: int, seed: int) -> list[Step]:
    gen = torch.Generator().manual_seed(seed)
    return [first] + [env.step(_random_legal(env, gen)) for _ in range(steps)]


def test_registry() -> None:
    assert {"hanabi", "overcooked-v2", "tabular"} <= set(ENVS)
    with pytest.raises(ValueError, match="unknown env"):
        make_env("gym", batch_size=1)


@pytest.mark.parametrize("name", NAMES)
def test_surface(name: str) -> None:
    env = _env(name)
    assert isinstance(env, BatchedEnv)
    assert env.batch_size == B and env.device == torch.device("cpu")
    assert isinstance(env.generator, torch.Generator) and env.auto_reset is True
    P, A, O = env.num_agents, env.num_actions, env.obs_shape
    assert isinstance(P, int) and isinstance(A, int) and isinstance(O, tuple) and P >= 2 and A >= 2
    out = env.reset()
    assert isinstance(out, Step) and out.obs.shape == (B, P, *O)
    assert out.reward.shape == (B,) and out.reward.dtype == torch.float32 and not out.reward.any()
    assert out.done.shape == (B,) and out.done.dtype == torch.bool
    assert torch.equal(env.observe(), out.obs) and torch.equal(env.observe(env.state), out.obs)
    legal = env.legal_mask()
    assert legal.shape == (B, P, A) and legal.dtype == torch.bool and legal.any(-1).any(-1).all()
    assert torch.equal(env.legal_mask(env.state), legal)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_outputs(name: str) -> None:
    a, b = _env(name, seed=11), _env(name, seed=11)
    assert _equal(a.state, b.state)  # the constructor's seed fixes the first episodes too
    ra, rb = _rollout(a, a.reset(seed=5), 30, seed=1), _rollout(b, b.reset(seed=5), 30, seed=1)
    assert all(_equal(x, y) for x, y in zip(ra, rb))


@pytest.mark.parametrize("name", NAMES)
def test_a_random_seed_leaves_torchs_global_generator_alone(name: str) -> None:
    """``seed=None`` seeds the env's own generator: a caller's ``torch.manual_seed`` still fixes what follows
    (``torch.seed()`` re-seeded the global generator, 2026-12-07)."""
    torch.manual_seed(0)
    want = torch.rand(3)
    torch.manual_seed(0)
    a, b = _env(name, seed=None), _env(name, seed=None)
    assert torch.equal(torch.rand(3), want)
    a.reset(), b.reset()  # and two random seeds differ (8 games each)
    assert not _equal(a.state, b.state)


@pytest.mark.parametrize("name", NAMES)
def test_reset_seed_reproduces_the_first_episode(name: str) -> None:
    env = _env(name, seed=None)  # a random constructor seed: reset(seed) alone decides
    first_reset = env.reset(seed=3)
    start = env.state.clone()
    first = _rollout(env, first_reset, 30, seed=2)
    again = _rollout(env, env.reset(seed=3), 30, seed=2)
    assert all(_equal(x, y) for x, y in zip(first, again))
    env.reset()  # seed=None continues the generator: new episodes (a tabular game's first observation is
    assert not _equal(env.state, start)  # always the empty history, so compare the states)


@pytest.mark.parametrize("name", NAMES)
def test_transition_is_pure_and_equals_step(name: str) -> None:
    env = _env(name, seed=4)
    gen, ended = torch.Generator().manual_seed(4), 0
    env.reset()
    for _ in range(50):
        actions = _random_legal(env, gen)
        s, before = env.state, env.state.clone()
        rng = env.generator.get_state()
        tr = env.transition(s, actions)
        assert isinstance(tr, Transition) and tr.state is not s
        assert _equal(s, before) and env.state is s  # neither the input nor the env's state changed
        env.generator.set_state(rng)  # the step below draws what the transition drew
        out = env.step(actions)
        assert torch.equal(out.reward, tr.reward) and torch.equal(out.done, tr.done)
        live = ~out.done  # games not re-dealt by the auto-reset
        assert torch.equal(env.observe(tr.state)[live], out.obs[live])
        assert torch.equal(env.legal_mask(tr.state)[live], env.legal_mask()[live])
        for k, v in _fields(tr.state).items():
            assert torch.equal(v[live], getattr(env.state, k)[live]), k
        ended += int(out.done.sum())
    assert ended > 0


@pytest.mark.parametrize("name", NAMES)
def test_random_legal_play_with_auto_reset(name: str) -> None:
    env = _env(name, seed=6)
    gen, ended = torch.Generator().manual_seed(6), torch.zeros(B, dtype=torch.long)
    out = env.reset()
    for _ in range(50):
        legal = env.legal_mask()
        actions = _random_legal(env, gen)
        chosen = legal.gather(-1, actions[..., None]).squeeze(-1)  # [B, P]
        assert (chosen | ~legal.any(-1)).all()  # every agent that can act picks a legal action
        out = env.step(actions)
        assert out.obs.shape == (B, env.num_agents, *env.obs_shape) and out.reward.shape == (B,)
        assert torch.equal(step_legal(env, out), env.legal_mask())  # the next step's legal moves
        ended += out.done.long()
    assert (ended > 0).any()  # some games ended and were restarted inside step


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch_size", [0, -1, 2.5])
def test_bad_batch_size_is_refused(name: str, batch_size: float) -> None:
    """A batch of no games, a negative or a fractional one: a ValueError naming ``batch_size`` (Hanabi built
    an env of no games that failed at its first step, a negative batch failed inside torch.arange; 2.5 was
    silently truncated to 2)."""
    with pytest.raises(ValueError, match="batch_size"):
        make_env(name, batch_size=batch_size, seed=0, **EXTRA.get(name, {}))


@pytest.mark.parametrize("name", NAMES)
def test_reset_games_mask_needs_one_entry_per_game(name: str) -> None:
    """A mask of the wrong size is refused (Overcooked V2 restarted the games it named and ignored the rest)."""
    env = _env(name)
    before = env.state.clone()
    with pytest.raises(ValueError, match=f"one entry per game \\({B}\\)"):
        env.reset_games(torch.ones(B - 1, dtype=torch.bool))
    assert _equal(env.state, before)
    env.reset_games(torch.zeros(B, dtype=torch.long))  # an integer 0/1 mask of the right size is fine
    assert _equal(env.state, before)
