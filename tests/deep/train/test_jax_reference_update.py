"""One whole IPPO update of ers (GAE, the PPO minibatch steps, per-seed gradient clipping, Adam) against the
same update computed by JAX and optax, as the JAX anchor (``../shared/anchors/ippo_hanabi_jax.py``, JaxMARL's
``ippo_ff_hanabi.py``) computes it: its ``gae`` scan, its ``loss_fn`` under ``jax.grad``, and
``optax.chain(clip_by_global_norm, adam(eps=1e-5))``, on the same rollout, the same parameters and the same
minibatches. What no one here wrote does the arithmetic on the reference side: autodiff, the optimizer and the
clipping are JAX's and optax's; the JAX functions below restate the anchor's lines (JaxMARL's action set: ers's
A moves and a no-op, the waiting seat's only legal move, whose output column starts at zero).

The test needs the ``reference`` extra of ers-deep (jax, optax); it skips without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from ers_deep.train import Learner
from ers_deep.train.update import PPOUpdate
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
optax = pytest.importorskip("optax")

LAYERS = ("embed", "actor_hidden", "actor_out", "critic_hidden", "critic_out")


def _params(learner: Learner) -> dict[str, Any]:
    """Seed 0's parameters as the anchor's Dense layers (kernel [in, out], bias [out]), the no-op column
    appended to the actor's output layer (zero: it only ever meets the waiting seat, where its gradient is 0)."""
    out: dict[str, Any] = {}
    for name in LAYERS:
        layer = getattr(learner.net, name)
        w, b = layer.weight[0].detach().numpy(), layer.bias[0, 0].detach().numpy()
        if name == "actor_out":
            w, b = np.concatenate([w, np.zeros_like(w[:, :1])], 1), np.append(b, 0.0).astype(b.dtype)
        out[name] = {"kernel": jnp.asarray(w), "bias": jnp.asarray(b)}
    return out


def _apply(params: dict[str, Any], x: Any, avail: Any) -> tuple[Any, Any]:
    """The anchor's ``ActorCritic.__call__``."""

    def dense(name: str, h: Any) -> Any:
        return h @ params[name]["kernel"] + params[name]["bias"]

    e = jax.nn.relu(dense("embed", x))
    logits = dense("actor_out", jax.nn.relu(dense("actor_hidden", e))) - (1.0 - avail) * 1e10
    return logits, dense("critic_out", jax.nn.relu(dense("critic_hidden", e)))[..., 0]


def _gae(reward: Any, value: Any, last_value: Any, done: Any, gamma: float, lam: float) -> Any:
    """The anchor's ``gae`` scan over [T, N]."""

    def step(carry: Any, x: Any) -> Any:
        adv, nv = carry
        d, val, r = x
        delta = r + gamma * nv * (1 - d) - val
        adv = delta + gamma * lam * (1 - d) * adv
        return (adv, val), adv

    _, advs = jax.lax.scan(
        step, (jnp.zeros_like(last_value), last_value), (done, value, reward), reverse=True
    )
    return advs


def _loss(params: Any, b: tuple[Any, ...], clip: float, vf: float, ent_coef: float) -> Any:
    """The anchor's ``loss_fn``."""
    o, avail, act, logp, v, adv, tgt = b
    logits, val = _apply(params, o, avail)
    lp_all = jax.nn.log_softmax(logits)
    lp = jnp.take_along_axis(lp_all, act[..., None], -1)[..., 0]
    ratio = jnp.exp(lp - logp)
    vc = v + jnp.clip(val - v, -clip, clip)
    vl = 0.5 * jnp.maximum((val - tgt) ** 2, (vc - tgt) ** 2).mean()
    ent = -(jnp.exp(lp_all) * jnp.where(avail > 0, lp_all, 0.0)).sum(-1).mean()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
    return pg + vf * vl - ent_coef * ent


def _anchor_inputs(ro: Any) -> tuple[Any, ...]:
    """Seed 0's rollout [T, N, ...] in the anchor's action set: the waiting seat's move is the no-op (index A),
    its only legal move, of log-probability 0."""
    acting = ro.acting[0].numpy()
    legal = ro.legal[0].numpy() & acting[..., None]
    avail = np.concatenate([legal, ~acting[..., None]], -1).astype(np.float32)
    act = np.where(acting, ro.action[0].numpy(), legal.shape[-1])
    logp = np.where(acting, ro.logp[0].numpy(), 0.0).astype(np.float32)
    return ro.obs[0].float().numpy(), avail, act, logp


def _take(x: np.ndarray, idx: torch.Tensor) -> np.ndarray:
    """The minibatch ``idx`` of one seed's [T, N, ...] array: actors [M], or turn streams [1, T, M] (the actor
    read at each step)."""
    if idx.dim() == 1:
        return x[:, idx.numpy()]
    return x[np.arange(x.shape[0])[:, None], idx[0].numpy()]


@pytest.mark.parametrize("acting_rows", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_one_update_equals_the_jax_anchors_update(acting_rows: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tiny_config(
        "hanabi", collect_mode="eager", update_mode="eager", seeds=(0,), acting_rows=acting_rows
    )
    learner = Learner(cfg.replace(epochs=2, minibatches=2))
    cfg = learner.config
    learner.collect()  # a second rollout: games mid-way, episode ends inside it
    ro, _ = learner.collect()
    start = _params(learner)
    adv, target = learner.advantages(ro)
    ref_adv = np.asarray(  # the anchor's GAE scan on the same rewards, values and episode ends
        _gae(
            jnp.asarray(ro.reward[0].numpy()),
            jnp.asarray(ro.value[0].numpy()),
            jnp.asarray(ro.last_value[0].numpy()),
            jnp.asarray(ro.done[0].float().numpy()),
            learner.gamma,
            cfg.gae_lambda,
        )
    )
    np.testing.assert_allclose(adv[0].numpy(), ref_adv, rtol=1e-5, atol=1e-6)
    assert bool(ro.done.any()), "the rollout should hold an episode end"
    batches: list[torch.Tensor] = []  # the minibatches ers draws, replayed by the reference
    real = PPOUpdate.__call__

    def spy(self: PPOUpdate, data: dict, mbs: list, table: object = None) -> dict:
        batches.extend(mbs)
        return real(self, data, mbs, table)  # type: ignore[arg-type]

    monkeypatch.setattr(PPOUpdate, "__call__", spy)
    learner.ppo_update(ro, adv, target)  # update 0: the learning rate is cfg.lr
    assert len(batches) == cfg.epochs * cfg.minibatches == 4
    o, avail, act, logp = _anchor_inputs(ro)
    value = ro.value[0].numpy()
    data = (o, avail, act, logp, value, ref_adv, ref_adv + value)
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.lr, eps=cfg.adam_eps))
    params, opt_state = start, tx.init(start)
    grad = jax.grad(_loss)
    for idx in batches:
        g = grad(
            params, tuple(jnp.asarray(_take(x, idx)) for x in data), cfg.clip_eps, cfg.vf_coef, cfg.alpha
        )
        updates, opt_state = tx.update(g, opt_state, params)
        params = optax.apply_updates(params, updates)
    for name in LAYERS:
        layer = getattr(learner.net, name)
        for key, ours in (("kernel", layer.weight[0]), ("bias", layer.bias[0, 0])):
            ref, before = np.asarray(params[name][key]), np.asarray(start[name][key])
            if name == "actor_out":  # the no-op column is the anchor's alone
                ref, before = ref[..., :-1], before[..., :-1]
            assert np.abs(ref - before).max() > 1e-4, f"{name}.{key} did not move"
            np.testing.assert_allclose(
                ours.detach().numpy(), ref, rtol=1e-4, atol=2e-6, err_msg=f"{name}.{key}"
            )
