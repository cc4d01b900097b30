"""The Overcooked V2 net's forward + backward on one PPO minibatch (8 actors x 256 steps, the CPU learner's
shape), with its 3x3 convolutions as ``F.conv2d`` (``NetConfig.spatial="conv"``, the default) against the grid
matrix products (``"matmul"``, ``ers_deep.nets.spatial``), same parameters, same run, one torch thread; the two
must give the same logits, values and gradients (within 1e-3 of each tensor's largest entry). The GPU case (the
1,024 x 128 row's minibatch, 128 actors x 128 steps) runs where CUDA is present."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import torch

from ers_deep.nets import NetConfig, build_net
from ers_deep.nets.state import NetState

OBS, ACTIONS, HIDDEN = (5, 5, 38), 6, 128


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


def _seconds(run: Callable[[], None], reps: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")],
        ),
    ],
)
def test_overcooked_net_conv_vs_grid_matmul(benchmark, one_thread, device: str) -> None:  # type: ignore[no-untyped-def]
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
