"""The 3x3 convolutions as grid matrix products (``nets.spatial``, ``NetConfig.spatial="matmul"``) against
``F.conv2d`` and against the net's convolution path (same parameters, same outputs and gradients)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from ers_deep.nets import NetConfig, build_net
from ers_deep.nets.spatial import spatial_index, spatial_matrix
from ers_deep.nets.state import NetState
from tests.deep.threads import one_thread  # noqa: F401


@pytest.mark.parametrize(
    ("n_in", "n_out", "kernel", "grid"), [(3, 4, 3, (5, 5)), (2, 5, 3, (4, 6)), (2, 2, 1, (3, 2))]
)
def test_grid_matrix_product_equals_conv2d_with_its_gradients(
    n_in: int, n_out: int, kernel: int, grid: tuple[int, int]
) -> None:
    S, M = 2, 7
    g = torch.Generator().manual_seed(0)
    w = torch.randn(S * n_out, n_in, kernel, kernel, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(S * n_out, generator=g, dtype=torch.float64, requires_grad=True)
    x = torch.randn(S, M, *grid, n_in, generator=g, dtype=torch.float64, requires_grad=True)  # channels last
    k, bias = spatial_matrix(w, b, S, grid, spatial_index(n_in, n_out, kernel, grid))
    ours = torch.baddbmm(bias, x.reshape(S, M, -1), k).view(S, M, *grid, n_out)
    ref = torch.stack(
        [
            F.conv2d(
                x[s].permute(0, 3, 1, 2),
                w[s * n_out : (s + 1) * n_out],
                b[s * n_out : (s + 1) * n_out],
                padding=kernel // 2,
            )
            for s in range(S)
        ]
    ).permute(0, 1, 3, 4, 2)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    up = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((ours * up).sum(), (w, b, x))
    refs = torch.autograd.grad((ref * up).sum(), (w, b, x))
    for a, r in zip(grads, refs, strict=True):
        torch.testing.assert_close(a, r, rtol=0, atol=1e-11)


def test_every_weight_entry_of_a_5x5_grid_is_used_and_no_position_twice() -> None:
    flat, entry = spatial_index(8, 16, 3, (5, 5))
    assert flat.unique().numel() == flat.numel()  # index_copy needs distinct positions
    assert set(entry.tolist()) == set(range(16 * 8 * 9))  # every tap reaches some pair of cells
    assert flat.numel() == 8 * 16 * (9 * 9 + 12 * 6 + 4 * 4)  # the taps of interior, edge and corner cells


def test_the_overcooked_net_gives_the_same_outputs_and_gradients_either_way() -> None:
    shape, A = (5, 5, 6), 6
    nets = {
        s: build_net(NetConfig(kind="cnn-gru", hidden=16, conv=8, spatial=s), (0, 1), shape, A)  # type: ignore[arg-type]
        for s in ("conv", "matmul")
    }
    nets["matmul"].load_state_dict(nets["conv"].state_dict())  # the same parameters (nothing else stored)
    g = torch.Generator().manual_seed(1)
    S, T, N = 2, 4, 3
    obs = torch.rand(S, T, N, *shape, generator=g)
    first = torch.rand(S, T, N, generator=g) < 0.3
    outs = {}
    for s, net in nets.items():
        state = NetState(gru=torch.zeros(S, N, 16))
        logits, value, _ = net(obs, first, state)
        loss = (logits.square().sum() + value.sum()) / 10
        outs[s] = (logits, value, torch.autograd.grad(loss, list(net.parameters())))
    torch.testing.assert_close(outs["matmul"][0], outs["conv"][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(outs["matmul"][1], outs["conv"][1], rtol=1e-5, atol=1e-6)
    for a, r in zip(outs["matmul"][2], outs["conv"][2], strict=True):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-6)


def test_an_unknown_spatial_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="spatial"):
        NetConfig(kind="cnn-gru", spatial="fft")  # type: ignore[arg-type]


def test_the_learner_trains_the_same_either_way() -> None:
    """Two Overcooked V2 updates (episodes ending mid-rollout) with each mode from the same seeds."""
    from tests.deep.train.twins import max_difference, tiny_config, trained_params

    cfg = tiny_config("overcooked-v2", collect_mode="eager", update_mode="eager")
    conv = trained_params(cfg, 2, True)
    matmul = trained_params(cfg.replace(net=dataclasses.replace(cfg.net, spatial="matmul")), 2, True)
    diff = max_difference(conv, matmul)
    assert diff < 1e-5, diff


@pytest.mark.slow  # minutes of compilation on the 2-core machine
def test_the_compiled_update_with_grid_matmuls_equals_the_eager_one() -> None:
    from tests.deep.train.twins import mode_vs_eager_params, tiny_config

    cfg = tiny_config("overcooked-v2", collect_mode="eager")
    cfg = cfg.replace(net=dataclasses.replace(cfg.net, spatial="matmul"))
    diff = mode_vs_eager_params(cfg, "compile", updates=2, staggered=True)
    assert diff < 1e-6, diff
