"""Deep discovery through recurrent (CNN + GRU) pool policies, as Algorithm 3 runs on Overcooked V2: the
composite net over a whole sequence equals stepping each actor's own pool member through the symmetriser,
with the member's GRU state carried between calls and reset at episode starts."""

from __future__ import annotations

import math

import pytest
import torch

from ers_deep.discovery.net import DiscoveryNet
from ers_deep.envs.overcooked_v2 import OvercookedV2Env
from ers_deep.nets import NetConfig, build_net
from ers_deep.train.evaluate import Agent


def _pool(obs_shape: tuple[int, ...], actions: int, members: int) -> tuple[NetConfig, list]:
    cfg = NetConfig(kind="cnn-gru", hidden=16, conv=8)
    return cfg, [build_net(cfg, [10 + m], obs_shape, actions) for m in range(members)]


def test_recurrent_pool_sequence_equals_stepwise_symmetriser() -> None:
    torch.manual_seed(0)
    env = OvercookedV2Env("grounded_coord_simple", batch_size=3, seed=0)
    P, A, shape = env.num_agents, env.num_actions, env.obs_shape
    cfg, nets = _pool(shape, A, members=2)
    maps = torch.arange(A).expand(2, A).clone()
    net = DiscoveryNet((0, 1), nets, cfg, maps, P)
    with torch.no_grad():  # move phi away from the identity so the map matters
        for w in net.phi.weights:
            w.add_(0.01 * torch.randn_like(w))
    T, N = 5, env.batch_size * P
    obs = torch.stack(
        [env.step(torch.randint(0, A, (env.batch_size, P))).obs for _ in range(T)]
    )  # [T, B, P, ...]
    obs = obs.reshape(T, N, *shape).float()
    first = torch.zeros(T, N, dtype=torch.bool)
    first[0] = True
    first[3, :2] = True  # actors 0 and 1 (game 0) start a new episode at step 3
    h0 = net.initial_state(N)
    logits, _, h_end = net(obs[None].expand(2, *obs.shape), first[None].expand(2, T, N), h0)
    for c in range(2):
        sym = net.symmetry(c)
        for n in range(N):
            member = (n // P) % 2
            agent = Agent(nets[member], (sym,))
            h = agent.initial_state(1, torch.device("cpu"))
            for t in range(T):
                ref, h = agent.logits(obs[t, n : n + 1], first[t, n : n + 1], h)
                torch.testing.assert_close(logits[c, t, n], ref[0], rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(h_end.gru[c, n], h.gru[0, 0], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_xp_max_on_an_overcooked_pool_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Algorithm 3 on a (barely trained) Overcooked V2 pool of CNN + GRU policies runs through ``discover``
    and writes a loadable result whose phi_A is the identity (the official Overcooked choice); other-play then
    trains with it (OP-ER on Overcooked V2's uint8 observations) and scores E J(phi_1(pi), phi_2(pi))."""
    from ers_deep.discovery import DeepDiscoveryConfig, discover, load_symmetries
    from ers_deep.pools import load_pool, train_pool
    from ers_deep.train.config import paper_config
    from ers_exact.interface import LearnedTransformation

    cfg = paper_config(
        "overcooked-v2",
        seeds=(0, 1, 2, 3),
        num_envs=4,
        num_steps=16,
        minibatches=2,
        total_env_steps=4 * 16 * 2,
        net=NetConfig(kind="cnn-gru", hidden=16, conv=8),
    )
    train_pool(cfg, tmp_path / "pool", eval_games=2, progress=False)
    config = DeepDiscoveryConfig(
        algorithm="xp-max",
        candidates=2,
        top=1,
        total_env_steps=8 * 16 * 2,
        num_envs=8,
        num_steps=16,
        eval_games=2,
    )
    result = discover(load_pool(tmp_path / "pool"), config, tmp_path / "disc", progress=False)
    (sym,) = load_symmetries(tmp_path / "disc")
    assert result.algorithm == "xp-max" and len(result.transformations) == 1
    assert sym.action_map.tolist() == list(range(6))
    (t,) = result.transformations
    assert isinstance(t, LearnedTransformation) and t.known is not None  # against the identity and the flip
    assert t.known.name in ("identity", "vertical-flip(1, 0, 2)") and t.known.match in ("identity", None)
    from ers_deep.other_play import train_op_pool

    op = train_op_pool(
        cfg.replace(seeds=(5,)), str(tmp_path / "disc"), tmp_path / "op", eval_games=2, progress=False
    )
    assert op["other_play"]["symmetries"] == ["identity", sym.name]
    assert all(math.isfinite(p["other_play"]["mean"]) for p in op["policies"])
