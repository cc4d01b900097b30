"""Throughput of the batched Overcooked V2 env and of JaxMARL's ``overcooked_v2``, with uniform random actions.

An env-step is one joint step of one game (a batch step of B games counts B env-steps). Both sides include
auto-reset of finished games (episodes of 400 steps; ers's episode clocks are staggered so that each timed step
resets about B/400 games, JaxMARL computes a reset state at every step and selects it) and, unless
``observations=False``, the observations of all agents: ers materialises them as a tensor, and JaxMARL's are
summed into a checksum so that XLA cannot drop them as dead code. With ``observations=False`` ers runs the
transition and resets only, and JaxMARL's observation is left unused (XLA then skips computing it): the
like-for-like "state only" rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Any

import torch

from ers_deep.bench.runner import random_legal_runner, reference_in_subprocess
from ers_deep.bench.timing import (
    JAXMARL_MISSING,
    import_jaxmarl_quietly,
    jaxmarl_installed,
    profile_steps,
    throughput,
    time_jax_rollout,
    time_steps,
)
from ers_deep.envs.overcooked_v2.env import NUM_ACTIONS, OvercookedV2Env

DTYPES = {"uint8": torch.uint8, "float32": torch.float32}


def overcooked_runner(
    layout: str,
    batch: int,
    device: str,
    seed: int,
    obs_dtype: str = "uint8",
    observations: bool = True,
    mode: str = "eager",
    unroll: int = 1,
    **env_kwargs: Any,
) -> tuple[OvercookedV2Env, Callable[[int], None], dict[str, Any]]:
    """An Overcooked V2 env (auto-reset on), ``run(n)``: n batched steps of uniform random actions drawn inside
    the loop, in ``mode`` (``bench.runner``), and how it runs. The episode clocks are staggered so that every
    step resets about B/max_steps games (a short timing window of games started together would otherwise
    contain no reset at all). ``observations=False``: the transition and resets alone (eager: ``transition`` and
    ``reset_games``; fast modes: the step without its observation)."""
    env = OvercookedV2Env(
        layout,
        batch_size=batch,
        device=device,
        seed=seed,
        obs_dtype=DTYPES[obs_dtype],
        branch_free=None if mode == "eager" else True,
        **env_kwargs,
    )
    gen = torch.Generator(device=env.device).manual_seed(seed + 1)
    env.reset()
    env.state.step = torch.randint(env.max_steps, (batch,), generator=gen, device=env.device)
    if observations or mode != "eager":
        run, how = random_legal_runner(env, mode, unroll, seed, observe=observations)
        return env, run, how

    def run_state_only(n: int) -> None:
        for _ in range(n):
            actions = torch.randint(NUM_ACTIONS, (batch, env.A), generator=gen, device=env.device)
            env.state, _, _, done = env.transition(env.state, actions)
            env.reset_games(done)

    return env, run_state_only, {"mode": "eager", "unroll": 1, "setup_seconds": 0.0}


def bench_ers(
    layout: str = "grounded_coord_simple",
    batch: int = 1024,
    steps: int = 100,
    device: str = "cpu",
    seed: int = 0,
    warmup: int = 5,
    obs_dtype: str = "uint8",
    observations: bool = True,
    repeats: int = 1,
    mode: str = "eager",
    unroll: int = 1,
    **env_kwargs: Any,
) -> dict[str, Any]:
    """Env-steps/s of ``OvercookedV2Env`` (auto-reset on) over ``steps`` batched steps (rounded up to a
    multiple of ``unroll``) after ``warmup`` steps in ``mode`` (``ers_deep.accel``), the best of ``repeats``."""
    env, run, how = overcooked_runner(
        layout, batch, device, seed, obs_dtype, observations, mode, unroll, **env_kwargs
    )
    steps = math.ceil(steps / how["unroll"]) * how["unroll"]
    seconds, cores = time_steps(run, steps, env.device, warmup, repeats)
    return {
        **throughput(batch, steps, seconds, env.device, cores),
        **how,
        "obs_dtype": obs_dtype,
        "observations": observations,
    }


def profile_ers(
    layout: str = "grounded_coord_simple",
    batch: int = 1024,
    steps: int = 20,
    device: str = "cpu",
    seed: int = 0,
    top: int = 15,
) -> list[dict[str, Any]]:
    """The ``top`` torch ops of an env step by self time (device time on CUDA), from ``torch.profiler``."""
    env, run, _ = overcooked_runner(layout, batch, device, seed)
    return profile_steps(run, steps, env.device, top)


def bench_jaxmarl(
    layout: str = "grounded_coord_simple",
    batch: int = 1024,
    steps: int = 100,
    seed: int = 0,
    observations: bool = True,
    scan_length: int = 128,
    repeats: int = 1,
) -> dict[str, Any]:
    """Env-steps/s of JaxMARL's overcooked_v2 (the paper's settings: view 2, negative rewards, recipe resampling,
    random agent positions), as PureJaxRL runs it: ``env.step`` (with its auto-reset) vmapped over the batch and
    ``lax.scan``-ned over ``scan_length`` steps per jitted call; compile time excluded. It imports JAX: call it
    through ``bench.runner.reference_in_subprocess`` (``env_bench``, ``compare.jaxmarl_env``)."""
    import_jaxmarl_quietly()  # the first import of jaxmarl, with its banner kept off stdout
    import jax
    import jax.numpy as jnp
    from jaxmarl.environments.overcooked_v2.overcooked import OvercookedV2

    env = OvercookedV2(
        layout=layout,
        agent_view_size=2,
        negative_rewards=True,
        sample_recipe_on_delivery=True,
        random_agent_positions=True,
    )
    agents = env.agents

    def one_step(carry: Any, _: Any) -> tuple[Any, None]:
        state, key, checksum = carry
        key, k_act, k_step = jax.random.split(key, 3)
        acts = jax.random.randint(k_act, (len(agents), batch), 0, NUM_ACTIONS)
        obs, state, reward, _, info = jax.vmap(env.step)(
            jax.random.split(k_step, batch), state, {a: acts[i] for i, a in enumerate(agents)}
        )
        checksum = checksum + sum(reward[a].sum() + info["shaped_reward"][a].sum() for a in agents)
        if observations:  # consume the observations, or XLA drops their computation as dead code
            checksum = checksum + sum(obs[a].sum() for a in agents)
        return (state, key, checksum), None

    key = jax.random.PRNGKey(seed)
    _, state = jax.vmap(env.reset)(jax.random.split(key, batch))
    result = time_jax_rollout(one_step, (state, key, jnp.float32(0)), batch, steps, scan_length, repeats)
    return {**result, "observations": observations}


def env_bench(
    layout: str = "grounded_coord_simple",
    batch: int = 1024,
    steps: int = 100,
    device: str = "cpu",
    against: tuple[str, ...] = (),
    seed: int = 0,
    obs_dtype: str = "uint8",
    observations: bool = True,
    profile_steps: int = 0,
    mode: str = "eager",
    unroll: int = 1,
    reference_cpus: Collection[int] | None = None,
) -> dict[str, Any]:
    """ers's env-steps/s in ``mode`` and, for every reference in ``against`` (only ``jaxmarl``, in its own
    process), its env-steps/s and ratio = ers / reference; the same fields as the Hanabi ``env_bench``.
    ``reference_cpus``: the CPUs JaxMARL's process is pinned to (the CLI's ``--threads 1`` on a CPU: one core)."""
    result: dict[str, Any] = {
        "env": "overcooked-v2",
        "config": {"layout": layout, "agent_view_size": 2, "max_steps": 400},
        "torch": torch.__version__,
    }
    result.update(
        bench_ers(
            layout,
            batch,
            steps,
            device,
            seed,
            obs_dtype=obs_dtype,
            observations=observations,
            mode=mode,
            unroll=unroll,
        )
    )
    refs: dict[str, Any] = {}
    for name in against:
        if name != "jaxmarl":
            raise ValueError(f"unknown reference {name!r} for overcooked-v2; choose from ('jaxmarl',)")
        if not jaxmarl_installed():
            refs[name] = {"error": JAXMARL_MISSING}
            continue
        kwargs = {
            "layout": layout,
            "batch": batch,
            "steps": steps,
            "seed": seed,
            "observations": observations,
        }
        r = reference_in_subprocess("overcooked_v2", "bench_jaxmarl", kwargs, cpus=reference_cpus)
        if "error" not in r:
            r["ratio"] = result["env_steps_per_s"] / r["env_steps_per_s"]
        refs[name] = r
    result["references"] = refs
    if profile_steps:
        result["profile"] = profile_ers(layout, batch, profile_steps, device, seed)
    return result
