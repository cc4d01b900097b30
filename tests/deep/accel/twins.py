"""Shared checks of the fast paths (CPU tests and the gpu-marked ones): a fast step or rollout against the
eager ``env.step`` of a twin env built with the same arguments, field by field."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import torch
from torch import Tensor

from ers_deep.accel import FastRollout, FastStep, PolicyActor, RandomLegal
from ers_deep.envs import HanabiEnv, OvercookedV2Env, TabularEnv
from ers_deep.nets import NetConfig, build_net


def make_env(name: str, batch: int, device: str, seed: int = 0, **kw: Any) -> Any:
    """A branch-free env without per-step checks; Overcooked's episode clocks staggered (deterministically)
    so that games end, and restart, at every step; ``tabular`` plays ``kw["game"]`` (Dec-Tiger by default:
    chance in T, U and b_0, every game restarting every H = 2 steps)."""
    if name == "tabular":
        game = kw.pop("game", "dectiger")
        return TabularEnv(
            game, batch_size=batch, device=device, seed=seed, check_legal=False, branch_free=True, **kw
        )
    if name == "hanabi":
        return HanabiEnv(
            kw.pop("preset", "Hanabi-Full"),
            batch_size=batch,
            device=device,
            seed=seed,
            check_legal=False,
            branch_free=True,
            **kw,
        )
    env = OvercookedV2Env(batch_size=batch, device=device, seed=seed, branch_free=True, **kw)
    env.state.step = torch.arange(batch, device=env.device) % env.max_steps
    return env


def assert_states_equal(a: Any, b: Any, where: str) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert torch.equal(x, y), f"{where}: state field {f.name}: {differ(x, y)}"


def differ(x: Tensor, y: Tensor) -> str:
    """Where two tensors differ: the count, the first index and both values there."""
    if x.shape != y.shape:
        return f"shapes {tuple(x.shape)} != {tuple(y.shape)}"
    bad = (x != y).nonzero()
    first = tuple(bad[0].tolist())
    return f"{len(bad)} entries differ, first at {first}: {x[first].item()} != {y[first].item()}"


def assert_steps_equal(a: Any, b: Any, where: str) -> None:
    for name, x in a._asdict().items():
        assert torch.equal(x, getattr(b, name)), f"{where}: output {name}: {differ(x, getattr(b, name))}"


def check_fast_step(name: str, batch: int, steps: int, device: str, mode: str, **kw: Any) -> int:
    """FastStep(mode) equals env.step of a twin on every state field and output for ``steps`` steps of
    random legal moves; returns how many games restarted (the check must include resets)."""
    fast_env, ref_env = make_env(name, batch, device, **kw), make_env(name, batch, device, **kw)
    fast = FastStep(fast_env, mode=mode)
    g = torch.Generator(device=device).manual_seed(7)
    legal = ref_env.legal_mask()
    restarts = 0
    for t in range(steps):
        actions = (torch.rand(legal.shape, generator=g, device=device) * legal).argmax(-1)
        out_ref, out_fast = ref_env.step(actions), fast(actions)
        assert_steps_equal(out_ref, out_fast, f"step {t}")
        assert_states_equal(ref_env.state, fast_env.state, f"step {t}")
        legal = out_ref.legal if hasattr(out_ref, "legal") else ref_env.legal_mask()
        restarts += int(out_ref.done.sum())
    return restarts


def policy_actor(env: Any, seeds: int) -> PolicyActor:
    kind = (
        NetConfig(kind="mlp", hidden=32)
        if isinstance(env, HanabiEnv)
        else NetConfig(kind="tabular", hidden=0)
        if isinstance(env, TabularEnv)
        else NetConfig(kind="cnn-gru", hidden=8, conv=8)
    )
    net = build_net(kind, list(range(seeds)), env.obs_shape, env.num_actions).to(env.device)
    return PolicyActor(net, seeds, torch.Generator(device=env.device).manual_seed(3))


ActorFactory = Callable[[Any], Any]


def check_fast_rollout(
    name: str, batch: int, k: int, calls: int, device: str, mode: str, actor: str, **kw: Any
) -> None:
    """``calls`` consecutive FastRollout(k) calls equal k * calls eager steps of a twin env driven by a twin
    actor, on every recorded field and on the final state."""
    fast_env, ref_env = make_env(name, batch, device, **kw), make_env(name, batch, device, **kw)
    make = (lambda e: RandomLegal(e, seed=5)) if actor == "random" else (lambda e: policy_actor(e, 2))
    fast_actor, ref_actor = make(fast_env), make(ref_env)
    if actor != "random":
        ref_actor.net.load_state_dict(fast_actor.net.state_dict())
    roll = FastRollout(fast_env, fast_actor, k, mode=mode)
    obs, legal = ref_env.observe(), ref_env.legal_mask()
    first = torch.ones(batch, dtype=torch.bool, device=device)
    carry = ref_actor.initial_carry(ref_env)
    for c in range(calls):
        got = roll()
        for t in range(k):
            where = f"call {c} step {t}"
            actions, carry, extras = ref_actor(obs, legal, first, carry)
            expect: dict[str, Tensor] = {
                "obs": obs,
                "legal": legal,
                "first": first,
                "action": actions,
                **extras,
            }
            out = ref_env.step(actions)
            expect.update({n: v for n, v in out._asdict().items() if n not in ("obs", "legal")})
            assert set(got) == set(expect), where
            for n, v in expect.items():
                if n in extras and v.is_floating_point():  # the network's outputs: a captured graph may pick
                    ok = torch.allclose(got[n][t], v, rtol=1e-5, atol=1e-6)  # another cuBLAS kernel
                else:  # env fields and actions: bit for bit
                    ok = torch.equal(got[n][t], v)
                assert ok, f"{where}: {n}"
            obs, first = out.obs, out.done
            legal = out.legal if hasattr(out, "legal") else ref_env.legal_mask()
        assert_states_equal(ref_env.state, fast_env.state, f"after call {c}")


def check_rollout_sees_reset(name: str, batch: int, device: str, mode: str) -> None:
    """After one call, ``env.reset(seed)``: the next call of a ``mode`` rollout (which must notice the reset
    itself) equals a fresh eager rollout of a twin env reset the same way, with the same actor stream."""
    env, twin = make_env(name, batch, device), make_env(name, batch, device)
    roll = FastRollout(env, RandomLegal(env, seed=2), 3, mode=mode, clone_outputs=True)
    roll()
    env.reset(seed=5), twin.reset(seed=5)
    fresh = FastRollout(twin, RandomLegal(twin, seed=2), 3, mode="eager")
    fresh.actor.generator.set_state(roll.actor.generator.get_state())
    a, b = roll(), fresh()
    assert all(torch.equal(a[k], b[k]) for k in b)
