"""GPU checks (marker ``gpu``; skipped without CUDA): the CUDA env equals the CPU env on identical deals and
moves, stays equal to HLE, and runs fast at a large batch."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from ers_deep.bench.hanabi import bench_ers
from ers_deep.envs import HanabiConfig, HanabiEnv
from ers_deep.envs.hanabi.hle import HLEGame
from tests.deep.accel.twins import assert_states_equal, assert_steps_equal
from tests.deep.envs.hanabi.differential import current_step

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize(
    "cfg", [HanabiConfig(), HanabiConfig.preset("small", players=3)], ids=["full", "small"]
)
def test_cuda_equals_cpu_on_same_deals(cfg: HanabiConfig) -> None:
    B = 256
    cpu = HanabiEnv(cfg, batch_size=B, seed=0, auto_reset=False)
    gpu = HanabiEnv(cfg, batch_size=B, device="cuda", seed=0, auto_reset=False)
    out_c, out_g = cpu.reset(), gpu.reset(decks=cpu.state.deck.cuda())
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        for name in ("obs", "legal", "cur_player", "reward", "done", "score"):
            assert torch.equal(getattr(out_c, name), getattr(out_g, name).cpu()), name
        moves = (torch.rand(B, cfg.num_moves, generator=gen) * cpu.current_legal).argmax(1)
        out_c, out_g = cpu.step(moves), gpu.step(moves.cuda())
        if out_c.done.any():
            new = cpu.random_decks()
            cpu.reset_games(out_c.done, decks=new)
            gpu.reset_games(out_g.done, decks=new.cuda())
            out_c = current_step(cpu, out_c.reward, out_c.done, out_c.score)
            out_g = current_step(gpu, out_g.reward, out_g.done, out_g.score)


def test_cuda_auto_reset_matches_hle() -> None:
    pytest.importorskip("hanabi_learning_environment")
    cfg, B = HanabiConfig(), 64
    env = HanabiEnv(cfg, batch_size=B, device="cuda", seed=1)
    games = [HLEGame(cfg) for _ in range(B)]
    for b, g in enumerate(games):
        g.new_game(env.state.deck[b].cpu().numpy())
    gen = torch.Generator().manual_seed(1)
    for _ in range(150):
        moves = (torch.rand(B, cfg.num_moves, generator=gen) * env.current_legal.cpu()).argmax(1)
        out = env.step(moves.cuda())
        obs = out.obs.cpu().numpy().astype(np.uint8)
        for b, g in enumerate(games):
            reward, done = g.step(int(moves[b]))
            assert (float(out.reward[b]), bool(out.done[b])) == (reward, done)
            if done:
                g.new_game(env.state.deck[b].cpu().numpy())
            assert np.array_equal(obs[b], g.observations())


def test_cuda_throughput_at_large_batch() -> None:
    t0 = time.perf_counter()
    res = bench_ers(batch=65536, steps=50, device="cuda", check_legal=False)
    print(f"\ncuda batch 65536: {res['env_steps_per_s']:,.0f} env-steps/s ({time.perf_counter() - t0:.1f}s)")
    assert res["env_steps_per_s"] > 1e5


def branch_free_steps_agree(device: str, knowledge: str, B: int = 512, steps: int = 300) -> int:
    """The branch-free step (``step_state``: what the learner's fast collection compiles and captures) on
    ``device`` against the same step on the CPU, with the same deal keys and moves for ``steps`` steps; every
    state field and output equal (the v0 belief's normalised floats within 1e-6: the two devices sum in
    different orders). Returns how many games restarted (the check must cover re-deals)."""
    kw = dict(batch_size=B, seed=0, check_legal=False, branch_free=True, knowledge=knowledge)
    cpu, dev = HanabiEnv("Hanabi-Full", **kw), HanabiEnv("Hanabi-Full", device=device, **kw)
    dev.reset(decks=cpu.state.deck.to(device))
    gen, legal, restarts = torch.Generator().manual_seed(0), cpu.legal_mask(), 0
    for t in range(steps):
        moves = (torch.rand(legal.shape, generator=gen) * legal).argmax(-1)
        noise = cpu.draw_noise()
        out_c = cpu.step_state(cpu.state, moves, noise)
        out_d = dev.step_state(dev.state, moves.to(device), {k: v.to(device) for k, v in noise.items()})
        got = type(out_d)(*(x.cpu() for x in out_d))
        if knowledge == "v0-belief":
            gap = float((got.obs - out_c.obs).abs().max())
            assert gap <= 1e-6, f"step {t}: obs differs by {gap}"
            got = got._replace(obs=out_c.obs)
        assert_steps_equal(out_c, got, f"step {t}")
        assert_states_equal(
            cpu.state, type(dev.state)(**{k: v.cpu() for k, v in vars(dev.state).items()}), f"step {t}"
        )
        legal, restarts = out_c.legal, restarts + int(out_c.done.sum())
    return restarts


@pytest.mark.parametrize("knowledge", ["plausible", "v0-belief"])
def test_branch_free_cuda_step_equals_the_cpu_step(knowledge: str) -> None:
    """The env of the GPU learning runs (branch-free; the JAX anchor's V0 belief) is the CPU env that the
    HLE and JaxMARL references check: the same games move for move, re-deals included."""
    assert branch_free_steps_agree("cuda", knowledge) > 0
