"""The Overcooked V2 net's forward + backward on one PPO minibatch (8 actors x 256 steps, the CPU learner's
shape), with its 3x3 convolutions as ``F.conv2d`` (``NetConfig.spatial="conv"``, the default) against the grid
matrix products (``"matmul"``, ``ers_deep.nets.spatial``), same parameters, same run, one torch thread; the two
must give the same logits, values and gradients (within 1e-3 of each tensor's largest entry). The GPU case (the
1,024 x 128 row's minibatch, 128 actors x 128 steps) runs where CUDA is present.

And other-play's net with learned symmetries (Hanabi-Full, the identity and 12 stand-ins, one collection step of
1,024 games: 2,048 entries): each phi_O on its selected entries (a host sync per phi, the CPU default) against the
grouped path (``nets.grouped``, the CUDA default: sorted into blocks, ~1.5x the rows and a copy of each block's
weights); the same logits and values within 1e-5.

And the recurrent core alone on that CPU minibatch (H = 128): the fused GRU over reset-split segments
(``nets.recurrent.gru_segments``) and the scan the CPU update runs (``nets.gru_scan``) against the step loop
(``gru_steps``), forward + backward; the same states and gradients within 1e-4."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import torch

from ers_deep.nets import NetConfig, build_net
from ers_deep.nets.state import NetState

OBS, ACTIONS, HIDDEN = (5, 5, 38), 6, 128
#: the CPU, and CUDA where present (gpu-marked)
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")],
    ),
]


def _step(
    spatial: str, T: int, N: int, device: str
) -> tuple[Callable[[], None], Callable[[], dict[str, torch.Tensor]]]:
    """``run()``: the timed forward + backward; ``outputs()``: one more, untimed, from zeroed gradients: the
    logits, the values and every parameter's gradient (to compare the two spatial forms)."""
    net = build_net(NetConfig(kind="cnn-gru", hidden=HIDDEN, spatial=spatial), (0,), OBS, ACTIONS).to(device)  # type: ignore[arg-type]
    g = torch.Generator().manual_seed(0)
    obs = torch.rand(1, T, N, *OBS, generator=g).to(device)
    first = torch.zeros(1, T, N, dtype=torch.bool, device=device)
    h0 = torch.zeros(1, N, HIDDEN, device=device)

    def run() -> None:
        logits, value, _ = net(obs, first, NetState(gru=h0))
        (logits.square().mean() + value.square().mean()).backward()
        if device == "cuda":
            torch.cuda.synchronize()

    def outputs() -> dict[str, torch.Tensor]:
        net.zero_grad(set_to_none=True)
        logits, value, _ = net(obs, first, NetState(gru=h0))
        (logits.square().mean() + value.square().mean()).backward()
        grads = {f"grad.{k}": p.grad for k, p in net.named_parameters() if p.grad is not None}
        return {"logits": logits.detach(), "value": value.detach(), **grads}

    return run, outputs


def _seconds(run: Callable[[], object], reps: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


@pytest.mark.parametrize("device", DEVICES)
def test_overcooked_net_conv_vs_grid_matmul(benchmark, one_thread, device: str) -> None:  # type: ignore[no-untyped-def]
    # both paths in float32 (conftest's fresh_process_switches): the two paths' products differ in size, so a
    # bfloat16-gradient switch left on by an earlier learner took one path's gradients and not the other's
    T, N = (256, 8) if device == "cpu" else (128, 128)
    conv, conv_outputs = _step("conv", T, N, device)
    matmul, matmul_outputs = _step("matmul", T, N, device)
    benchmark.pedantic(conv, rounds=3, iterations=1, warmup_rounds=1)
    t_conv = benchmark.stats.stats.min
    t_matmul = _seconds(matmul, 3)
    info = {"samples": T * N, "conv_s": t_conv, "matmul_s": t_matmul, "matmul_speedup": t_conv / t_matmul}
    benchmark.extra_info.update(info)
    print(device, info)
    want, got = (
        conv_outputs(),
        matmul_outputs(),
    )  # the same parameters: the same outputs within float rounding
    assert want.keys() == got.keys()
    for k, w in want.items():
        scale = float(w.abs().max().clamp_min(1e-12))
        torch.testing.assert_close(got[k], w, rtol=0, atol=1e-3 * scale, msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_other_play_learned_symmetries_grouped_vs_per_phi(benchmark, one_thread, device: str) -> None:  # type: ignore[no-untyped-def]
    from ers_deep.bench.other_play import near_identity_symmetries
    from ers_deep.nets.other_play import OtherPlayNet
    from ers_deep.other_play import op_net
    from ers_deep.train.config import make_env, paper_config

    cfg = paper_config("hanabi", seeds=(0,), net=NetConfig(hidden=512), device=device)
    phi = near_identity_symmetries(cfg, 12)
    per_phi = OtherPlayNet(op_net(cfg, phi).base, phi, grouped=False).to(device)
    grouped = OtherPlayNet(per_phi.base, phi, grouped=True).to(device)
    env = make_env(cfg, 1024, seed=0)
    obs = env.observe().reshape(1, 1, 2048, -1)
    first = torch.ones(1, 1, 2048, dtype=torch.bool, device=device)
    state = per_phi.initial_state(2048, device)

    def forward(net: torch.nn.Module) -> Callable[[], tuple[torch.Tensor, ...]]:
        def run() -> tuple[torch.Tensor, ...]:
            with torch.no_grad():
                out = net(obs, first, state)
            if device == "cuda":
                torch.cuda.synchronize()
            return out[:2]

        return run

    benchmark.pedantic(forward(per_phi), rounds=3, iterations=1, warmup_rounds=1)
    t_per_phi = benchmark.stats.stats.min
    t_grouped = _seconds(forward(grouped), 3)
    info = {"entries": 2048, "symmetries": len(phi), "per_phi_s": t_per_phi, "grouped_s": t_grouped}
    info["grouped_speedup"] = t_per_phi / t_grouped
    benchmark.extra_info.update(info)
    print(device, info)
    for a, b in zip(forward(per_phi)(), forward(grouped)(), strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)


def test_gru_segments_and_scan_vs_step_loop(benchmark, one_thread) -> None:  # type: ignore[no-untyped-def]
    from ers_deep.nets.gru_scan import gru_scan
    from ers_deep.nets.recurrent import gru_segments, gru_steps
    from tests.deep.nets.gru_cases import cell

    S, T, N = 1, 256, 8
    core = cell(S, n_in=HIDDEN, hidden=HIDDEN)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(S, T, N, HIDDEN, generator=g, requires_grad=True)
    h0 = torch.zeros(S, N, HIDDEN)
    first = torch.rand(S, T, N, generator=g) < 1 / 400  # Overcooked's episodes: 400 steps

    def fwd_bwd(fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], list[torch.Tensor]]:
        def run() -> list[torch.Tensor]:
            ys, h = fn(core, x, first, h0)
            params = [x, *core.parameters()]
            return [ys.detach(), *torch.autograd.grad(ys.square().sum() + h.sum(), params)]

        return run

    benchmark.pedantic(fwd_bwd(gru_segments), rounds=3, iterations=1, warmup_rounds=1)
    t_fused = benchmark.stats.stats.min
    t_loop, t_scan = _seconds(fwd_bwd(gru_steps), 3), _seconds(fwd_bwd(gru_scan), 3)
    info = {"loop_s": t_loop, "fused_s": t_fused, "scan_s": t_scan, "fused_speedup": t_loop / t_fused}
    benchmark.extra_info.update(info | {"scan_speedup": t_loop / t_scan})
    print(info)
    want = fwd_bwd(gru_steps)()
    for name, fn in (("fused", gru_segments), ("scan", gru_scan)):
        for k, (w, got) in enumerate(zip(want, fwd_bwd(fn)(), strict=True)):
            scale = float(w.abs().max().clamp_min(1e-12))  # sums over 2,048 steps: float order differs
            torch.testing.assert_close(got, w, rtol=0, atol=1e-5 * scale, msg=f"{name}, output {k}")
