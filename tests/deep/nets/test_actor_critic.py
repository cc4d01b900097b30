"""The networks: official shapes, seed slices equal single-seed nets, the GRU reset before the step."""

from __future__ import annotations

import pytest
import torch

from ers_deep.nets import NetConfig, NetState, build_net, masked_logits


def _inputs(S: int, T: int, N: int, obs_shape: tuple[int, ...], seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    obs = torch.rand(S, T, N, *obs_shape, generator=g)
    first = torch.rand(S, T, N, generator=g) < 0.2
    return obs, first


def test_hanabi_net_has_the_official_shapes() -> None:
    net = build_net(NetConfig(kind="mlp", hidden=512), [0], (658,), 20)
    shapes = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    assert shapes["embed.weight"] == (1, 658, 512) and shapes["actor_hidden.weight"] == (1, 512, 512)
    assert shapes["actor_out.weight"] == (1, 512, 20) and shapes["critic_out.weight"] == (1, 512, 1)
    w = net.embed.weight[0]
    assert torch.allclose(w.T @ w, 2 * torch.eye(512), atol=1e-4)  # orthogonal, gain sqrt 2


@pytest.mark.parametrize(
    ("kind", "obs_shape", "hidden"), [("mlp", (31,), 64), ("cnn-gru", (5, 5, 38), 32), ("tabular", (12,), 0)]
)
def test_seed_slices_equal_single_seed_nets(kind: str, obs_shape: tuple[int, ...], hidden: int) -> None:
    pool = build_net(NetConfig(kind=kind, hidden=hidden), [3, 7], obs_shape, 6)  # type: ignore[arg-type]
    obs, first = _inputs(2, 4, 5, obs_shape)
    logits, value, h = pool(obs, first, pool.initial_state(5))
    assert logits.shape == (2, 4, 5, 6) and value.shape == (2, 4, 5)
    for s, seed in enumerate([3, 7]):
        single = build_net(NetConfig(kind=kind, hidden=hidden), [seed], obs_shape, 6)  # type: ignore[arg-type]
        l1, v1, h1 = single(obs[s : s + 1], first[s : s + 1], single.initial_state(5))
        assert torch.allclose(l1[0], logits[s], atol=1e-5) and torch.allclose(v1[0], value[s], atol=1e-5)
        assert h1.tensors().keys() == h.tensors().keys()
        assert all(torch.allclose(v[0], h.tensors()[k][s], atol=1e-5) for k, v in h1.tensors().items())


def test_gru_resets_before_the_step_where_an_episode_starts() -> None:
    """Running a sequence with ``first`` flags equals running each episode alone from a zero state."""
    net = build_net(NetConfig(kind="cnn-gru", hidden=16), [0], (5, 5, 4), 6)
    obs, _ = _inputs(1, 6, 1, (5, 5, 4), seed=1)
    first = torch.tensor([False, False, True, False, False, False]).view(1, 6, 1)
    h0 = NetState(gru=torch.randn(1, 1, 16))
    logits, _, _ = net(obs, first, h0)
    a, _, _h_a = net(obs[:, :2], first[:, :2], h0)  # the episode that was running
    b, _, _ = net(obs[:, 2:], torch.zeros(1, 4, 1, dtype=torch.bool), net.initial_state(1))  # the new one
    assert torch.allclose(logits[:, :2], a, atol=1e-6) and torch.allclose(logits[:, 2:], b, atol=1e-6)
    # step by step (collection) equals the whole sequence (update)
    h, steps = h0, []
    for t in range(6):
        out, _, h = net(obs[:, t : t + 1], first[:, t : t + 1], h)
        steps.append(out)
    assert torch.allclose(torch.cat(steps, 1), logits, atol=1e-6)


def test_tabular_starts_uniform_and_masking() -> None:
    net = build_net(NetConfig(kind="tabular", hidden=0, tabular_init=0.0), [0], (4,), 3)
    logits, value, _ = net(
        torch.eye(4).view(1, 1, 4, 4), torch.zeros(1, 1, 4, dtype=torch.bool), net.initial_state(4)
    )
    assert not logits.any() and not value.any()
    legal = torch.tensor([True, False, True]).expand(1, 1, 4, 3)
    p = torch.softmax(masked_logits(logits, legal), -1)
    assert torch.allclose(p[..., 0], torch.full((1, 1, 4), 0.5)) and not p[..., 1].any()
