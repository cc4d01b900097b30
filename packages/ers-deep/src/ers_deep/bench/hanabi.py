"""Throughput of the batched Hanabi env and of its references (HLE, optionally JaxMARL), with random legal moves.

An env-step is one move in one game (a batch step of B games counts B env-steps). Every measurement includes
auto-reset of finished games and the observations of all players; random legal moves are drawn inside the timed
loop. Used by ``ers-deep env-bench`` and by ``benchmarks/test_hanabi_bench.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import torch

from ers_deep.bench.runner import random_legal_runner, reference_in_subprocess
from ers_deep.bench.timing import (
    JAXMARL_MISSING,
    best_span,
    import_jaxmarl_quietly,
    jaxmarl_installed,
    profile_steps,
    throughput,
    time_jax_rollout,
    time_steps,
)
from ers_deep.envs.hanabi.config import HanabiConfig, resolve_config
from ers_deep.envs.hanabi.env import HanabiEnv

REFERENCES = ("hle", "jaxmarl")


def hanabi_runner(
    cfg: HanabiConfig,
    batch: int,
    device: str,
    seed: int,
    check_legal: bool,
    mode: str = "eager",
    unroll: int = 1,
) -> tuple[HanabiEnv, Callable[[int], None], dict[str, Any]]:
    """A Hanabi env (auto-reset on), ``run(n)``: n batched steps of random legal moves in ``mode``
    (``bench.runner``), and how it runs. The fast modes need the branch-free env without per-step checks."""
    eager = mode == "eager"
    env = HanabiEnv(
        cfg,
        batch_size=batch,
        device=device,
        seed=seed,
        auto_reset=True,
        check_legal=check_legal and eager,
        branch_free=None if eager else True,
    )
    env.reset()
    run, how = random_legal_runner(env, mode, unroll, seed)
    return env, run, how


def bench_ers(
    config: HanabiConfig | str | None = None,
    batch: int = 1024,
    steps: int = 100,
    device: str = "cpu",
    seed: int = 0,
    warmup: int = 5,
    check_legal: bool = True,
    mode: str = "eager",
    unroll: int = 1,
    repeats: int = 1,
) -> dict[str, Any]:
    """Env-steps/s of ``HanabiEnv`` (auto-reset on) over ``steps`` batched steps (rounded up to a multiple of
    ``unroll``) after ``warmup`` steps, in ``mode`` (``ers_deep.accel``), the best of ``repeats``."""
    env, run, how = hanabi_runner(resolve_config(config), batch, device, seed, check_legal, mode, unroll)
    steps = math.ceil(steps / how["unroll"]) * how["unroll"]
    seconds, cores = time_steps(run, steps, env.device, warmup, repeats)
    return {**throughput(batch, steps, seconds, env.device, cores), **how}


def profile_ers(
    config: HanabiConfig | str | None = None,
    batch: int = 1024,
    steps: int = 20,
    device: str = "cpu",
    seed: int = 0,
    check_legal: bool = True,
    top: int = 15,
) -> list[dict[str, Any]]:
    """Where an env step spends its time: the ``top`` torch ops by self time (device time on CUDA) over
    ``steps`` batched steps, from ``torch.profiler``."""
    env, run, _ = hanabi_runner(resolve_config(config), batch, device, seed, check_legal)
    return profile_steps(run, steps, env.device, top)


def bench_hle(
    config: HanabiConfig | str | None = None,
    batch: int = 1024,
    steps: int = 100,
    seed: int = 0,
    max_env_steps: int = 20_000,
) -> dict[str, Any]:
    """Env-steps/s of HLE (``HLEBatch``: B games one after another, all players' observations and legal masks)
    and the cores the timed span kept busy (``cores_used``). Steps are capped so that at most ``max_env_steps``
    env-steps run (HLE's rate does not depend on B)."""
    from ers_deep.envs.hanabi.hle import HLEBatch

    cfg = resolve_config(config)
    steps = max(1, min(steps, math.ceil(max_env_steps / batch)))
    ref = HLEBatch(cfg, batch_size=batch, seed=seed + 1)
    rng = np.random.default_rng(seed)
    _, legal = ref.observe()

    def run(n: int) -> None:
        nonlocal legal
        for _ in range(n):
            keys = rng.random((batch, cfg.num_moves)) * legal.any(1)
            _, legal, _, _ = ref.step(keys.argmax(1))

    run(1)
    seconds, cores = best_span(lambda: run(steps))
    ref.close()
    return {
        "env_steps_per_s": batch * steps / seconds,
        "seconds": seconds,
        "batch": batch,
        "steps": steps,
        "cores_used": cores,
    }


def jaxmarl_hanabi(cfg: HanabiConfig) -> Any:
    """JaxMARL's Hanabi env (``jaxmarl.make("hanabi", ...)``) for the game of ``cfg``: players, colours, ranks,
    hand size, tokens and copies per rank (what the benchmark times and the differential test compares)."""
    import_jaxmarl_quietly()  # the first import of jaxmarl, with its banner kept off stdout
    import jaxmarl

    return jaxmarl.make(
        "hanabi",
        num_agents=cfg.players,
        num_colors=cfg.colors,
        num_ranks=cfg.ranks,
        hand_size=cfg.hand,
        max_info_tokens=cfg.max_information_tokens,
        max_life_tokens=cfg.max_life_tokens,
        num_cards_of_rank=cfg.copies,
    )


def bench_jaxmarl(
    config: HanabiConfig | str | dict[str, Any] | None = None,
    batch: int = 1024,
    steps: int = 100,
    seed: int = 0,
    scan_length: int = 128,
    repeats: int = 1,
) -> dict[str, Any]:
    """Env-steps/s of JaxMARL's hanabi (vmapped, jitted ``env.step`` with its auto-reset, random legal actions,
    ``lax.scan`` over ``scan_length`` steps per call as in PureJaxRL), the best of ``repeats``; compile time is
    excluded. Observations and rewards feed a checksum so that XLA cannot skip computing them. It imports JAX:
    call it through ``bench.runner.reference_in_subprocess`` (``env_bench``, ``compare.jaxmarl_env``)."""
    cfg = HanabiConfig(**config) if isinstance(config, dict) else resolve_config(config)
    env = jaxmarl_hanabi(cfg)  # imports jaxmarl first, its banner kept off stdout
    import jax
    import jax.numpy as jnp

    agents = env.agents

    def one_step(carry: Any, _: Any) -> tuple[Any, None]:
        state, key, checksum = carry
        key, k_act, k_step = jax.random.split(key, 3)
        legal = jax.vmap(env.get_legal_moves)(state)
        act_keys = jax.random.split(k_act, len(agents))
        actions = {
            a: jax.random.categorical(k, jnp.where(legal[a], 0.0, -jnp.inf)) for a, k in zip(agents, act_keys)
        }
        obs, state, reward, _, _ = jax.vmap(env.step)(jax.random.split(k_step, batch), state, actions)
        # consume every output, or XLA drops the observation encoding as dead code
        checksum = checksum + sum(obs[a].sum() + reward[a].sum() for a in agents)
        return (state, key, checksum), None

    key = jax.random.PRNGKey(seed)
    _, state = jax.vmap(env.reset)(jax.random.split(key, batch))
    return time_jax_rollout(one_step, (state, key, jnp.float32(0)), batch, steps, scan_length, repeats)


def _jaxmarl_kwargs(cfg: HanabiConfig, batch: int, steps: int, seed: int) -> dict[str, Any]:
    """``bench_jaxmarl``'s arguments as JSON values (the config as a preset-free dict)."""
    fields = ("players", "colors", "ranks", "hand_size", "max_information_tokens", "max_life_tokens")
    return {"config": {k: getattr(cfg, k) for k in fields}, "batch": batch, "steps": steps, "seed": seed}


def env_bench(
    config: HanabiConfig | str | None = None,
    batch: int = 1024,
    steps: int = 100,
    device: str = "cpu",
    against: tuple[str, ...] = (),
    seed: int = 0,
    check_legal: bool = True,
    profile_steps: int = 0,
    mode: str = "eager",
    unroll: int = 1,
    reference_cpus: Collection[int] | None = None,
) -> dict[str, Any]:
    """ers's env-steps/s in ``mode`` and, for every reference in ``against``, its env-steps/s and ratio =
    ers / reference (JaxMARL in its own process).
    ``reference_cpus``: the CPUs JaxMARL's process is pinned to (the CLI's ``--threads 1`` on a CPU: one core)."""
    cfg = resolve_config(config)
    result: dict[str, Any] = {
        "env": "hanabi",
        "config": {
            k: getattr(cfg, k)
            for k in (
                "players",
                "colors",
                "ranks",
                "hand",
                "max_information_tokens",
                "max_life_tokens",
                "observation_type",
            )
        },
        "torch": torch.__version__,
    }
    result.update(
        bench_ers(cfg, batch, steps, device, seed, check_legal=check_legal, mode=mode, unroll=unroll)
    )
    refs: dict[str, Any] = {}
    for name in against:
        if name not in REFERENCES:
            raise ValueError(f"unknown reference {name!r}; choose from {REFERENCES}")
        if name == "jaxmarl" and not jaxmarl_installed():
            refs[name] = {"error": JAXMARL_MISSING}
            continue
        if name == "hle":
            r = bench_hle(cfg, batch, steps, seed)
        else:
            r = reference_in_subprocess(
                "hanabi", "bench_jaxmarl", _jaxmarl_kwargs(cfg, batch, steps, seed), cpus=reference_cpus
            )
        if "error" not in r:
            r["ratio"] = result["env_steps_per_s"] / r["env_steps_per_s"]
        refs[name] = r
    result["references"] = refs
    if profile_steps:
        result["profile"] = profile_ers(cfg, batch, profile_steps, device, seed, check_legal)
    return result
