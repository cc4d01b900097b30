"""Discovery's update compiled (``DiscoveryNet.traceable``: ``update_mode="auto"`` compiles it on CPU from 8,192
samples per minibatch and captures it on CUDA, as self-play's): its loss and gradients on a minibatch equal the
eager ones (sp-max, xp-max, composed with earlier symmetries), and sp-max's parameters after 3 updates too.
xp-max's parameters are not compared after several updates: its phi gradients are ~1e-4 with many near zero,
which Adam turns into steps of ~lr whatever their rounding (measured 1.3e-3 apart after 3 updates, while the
first minibatch's gradients agreed within 2e-11 on phi and 6e-8 on the critic), as for the tabular heads of
``tests/deep/train/test_update.py``."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ers_deep.discovery.net import DiscoveryNet
from ers_deep.nets import NetConfig, build_net
from ers_deep.train import Learner, TrainConfig
from ers_deep.train.config import make_env, paper_config
from ers_deep.train.ippo import update_data
from ers_deep.train.update import select
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, trained_params


def discovery_config(**kw: Any) -> TrainConfig:
    base: dict[str, Any] = {
        "hanabi_preset": "Hanabi-Small",
        "num_envs": 16,
        "num_steps": 16,
        "minibatches": 2,
        "seeds": (0, 1),
        "net": NetConfig(hidden=32),
    }
    return paper_config("hanabi", **{**base, **kw})


def discovery_net(cfg: TrainConfig, mode: str, compose: bool = False) -> DiscoveryNet:
    """L = 2 candidates over a pool of two random Hanabi-Small policies (identity action maps); ``compose``:
    with the two candidates of another such net as earlier symmetries, composed with probability 1/2."""
    env = make_env(cfg, 1, seed=0)
    obs_shape, A, P = env.obs_shape, env.num_actions, env.num_agents
    pool = [build_net(cfg.net, [s], obs_shape, A) for s in (11, 12)]
    maps = torch.arange(A).repeat(2, 1)
    earlier = DiscoveryNet(cfg.seeds, pool, cfg.net, maps, P) if compose else None
    return DiscoveryNet(
        cfg.seeds,
        pool,
        cfg.net,
        maps,
        P,
        mode=mode,  # type: ignore[arg-type]
        earlier=[earlier.symmetry(0), earlier.symmetry(1)] if earlier is not None else (),
        compose_prob=0.5 if compose else 0.0,
    )


@pytest.mark.parametrize("mode, compose", [("sp", False), ("xp", False), ("sp", True)])
def test_the_compiled_loss_and_gradients_equal_the_eager_ones(mode: str, compose: bool) -> None:
    cfg = discovery_config(update_mode="compile")
    learner = Learner(cfg, net=discovery_net(cfg, mode, compose))
    assert learner.net.traceable and learner.updater.mode == "compile"
    ro, _ = learner.collect()
    adv, target = learner.advantages(ro)
    mb = select(update_data(ro, adv, target), learner.minibatches(ro)[0])
    out = {}
    for name, fn in (("eager", learner.updater._loss), ("compiled", learner.updater.loss_fn)):
        learner.net.zero_grad(set_to_none=True)
        loss, parts = fn(mb, None)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in learner.net.named_parameters() if p.grad is not None}
        out[name] = (loss.detach(), parts, grads)
    (loss_e, parts_e, grads_e), (loss_c, parts_c, grads_c) = out["eager"], out["compiled"]
    assert torch.allclose(loss_e, loss_c, rtol=1e-6, atol=1e-7)
    for k in parts_e:
        assert torch.allclose(parts_e[k], parts_c[k], rtol=1e-5, atol=1e-7), k
    assert grads_e.keys() == grads_c.keys() and any(k.startswith("phi.") for k in grads_e)
    for k, g in grads_e.items():
        assert float((g - grads_c[k]).abs().max()) <= 1e-5 * max(float(g.abs().max()), 1e-3), k


def test_sp_max_parameters_after_three_compiled_updates_equal_the_eager_ones() -> None:
    cfg = discovery_config()
    params = [
        trained_params(cfg.replace(update_mode=m), 3, net=discovery_net(cfg, "sp"))
        for m in ("compile", "eager")
    ]
    assert max_difference(*params) < 1e-6


def test_auto_compiles_discovery_s_update_from_8192_samples() -> None:
    cfg = discovery_config(num_envs=512, minibatches=2)  # 16 steps x 1,024 actors / 2
    assert Learner(cfg, net=discovery_net(cfg, "xp")).updater.mode == "compile"
    small = discovery_config()
    assert Learner(small, net=discovery_net(small, "xp")).updater.mode == "eager"
