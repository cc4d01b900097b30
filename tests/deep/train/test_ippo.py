"""The learner's pieces: GAE against a plain loop, schedules, per-seed gradient clipping, seeds of a pool."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import torch

from ers_deep.nets import NetConfig
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.ippo import Learner, lr_at, shaped_coef
from ers_deep.train.ppo import clip_grads_per_seed, gae, reverse_linear_scan
from ers_exact.util.options import UsageError


def _slow_gae(value, last_value, reward, done, gamma, lam):  # [T] tensors of one actor
    T = len(value)
    adv, running = [0.0] * T, 0.0
    for t in reversed(range(T)):
        nxt = last_value if t == T - 1 else value[t + 1]
        nonterminal = 0.0 if done[t] else 1.0
        delta = reward[t] + gamma * nxt * nonterminal - value[t]
        running = delta + gamma * lam * nonterminal * running
        adv[t] = running
    return adv


def _gae_inputs(seed: int, S: int, T: int, N: int, p_done: float) -> tuple[torch.Tensor, ...]:
    """Random (value, reward, done, last value) of S x T x N entries."""
    g = torch.Generator().manual_seed(seed)
    value, reward = torch.randn(S, T, N, generator=g), torch.randn(S, T, N, generator=g)
    return value, reward, torch.rand(S, T, N, generator=g) < p_done, torch.randn(S, N, generator=g)


def test_gae_matches_a_plain_loop() -> None:
    S, T, N = 2, 9, 3
    value, reward, done, last = _gae_inputs(0, S, T, N, 0.3)
    adv, target = gae(reward, value, last, done, 0.97, 0.9)
    for s in range(S):
        for n in range(N):
            ref = _slow_gae(
                value[s, :, n].tolist(),
                float(last[s, n]),
                reward[s, :, n].tolist(),
                done[s, :, n].tolist(),
                0.97,
                0.9,
            )
            assert torch.allclose(adv[s, :, n], torch.tensor(ref), atol=1e-5)
    assert torch.allclose(target, adv + value)


def test_gae_matches_torchrl() -> None:
    """The learner's GAE against TorchRL's functional ``generalized_advantage_estimate`` (time dim -2)."""
    from torchrl.objectives.value.functional import generalized_advantage_estimate

    value, reward, done, last = _gae_inputs(1, 2, 12, 5, 0.2)
    adv, target = gae(reward, value, last, done, 0.99, 0.95)

    def per_actor(x: torch.Tensor) -> torch.Tensor:  # [S, T, N] -> [S, N, T, 1]
        return x.transpose(1, 2)[..., None]

    next_value = torch.cat([value[:, 1:], last[:, None]], 1)
    ref_adv, ref_target = generalized_advantage_estimate(
        0.99, 0.95, per_actor(value), per_actor(next_value), per_actor(reward), per_actor(done)
    )
    assert torch.allclose(adv, ref_adv[..., 0].transpose(1, 2), atol=1e-5)
    assert torch.allclose(target, ref_target[..., 0].transpose(1, 2), atol=1e-5)


def test_schedules() -> None:
    cfg = paper_config("hanabi", total_env_steps=1024 * 128 * 100)
    assert lr_at(cfg, 0) == 5e-4 and math.isclose(lr_at(cfg, 50), 2.5e-4)
    oc = paper_config("overcooked-v2", total_env_steps=256 * 256 * 100)
    assert lr_at(oc, 0) < lr_at(oc, 4) <= 2.5e-4 and math.isclose(lr_at(oc, 4), 2.5e-4)
    assert lr_at(oc, 99) < 1e-6
    assert shaped_coef(oc, 0) == 1.0 and math.isclose(shaped_coef(oc, 7_500_000), 0.5)
    assert shaped_coef(oc, 10**9) == 0.0


def test_the_warmup_never_passes_the_peak_learning_rate() -> None:
    """Warm-up then cosine never exceeds ``lr``, rises then falls, also where the warm-up is a fractional
    number of updates (the paper's Overcooked V2 run: 5 % of 457 = 22.85, whose update 22 ran at 1.0066 lr)."""
    for total in (256 * 256 * 100, 30_000_000, 256 * 256 * 7):
        oc = paper_config("overcooked-v2", total_env_steps=total)
        lrs = [lr_at(oc, u) for u in range(oc.num_updates)]
        assert max(lrs) <= oc.lr, (oc.num_updates, max(lrs) / oc.lr)
        top = lrs.index(max(lrs))
        steps = list(itertools.pairwise(lrs))
        assert all(a <= b for a, b in steps[:top]) and all(a >= b for a, b in steps[top:])


def test_paper_defaults() -> None:
    h = paper_config("hanabi")
    assert (
        h.num_envs,
        h.num_steps,
        h.epochs,
        h.minibatches,
        h.gamma,
        h.gae_lambda,
        h.clip_eps,
        h.vf_coef,
        h.max_grad_norm,
        h.lr,
        h.lr_schedule,
    ) == (1024, 128, 4, 4, 0.99, 0.95, 0.2, 0.5, 0.5, 5e-4, "linear")
    o = paper_config("overcooked-v2")
    assert (o.num_envs, o.num_steps, o.minibatches, o.lr, o.lr_schedule, o.net.kind) == (
        256,
        256,
        64,
        2.5e-4,
        "warmup-cosine",
        "cnn-gru",
    )
    assert TrainConfig.from_json(o.to_json()) == o
    with pytest.raises(UsageError, match="gae_lambda"):
        TrainConfig(gae_lambda=1.5)
    with pytest.raises(UsageError, match="seeds"):
        TrainConfig(seeds=(1, 1))


@pytest.mark.parametrize(
    "field, value",
    [
        ("lr_schedule", "cosine"),  # once ran as a constant learning rate
        ("advantage", "exakt"),  # once ran as "gae" with the actor head on every entry
        ("collector", "gym"),
        ("update_mode", "jit"),
        ("num_envs", 2.5),  # once failed later, in torch.zeros
        ("num_steps", 1.5),  # once trained, counting 1.5 x B env-steps per update
        ("minibatches", 1.5),
        ("tf32", "yes"),
    ],
)
def test_a_config_refuses_a_value_outside_its_annotation(field: str, value: Any) -> None:
    with pytest.raises(UsageError, match=rf"TrainConfig\.{field} = "):
        TrainConfig(**{field: value})
    with pytest.raises(UsageError, match=rf"TrainConfig\.{field} = "):  # a hand-written config.json too
        TrainConfig.from_json({**TrainConfig().to_json(), field: value})
    with pytest.raises(UsageError, match=r"NetConfig\.kind = "):
        NetConfig(kind="transformer")  # type: ignore[arg-type]


@pytest.mark.parametrize("seeds", [(1.5,), (True, 2), "12", (-1,), (2**32,), 3])
def test_a_config_refuses_seeds_that_are_not_integers_in_range(seeds: Any) -> None:
    """Seeds once went through int(): 1.5 ran as 1, True as 1 and "12" as (1, 2), where num_envs=2.0 is
    refused."""
    with pytest.raises(UsageError, match=r"TrainConfig\.seeds = "):
        TrainConfig(seeds=seeds)


def test_numpy_integer_seeds_are_seeds() -> None:
    import numpy as np

    assert TrainConfig(seeds=tuple(np.arange(3))).seeds == (0, 1, 2)


@pytest.mark.parametrize("env", ["hanabi", "tabular:dectiger"])
def test_the_grid_net_is_refused_on_an_env_without_a_grid(env: str) -> None:
    """cnn-gru on Hanabi or a tabular game once failed inside the net with "not enough values to unpack"."""
    with pytest.raises(UsageError, match=r"cnn-gru.*use 'mlp'"):
        paper_config(env, net=NetConfig(kind="cnn-gru"))
    from ers_deep.nets import build_net

    with pytest.raises(ValueError, match=r"grid observations .* not shape \(16,\)"):
        build_net(NetConfig(kind="cnn-gru"), [0], (16,), 4)


def test_minibatches_are_bounded_by_the_actors_of_the_game(tmp_path: Any) -> None:
    """At most N = games x agents minibatches per seed (each a non-empty group of actors): the bound counts the
    game's agents, one or three as well as two."""
    from tests.cli_helpers import ONE_AGENT, THREE_AGENTS

    one, three = tmp_path / "one.dpomdp", tmp_path / "three.dpomdp"
    one.write_text(ONE_AGENT)
    three.write_text(THREE_AGENTS)
    with pytest.raises(UsageError, match="more than the 1 actors per seed"):
        Learner(paper_config(str(one), num_envs=1, minibatches=2))
    assert Learner(paper_config(str(three), num_envs=1, minibatches=3)).N == 3
    with pytest.raises(UsageError, match="more than the 6 actors per seed"):
        Learner(paper_config("tabular:three-lever", num_envs=3, minibatches=7))


def test_gradient_clipping_is_per_seed() -> None:
    cfg = paper_config("tabular:three-lever", num_envs=8, seeds=(0, 1), max_grad_norm=0.1)
    learner = Learner(cfg)
    for p in learner.net.parameters():
        p.grad = torch.ones_like(p)
        p.grad.view(2, -1)[1] *= 1e-4  # seed 1's gradient is tiny: it must stay unscaled
    before = [p.grad.clone() for p in learner.net.parameters()]
    clip_grads_per_seed(list(learner.net.parameters()), 2, 0.1)
    after = list(learner.net.parameters())
    norm0 = math.sqrt(sum(float(p.grad.view(2, -1)[0].pow(2).sum()) for p in after))
    assert math.isclose(norm0, 0.1, rel_tol=1e-4)
    assert all(torch.equal(p.grad.view(2, -1)[1], b.view(2, -1)[1]) for p, b in zip(after, before))


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2", "tabular:dectiger"])
def test_one_update_on_every_env(env: str) -> None:
    kw = {
        "hanabi": {"hanabi_preset": "Hanabi-Very-Small", "net": NetConfig(kind="mlp", hidden=32)},
        "overcooked-v2": {"minibatches": 2, "net": NetConfig(kind="cnn-gru", hidden=16)},
    }.get(env, {})
    cfg = paper_config(env, num_envs=4, num_steps=6, seeds=(0, 3), **kw)
    learner = Learner(cfg)
    m = learner.train_step()
    assert m["update"] == 1 and m["env_steps"] == 24 and len(m["entropy"]) == 2
    assert all(math.isfinite(x) for x in m["value_loss"] + m["entropy"] + m["grad_norm"])


@pytest.mark.parametrize("T", [1, 2, 3, 5, 8, 17, 128, 129])
@pytest.mark.parametrize("p_done", [0.0, 0.05, 0.3, 1.0])
def test_reverse_scan_equals_the_recursion(T: int, p_done: float) -> None:
    """``reverse_linear_scan`` (GAE's log-depth scan) against the recursion y_t = x_t + c_t y_{t+1} run step by
    step in float64: every length (powers of two and one past them) and episode-end density."""
    g = torch.Generator().manual_seed(T)
    x = torch.randn(2, T, 7, generator=g)
    c = 0.99 * 0.95 * (torch.rand(2, T, 7, generator=g) >= p_done).float()
    ref = torch.zeros(2, T, 7, dtype=torch.float64)
    acc = torch.zeros(2, 7, dtype=torch.float64)
    for t in range(T - 1, -1, -1):
        acc = x[:, t].double() + c[:, t].double() * acc
        ref[:, t] = acc
    out = reverse_linear_scan(x, c)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert torch.allclose(out.double(), ref, atol=1e-5, rtol=1e-5), (out.double() - ref).abs().max()


def test_train_step_times_its_phases_on_request() -> None:
    """``train_step(timings=...)`` (what ``bench_learner`` reports as ``phase_s``) fills one entry per phase
    and runs the same update: the counters advance as without it."""
    cfg = paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3)
    learner = Learner(cfg)
    timings: dict[str, float] = {}
    out = learner.train_step(timings=timings)
    assert list(timings) == ["collect", "gae", "update"] and all(v >= 0 for v in timings.values())
    assert out["update"] == learner.update == 1
    learner.train_step()
    assert learner.update == 2 and list(timings) == ["collect", "gae", "update"]


def test_profile_update_ranks_the_update_s_operators() -> None:
    """``profile_update`` (``bench_learner(profile_top=...)``) runs one more update under the profiler and
    returns its most expensive operators, costliest first, no more than asked; ``top`` < 1 is refused."""
    from ers_deep.bench.train import profile_update

    learner = Learner(paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3))
    learner.train_step()
    rows = profile_update(learner, top=5)
    assert learner.update == 2 and len(rows) == 5
    cost = [r["self_cpu_ms"] for r in rows]
    assert cost == sorted(cost, reverse=True) and cost[0] > 0
    assert all(r["name"] and r["calls"] >= 1 for r in rows)
    with pytest.raises(ValueError, match="top must be"):
        profile_update(learner, top=0)


def test_kernel_classes_count_each_device_kernel_once_by_kind() -> None:
    """``kernel_classes`` on CUDA-like rows: cuBLAS (sm90 xmma, nvjet), CUTLASS and inductor's Triton GEMM
    templates are products; Triton pointwise / reduction kernels fused; an operator's device time (its kernels',
    already counted) is left out."""
    from ers_deep.bench.train import kernel_classes

    def row(name: str, ms: float, device: str = "cuda", cpu: float = 0.0) -> dict[str, object]:
        return {"name": name, "device_type": device, "calls": 1, "self_cpu_ms": cpu, "self_device_ms": ms}

    rows = [
        row("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas", 4.0),
        row("nvjet_tst_128x64_64x8_1x2_h_bz_NNT", 2.0),
        row("triton_tem_fused_addmm_relu_0", 1.0),
        row("triton_poi_fused_relu_threshold_backward_3", 2.5),
        row("triton_red_fused_sum_7", 0.5),
        row("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >", 1.0),
        row("Memcpy DtoD (Device -> Device)", 0.5),
        row("void (anonymous namespace)::softmax_warp_forward<float>", 0.5),
        row("aten::bmm", 6.0, device="cpu", cpu=3.0),  # its kernels are the gemm rows above
    ]
    out = kernel_classes(rows)
    assert out["basis"] == "device kernels"
    assert out["ms"] == {"gemm": 7.0, "fused": 3.0, "copy": 0.5, "aten": 1.0, "other": 0.5}
    assert out["share"]["gemm"] == pytest.approx(7 / 12) and sum(out["share"].values()) == pytest.approx(1.0)


def test_kernel_classes_count_inductor_s_compiled_graphs_on_cpu_as_fused() -> None:
    """On CPU the profiler lists inductor's C++ kernels only as the calls of their compiled graphs."""
    from ers_deep.bench.train import kernel_classes

    def row(name: str, ms: float) -> dict[str, object]:
        return {"name": name, "device_type": "cpu", "calls": 1, "self_cpu_ms": ms, "self_device_ms": 0.0}

    out = kernel_classes(
        [
            row("aten::bmm", 11.0),
            row("## Call CompiledFxGraph f7r3xkxlj63eah437wx5 ##", 0.6),
            row("Adam.step", 0.1),
        ]
    )
    assert out["basis"] == "cpu operators"
    assert out["ms"] == pytest.approx({"gemm": 11.0, "fused": 0.6, "copy": 0.0, "aten": 0.0, "other": 0.1})


def test_a_cpu_profile_is_classed_by_its_operators() -> None:
    """On CPU (no device rows) the classes sum the operators' CPU time; the MLP's products (``aten::bmm``) are
    gemm, and the row of ``bench_learner(profile_top=...)`` carries the classes beside its top entries."""
    from ers_deep.bench.train import bench_learner
    from ers_deep.nets import NetConfig

    cfg = paper_config(
        "hanabi",
        hanabi_preset="Hanabi-Very-Small",
        seeds=(0,),
        num_envs=8,
        num_steps=8,
        net=NetConfig(kind="mlp", hidden=32),
    )
    row = bench_learner(
        cfg.replace(update_mode="eager", collect_mode="eager"), updates=1, warmup=1, profile_top=3
    )
    classes = row["profile_classes"]
    assert classes["basis"] == "cpu operators" and len(row["profile"]) == 3
    assert classes["ms"]["gemm"] > 0 and sum(classes["share"].values()) == pytest.approx(1.0)
    assert all(r["device_type"] == "cpu" for r in row["profile"])


def test_bench_learner_keeps_its_row_when_profiling_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench_learner(profile_top=...)`` profiles after measuring: a profiler that fails leaves the row's
    figures and says why (a device table must not lose a row to the profiler)."""
    from ers_deep.bench import train as bench

    def broken(learner: Learner) -> list[dict[str, object]]:
        raise RuntimeError("CUPTI unavailable")

    monkeypatch.setattr(bench, "profile_step", broken)
    cfg = paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3)
    row = bench.bench_learner(cfg, updates=1, warmup=1, profile_top=3)
    assert row["env_steps_per_s"] > 0 and "profile" not in row and "profile_classes" not in row
    assert row["profile_error"] == "RuntimeError: CUPTI unavailable"


def test_bench_learner_splits_its_setup_into_the_build_and_the_first_update_s_phases() -> None:
    """``setup_phase_s``: the build and the first warm-up update's collect / GAE / update apart (where a
    device row's setup, mostly compilation, goes); together no more than ``setup_s``."""
    from ers_deep.bench.train import bench_learner

    row = bench_learner(
        paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3), updates=1, warmup=2
    )
    split = row["setup_phase_s"]
    assert list(split) == ["build", "collect", "gae", "update"] and all(v >= 0 for v in split.values())
    assert sum(split.values()) <= row["setup_s"]


@pytest.mark.parametrize("autotune", [True, False])
def test_autotune_pointwise_holds_while_the_step_and_the_update_compile(autotune: bool) -> None:
    """``TrainConfig.autotune_pointwise``: inductor's setting inside ``collect`` and ``ppo_update`` (where the
    step and the update compile, at their first call), torch's own value outside ``train_step``."""
    import torch._inductor.config as inductor

    before = inductor.triton.autotune_pointwise
    cfg = paper_config("tabular:dectiger", seeds=(0,), num_envs=4, num_steps=3, autotune_pointwise=autotune)
    learner = Learner(cfg)
    seen: list[bool] = []
    for name in ("collect", "ppo_update"):
        inner = getattr(learner, name)

        def spy(*args: object, _inner: Any = inner) -> Any:
            seen.append(inductor.triton.autotune_pointwise)
            return _inner(*args)

        setattr(learner, name, spy)
    learner.train_step()
    assert seen == [autotune and before, autotune and before]
    assert inductor.triton.autotune_pointwise == before


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_gemm_autotune_patches_inductor_on_cuda_only(device: str) -> None:
    """``TrainConfig.gemm_autotune``: inside ``compile_settings`` inductor times Triton GEMM templates against
    cuBLAS on a CUDA config; a CPU config compiles as before (CPU GEMM templates would change its kernels); torch's
    own values after. (The settings only: a CUDA config is built, not run.)"""
    import torch._inductor.config as inductor

    from ers_deep.train.ippo import compile_settings

    before = (inductor.max_autotune_gemm, inductor.max_autotune_gemm_backends)
    cfg = paper_config("tabular:dectiger", seeds=(0,), device=device, gemm_autotune=True)
    with compile_settings(cfg):
        inside = (inductor.max_autotune_gemm, inductor.max_autotune_gemm_backends)
    assert inside == ((True, "ATEN,TRITON") if device == "cuda" else before)
    with compile_settings(cfg.replace(gemm_autotune=False)):
        assert (inductor.max_autotune_gemm, inductor.max_autotune_gemm_backends) == before
    assert (inductor.max_autotune_gemm, inductor.max_autotune_gemm_backends) == before
