"""Shared pieces of the learner's CPU tests and their gpu-marked twins: tiny configs per env family, rollouts
of a learner, field-by-field comparison, compiled against eager updates."""

from __future__ import annotations

from typing import Any

import torch

from ers_deep.nets import ActorCritic, NetConfig
from ers_deep.train import Learner, TrainConfig, paper_config
from ers_deep.train.collect import Rollout
from ers_deep.train.ippo import compile_settings

TINY: dict[str, dict[str, Any]] = {
    "tabular:dectiger": {"num_envs": 8, "num_steps": 5},
    "hanabi": {
        "hanabi_preset": "Hanabi-Very-Small",
        "num_envs": 8,
        "num_steps": 30,
        "net": NetConfig(kind="mlp", hidden=32),
    },
    # the episode lasts 400 steps: the tests stagger the clocks so that games end mid-rollout
    "overcooked-v2": {
        "num_envs": 4,
        "num_steps": 20,
        "minibatches": 2,
        "net": NetConfig(kind="cnn-gru", hidden=8, conv=8),
    },
}


def tiny_config(env: str, **kw: Any) -> TrainConfig:
    """A small config of ``env`` (2 seeds) with ``kw`` on top."""
    return paper_config(env, **{"seeds": (0, 1), **TINY[env], **kw})


def stagger(learner: Learner) -> None:
    """Overcooked V2: spread the games' step clocks so that episodes end inside the first rollouts."""
    state = learner.env.state
    if hasattr(state, "step") and learner.config.env == "overcooked-v2":
        B = learner.env.batch_size
        state.step.copy_(torch.arange(B, device=state.step.device) * 7 % 400 + 380)


def rollouts(
    cfg: TrainConfig, calls: int, net: ActorCritic | None = None
) -> list[tuple[Rollout, dict[str, torch.Tensor]]]:
    """``calls`` consecutive collections of a fresh learner (with ``net``: other-play's, discovery's), cloned
    (graph modes reuse their buffers)."""
    learner = Learner(cfg, net=net)
    stagger(learner)
    if learner.fast is not None:
        learner.fast.fast.restart()
    out = []
    for _ in range(calls):
        ro, stats = learner.collect()
        out.append((ro.clone(), stats))
    return out


def assert_rollouts_equal(
    a: list[tuple[Rollout, dict[str, torch.Tensor]]],
    b: list[tuple[Rollout, dict[str, torch.Tensor]]],
    float_tol: float = 0.0,
) -> None:
    """Every field of every rollout equal (float fields of the network within ``float_tol``), stats close."""
    for i, ((ra, sa), (rb, sb)) in enumerate(zip(a, b, strict=True)):
        ta, tb = ra.tensors(), rb.tensors()
        assert ta.keys() == tb.keys(), f"rollout {i}: fields {sorted(ta)} != {sorted(tb)}"
        for k, x in ta.items():
            y = tb[k]
            assert x.shape == y.shape, f"rollout {i}: {k} shapes {tuple(x.shape)} != {tuple(y.shape)}"
            if float_tol and x.is_floating_point() and k in ("logp", "value", "last_value"):
                assert torch.allclose(x, y, atol=float_tol), f"rollout {i}: {k}"
            else:
                bad = (x != y).nonzero()
                assert len(bad) == 0, (
                    f"rollout {i}: {k} differs at {len(bad)} entries, first {bad[0].tolist()}"
                )
        for k in sa:
            assert torch.allclose(sa[k], sb[k], equal_nan=True, atol=1e-5), f"rollout {i}: stat {k}"
    assert any(bool(ro.done.any()) for ro, _ in a), "no episode ended: the check must include resets"


def trained_params(
    cfg: TrainConfig, updates: int, staggered: bool = False, net: ActorCritic | None = None
) -> list[torch.Tensor]:
    """The parameters of a fresh learner of ``cfg`` (with ``net``: other-play's, discovery's) after ``updates``
    updates (``staggered``: Overcooked V2's clocks spread, so that episodes end inside the rollouts), checking
    the update ran in ``cfg.update_mode``."""
    learner = Learner(cfg, net=net)
    if staggered:
        stagger(learner)
        if learner.fast is not None:
            learner.fast.fast.restart()
    for _ in range(updates):
        learner.train_step()
    assert learner.updater.mode == cfg.update_mode
    return [p.detach().clone() for p in learner.net.parameters()]


def mode_vs_eager_params(cfg: TrainConfig, mode: str, updates: int, staggered: bool = False) -> float:
    """Largest parameter difference between a learner whose update runs in ``mode`` and one with the eager
    update, after ``updates`` updates from the same seeds."""
    a = trained_params(cfg.replace(update_mode=mode), updates, staggered)
    b = trained_params(cfg.replace(update_mode="eager"), updates, staggered)
    return max_difference(a, b)


def max_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest absolute difference between two lists of parameters, tensor by tensor."""
    return max(float((p - q).abs().max()) for p, q in zip(a, b, strict=True))


def same_rollouts_params(
    cfg: TrainConfig, twin_cfg: TrainConfig, updates: int, staggered: bool = False
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The parameters of two learners after ``updates`` updates on the same data: a learner of ``cfg``
    collects each rollout and draws its minibatches; a learner of ``twin_cfg`` (another device, another update
    mode) starts from the same parameters and updates on that rollout and those minibatches, moved to its
    device, with its own GAE. (reference's, twin's)"""
    ref, twin = Learner(cfg), Learner(twin_cfg)
    if staggered:
        stagger(ref)
        if ref.fast is not None:
            ref.fast.fast.restart()
    twin.net.load_state_dict(ref.net.state_dict())
    dev = twin.env.device
    for _ in range(updates):
        with compile_settings(cfg):
            ro = ref.collect()[0].clone()
            batches = ref.minibatches(ro)
            ref.ppo_update(ro, *ref.advantages(ro), batches)
        moved = ro.to(dev)
        with compile_settings(twin_cfg):
            twin.ppo_update(moved, *twin.advantages(moved), [b.to(dev) for b in batches])
        ref.update += 1
        twin.update += 1
    assert twin_cfg.update_mode == "auto" or twin.updater.mode == twin_cfg.update_mode
    return [p.detach().clone() for p in ref.net.parameters()], [
        p.detach().cpu() for p in twin.net.parameters()
    ]
