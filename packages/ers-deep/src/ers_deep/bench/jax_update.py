"""ers's IPPO update against the JAX anchor's, in float32 and in float64, on the same data.

The reference restates the lines of the PureJaxRL-style anchor (``../shared/anchors/ippo_hanabi_jax.py``, JaxMARL's
``ippo_ff_hanabi.py``): its ``ActorCritic``, its ``gae`` scan, its ``loss_fn`` under ``jax.grad`` and
``optax.chain(clip_by_global_norm, adam(eps=1e-5))``. Autodiff, the optimiser and the clipping are JAX's and optax's.
Everything runs on one rollout of an ers learner, from its parameters, over the minibatches ers drew
(``Learner.minibatches``). JaxMARL's action set is ers's A moves and a no-op, the waiting seat's only legal move,
whose output column starts at zero.

``compare_update`` runs the reference twice, in float32 and in float64 (``jax.enable_x64``), and reports per layer
how far ers's float32 parameters lie from the float64 update, beside how far JAX's own float32 update lies from it.
An ers update that computed something else would lie as far from it as the update moved the parameters.

``python -m ers_deep.bench.jax_update --num-envs 1024 --num-steps 128 --hidden 512 --out DIR`` (the H200 runs'
setting) writes ``DIR/jax-update.json``. Needs ers-deep's ``reference`` extra (jax, optax)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ers_deep.nets import NetConfig
from ers_deep.train import Learner, TrainConfig, paper_config
from ers_deep.train.collect import Rollout
from ers_exact.util.cli import script_parser

LAYERS = ("embed", "actor_hidden", "actor_out", "critic_hidden", "critic_out")


def anchor_params(learner: Learner) -> dict[str, dict[str, np.ndarray]]:
    """Seed 0's parameters as the anchor's Dense layers (kernel [in, out], bias [out]), float32, the no-op column
    appended to the actor's output layer (zero: it only meets the waiting seat, where its gradient is 0)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for name in LAYERS:
        layer = getattr(learner.net, name)
        w, b = (t.detach().cpu().numpy().copy() for t in (layer.weight[0], layer.bias[0, 0]))  # not views
        if name == "actor_out":
            w, b = np.concatenate([w, np.zeros_like(w[:, :1])], 1), np.append(b, 0.0).astype(b.dtype)
        out[name] = {"kernel": w, "bias": b}
    return out


def anchor_apply(params: Any, x: Any, avail: Any) -> tuple[Any, Any]:
    """The anchor's ``ActorCritic.__call__``: (masked logits, value)."""
    import jax

    def dense(name: str, h: Any) -> Any:
        return h @ params[name]["kernel"] + params[name]["bias"]

    e = jax.nn.relu(dense("embed", x))
    logits = dense("actor_out", jax.nn.relu(dense("actor_hidden", e))) - (1.0 - avail) * 1e10
    return logits, dense("critic_out", jax.nn.relu(dense("critic_hidden", e)))[..., 0]


def anchor_gae(reward: Any, value: Any, last_value: Any, done: Any, gamma: float, lam: float) -> Any:
    """The anchor's ``gae`` scan over [T, N]: the advantages."""
    import jax
    import jax.numpy as jnp

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


def anchor_loss(params: Any, b: tuple[Any, ...], clip: float, vf: float, ent_coef: float) -> Any:
    """The anchor's ``loss_fn`` on one minibatch ``b`` = (obs, avail, action, logp, value, advantage, target)."""
    import jax
    import jax.numpy as jnp

    o, avail, act, logp, v, adv, tgt = b
    logits, val = anchor_apply(params, o, avail)
    lp_all = jax.nn.log_softmax(logits)
    lp = jnp.take_along_axis(lp_all, act[..., None], -1)[..., 0]
    ratio = jnp.exp(lp - logp)
    vc = v + jnp.clip(val - v, -clip, clip)
    vl = 0.5 * jnp.maximum((val - tgt) ** 2, (vc - tgt) ** 2).mean()
    ent = -(jnp.exp(lp_all) * jnp.where(avail > 0, lp_all, 0.0)).sum(-1).mean()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
    return pg + vf * vl - ent_coef * ent


def anchor_inputs(ro: Rollout) -> tuple[np.ndarray, ...]:
    """Seed 0's rollout [T, N, ...] in the anchor's action set: (obs, avail, action, logp); the waiting seat's move
    is the no-op (index A), its only legal move, of log-probability 0."""
    acting = ro.acting[0].cpu().numpy()
    legal = ro.legal[0].cpu().numpy() & acting[..., None]
    avail = np.concatenate([legal, ~acting[..., None]], -1).astype(np.float32)
    act = np.where(acting, ro.action[0].cpu().numpy(), legal.shape[-1])
    logp = np.where(acting, ro.logp[0].cpu().numpy(), 0.0).astype(np.float32)
    return ro.obs[0].float().cpu().numpy(), avail, act, logp


def take(x: np.ndarray, idx: torch.Tensor) -> np.ndarray:
    """The minibatch ``idx`` of one seed's [T, N, ...] array: actors [M], or turn streams [1, T, M] (the actor
    read at each step)."""
    idx = idx.cpu()
    if idx.dim() == 1:
        return x[:, idx.numpy()]
    return x[np.arange(x.shape[0])[:, None], idx[0].numpy()]


def reference_update(
    learner: Learner, ro: Rollout, batches: list[torch.Tensor], start: dict[str, Any], dtype: type
) -> tuple[dict[str, Any], np.ndarray]:
    """(parameters, advantages [T, N]) of the anchor's update of seed 0 from ``start`` over ``batches`` in
    ``dtype`` (float32 or float64): its GAE on the rollout's rewards, values and episode ends, then the loss under
    ``jax.grad`` and optax's clipping and Adam, one step per minibatch."""
    import jax
    import jax.numpy as jnp
    import optax

    cfg = learner.config
    with jax.enable_x64(dtype == np.float64):

        def cast(x: np.ndarray) -> Any:
            return jnp.asarray(x.astype(dtype) if x.dtype.kind == "f" else x)

        value = ro.value[0].cpu().numpy()
        fields = (ro.reward[0], ro.value[0], ro.last_value[0], ro.done[0].float())
        reward, val, last, done = (cast(t.cpu().numpy()) for t in fields)
        adv = np.asarray(anchor_gae(reward, val, last, done, learner.gamma, cfg.gae_lambda))
        data = (*anchor_inputs(ro), value, adv, adv + value.astype(dtype))
        tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.lr, eps=cfg.adam_eps))
        params = jax.tree_util.tree_map(cast, start)
        opt_state, grad = tx.init(params), jax.grad(anchor_loss)
        for idx in batches:
            mb = tuple(cast(take(x, idx)) for x in data)
            updates, opt_state = tx.update(
                grad(params, mb, cfg.clip_eps, cfg.vf_coef, cfg.alpha), opt_state, params
            )
            params = optax.apply_updates(params, updates)
        return jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params), adv


def say(stage: str) -> None:
    """One progress line on stderr (a full-size comparison takes minutes on one core)."""
    print(f"[jax_update {time.strftime('%H:%M:%S')}] {stage}", file=sys.stderr, flush=True)


def compare_update(config: TrainConfig, rollouts: int = 2) -> dict[str, Any]:
    """One ers update of seed 0 of ``config`` (after ``rollouts`` - 1 rollouts collected and dropped, so that games
    are mid-way) against the anchor's in float32 and float64. Per layer and tensor (``"embed.kernel"``, ...):
    ``moved`` (the float64 update's largest change), ``ers_vs_f64`` / ``jax32_vs_f64`` (largest and mean absolute
    difference from the float64 parameters), ``ers_vs_jax32`` (largest); ``adv_vs_f64``: the same for ers's
    advantages. The update is float32's: ``bf16_gradients="auto"`` and ``int8_inputs="auto"`` are taken as off
    (True compares the update with bfloat16 gradient products, or the int8 embedding)."""
    for switch in ("bf16_gradients", "int8_inputs"):
        if getattr(config, switch) == "auto":
            config = config.replace(**{switch: False})
    say("building the learner and collecting")
    learner = Learner(config)
    for _ in range(rollouts - 1):
        learner.collect()
    ro, _ = learner.collect()
    ro = ro.clone()
    start = anchor_params(learner)
    adv, target = learner.advantages(ro)
    batches = learner.minibatches(ro)
    say(f"ers's update ({len(batches)} minibatch steps)")
    t0 = time.perf_counter()
    learner.ppo_update(ro, adv, target, batches)
    ers_s = time.perf_counter() - t0
    say("the anchor's update in float32")
    f32, adv32 = reference_update(learner, ro, batches, start, np.float32)
    say("the anchor's update in float64")
    f64, adv64 = reference_update(learner, ro, batches, start, np.float64)
    after = anchor_params(learner)  # ers's parameters after its update, in the anchor's layout
    layers: dict[str, dict[str, float]] = {}
    for name in LAYERS:
        # the actor's no-op output column is the anchor's alone
        cut = slice(None, -1) if name == "actor_out" else slice(None)
        for key in ("kernel", "bias"):
            r32, r64, before = (np.asarray(p[name][key])[..., cut] for p in (f32, f64, start))
            o = after[name][key][..., cut].astype(np.float64)
            layers[f"{name}.{key}"] = {
                "moved": float(np.abs(r64 - before).max()),
                "ers_vs_f64": float(np.abs(o - r64).max()),
                "ers_vs_f64_mean": float(np.abs(o - r64).mean()),
                "jax32_vs_f64": float(np.abs(r32 - r64).max()),
                "jax32_vs_f64_mean": float(np.abs(r32 - r64).mean()),
                "ers_vs_jax32": float(np.abs(o - r32).max()),
            }
    ers_adv = adv[0].cpu().double().numpy()
    return {
        "minibatch_steps": len(batches),
        "minibatch_unit": learner.minibatch_unit,
        "episode_ends_in_rollout": int(ro.done[0].sum()),
        "ers_update_s": ers_s,
        "adv_vs_f64": {
            "ers": float(np.abs(ers_adv - adv64).max()),
            "jax32": float(np.abs(adv32 - adv64).max()),
        },
        "layers": layers,
    }


def markdown(layers: dict[str, dict[str, float]]) -> str:
    """``compare_update``'s layers as a markdown table."""
    head = "| tensor | moved | ers vs float64 (max / mean) | JAX float32 vs float64 (max / mean) |\n| --- | --- | --- | --- |"
    rows = [
        f"| {k} | {v['moved']:.2e} | {v['ers_vs_f64']:.1e} / {v['ers_vs_f64_mean']:.1e} | "
        f"{v['jax32_vs_f64']:.1e} / {v['jax32_vs_f64_mean']:.1e} |"
        for k, v in layers.items()
    ]
    return "\n".join([head, *rows])


def parser() -> argparse.ArgumentParser:
    """The command line of :func:`main` (abbreviated flags refused: ``script_parser``)."""
    ap = script_parser("python -m ers_deep.bench.jax_update", __doc__.split("\n")[0])
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--num-steps", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--preset", default="Hanabi-Full")
    ap.add_argument("--knowledge", default="v0-belief")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Command line: one update of a Hanabi learner against the anchor's in float32 and float64; JSON to --out."""
    a = parser().parse_args(argv)
    torch.set_num_threads(1)
    config = paper_config(
        "hanabi",
        seeds=(a.seed,),
        num_envs=a.num_envs,
        num_steps=a.num_steps,
        hanabi_preset=a.preset,
        hanabi_knowledge=a.knowledge,
        net=NetConfig(kind="mlp", hidden=a.hidden),
        collect_mode="eager",
        update_mode="eager",
    )
    result = compare_update(config)
    a.out.mkdir(parents=True, exist_ok=True)
    keys = ("num_envs", "num_steps", "hanabi_preset", "hanabi_knowledge", "epochs", "minibatches", "lr")
    record = {
        "config": {k: getattr(config, k) for k in keys} | {"hidden": a.hidden, "seed": a.seed},
        **result,
    }
    (a.out / "jax-update.json").write_text(json.dumps(record, indent=1))
    print(markdown(result["layers"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
