"""Batched torch Hanabi (2-player Full) on CPU: env-steps/s with random legal moves and auto-reset at batch 1, 64,
1024 and 8192, against the HLE adapter in the same run and, when the optional ``jaxmarl`` package is installed,
against JaxMARL's hanabi (vmapped, jitted, lax.scan, its own auto-reset) in a process of its own
(``bench.compare.jaxmarl_env``: JAX never starts in this one). An env-step is one move in one game.

Torch runs with one CPU thread for the timed rounds: an env step is ~100 small tensor ops, and on the shared
2-core machine a second thread can cost more than it gains (measured: 1.5x faster on an idle box, up to 10x
slower under load); the 2-thread rate of the same loop is recorded in extra_info too, and both sides record the
cores their timed span kept busy (``cores_used``: CPU seconds over wall seconds; XLA runs its own threads)."""

from __future__ import annotations

import math
import time

import pytest
import torch

from ers_deep.bench.compare import jaxmarl_env
from ers_deep.bench.hanabi import bench_hle
from ers_deep.bench.runner import one_core
from ers_deep.bench.timing import jaxmarl_installed
from ers_deep.envs import HanabiConfig, HanabiEnv

BATCHES = [1, 64, 1024, 8192]
ENV_STEPS_PER_ROUND = 8192  # every round times at least this many env-steps (batch 1: 300 steps)
TARGET_VS_JAXMARL_AT_1024 = 2.0


@pytest.mark.parametrize("batch", BATCHES)
def test_hanabi_env_steps(benchmark, one_thread, batch: int) -> None:
    cfg = HanabiConfig()
    env = HanabiEnv(cfg, batch_size=batch, seed=0)
    gen = torch.Generator().manual_seed(1)
    steps = 300 if batch == 1 else max(2, math.ceil(ENV_STEPS_PER_ROUND / batch))

    def run() -> None:
        for _ in range(steps):
            keys = torch.rand(batch, cfg.num_moves, generator=gen)
            env.step((keys * env.current_legal).argmax(1))

    run()  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    benchmark.pedantic(run, rounds=5, iterations=1)
    ers_cores = (time.process_time() - c0) / (time.perf_counter() - t0)
    ers = batch * steps / benchmark.stats.stats.mean
    torch.set_num_threads(2)  # the same loop with two threads, for the record (often slower on a loaded box)
    t0 = time.perf_counter()
    run()
    ers_2_threads = batch * steps / (time.perf_counter() - t0)
    torch.set_num_threads(1)
    hle = bench_hle(cfg, batch=batch, steps=10**6, max_env_steps=5000)["env_steps_per_s"]
    info = {
        "batch": batch,
        "steps_per_round": steps,
        "env_steps_per_s": ers,
        "hle_env_steps_per_s": hle,
        "ratio_vs_hle": ers / hle,
        "torch_threads": 1,
        "cores_used": ers_cores,
        "env_steps_per_s_2_threads": ers_2_threads,
    }
    if jaxmarl_installed():  # HanabiConfig() is jaxmarl_env's game: 2-player Hanabi-Full
        jm = jaxmarl_env("hanabi", batch, max(128, steps), cpus=one_core())  # one core, as ers's one thread
        assert "error" not in jm, jm
        info.update(
            jaxmarl_env_steps_per_s=jm["env_steps_per_s"],
            jaxmarl_cores_used=jm["cores_used"],
            ratio_vs_jaxmarl=ers / jm["env_steps_per_s"],
        )
    benchmark.extra_info.update(info)
    if benchmark.disabled:  # one untimed call (--benchmark-disable) is not a measurement
        return
    if batch >= 1024:
        assert ers > 2 * hle
    if batch == 1024 and "ratio_vs_jaxmarl" in info:
        benchmark.extra_info["target_ratio_vs_jaxmarl"] = TARGET_VS_JAXMARL_AT_1024
        assert info["ratio_vs_jaxmarl"] > 1.0


def test_hanabi_v0_belief_vs_bits(benchmark, one_thread, best_of) -> None:  # type: ignore[no-untyped-def]
    """The cost of JaxMARL's V0 belief (``knowledge="v0-belief"``: the plausible-card bits times the copies of each
    card not yet discarded or played, normalised per slot) against HLE's bits (the default), same run: the eager
    CPU step of 256 Full games with random legal moves sampled each step, one thread, env-steps/s of each (the
    ers-deep README's figure). The two envs from one seed play the same moves beforehand: legal moves, rewards,
    endings and scores must be equal step by step, the belief nonzero only where a bit is set, and the two
    observations apart only inside the K plausible-card features of each hand slot (P x H x K of them)."""
    batch, steps, cfg = 256, 32, HanabiConfig()
    envs = {k: HanabiEnv(cfg, batch_size=batch, seed=0, knowledge=k) for k in ("v0-belief", "plausible")}
    gen = torch.Generator().manual_seed(1)
    apart = torch.zeros(cfg.obs_size, dtype=torch.bool)
    for _ in range(steps):  # the same game under both encodings
        keys = torch.rand(batch, cfg.num_moves, generator=gen)
        belief, bits = (env.step((keys * env.current_legal).argmax(1)) for env in envs.values())
        for name in ("legal", "cur_player", "reward", "done", "score"):
            assert torch.equal(getattr(belief, name), getattr(bits, name)), name
        assert not ((belief.obs != 0) & (bits.obs == 0)).any()
        apart |= (belief.obs != bits.obs).flatten(0, 1).any(0)
    assert 0 < int(apart.sum()) <= cfg.players * cfg.hand * cfg.num_cards  # the belief's block, and only it
    runs = {}
    for name, env in envs.items():

        def run(env: HanabiEnv = env) -> None:
            for _ in range(steps):
                keys = torch.rand(batch, cfg.num_moves, generator=gen)
                env.step((keys * env.current_legal).argmax(1))

        runs[name] = run
    benchmark.pedantic(runs["v0-belief"], rounds=5, iterations=1, warmup_rounds=1)
    bits_s = best_of(runs["plausible"], 5)
    belief_rate = batch * steps / benchmark.stats.stats.min
    bits_rate = batch * steps / bits_s
    info = {
        "batch": batch,
        "steps_per_round": steps,
        "v0_belief_env_steps_per_s": belief_rate,
        "bits_env_steps_per_s": bits_rate,
        "ratio_bits_vs_belief": bits_rate / belief_rate,
        "features_apart": int(apart.sum()),
    }
    benchmark.extra_info.update(info)
    print(info)
