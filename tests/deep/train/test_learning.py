"""The update learns, per env family: on a fixed rollout, one PPO update raises the log-probability of the
actions with positive advantage against those with negative advantage, and lowers the value loss towards the
GAE targets. The same check on a no-op update (learning rate 0) finds no change, so it can fail."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ers_deep.train import Learner
from ers_deep.train.collect import Rollout
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config


def _evaluate(learner: Learner, ro: Rollout) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(action) and V of every rollout entry under the learner's current network."""
    with torch.no_grad():
        logits, value, _ = learner.net(ro.obs, ro.first, ro.hidden0)
        logp = torch.log_softmax(logits.masked_fill(~ro.legal, -1e10), -1)
        return logp.gather(-1, ro.action[..., None])[..., 0], value


def _progress(env: str, lr: float, **kw: Any) -> tuple[float, float, float]:
    """(advantage-weighted change of log pi on acting entries, value loss before, after) of one update."""
    learner = Learner(tiny_config(env, collect_mode="eager", lr=lr, lr_schedule="constant", seeds=(0,), **kw))
    learner.collect()  # a second rollout: episodes are under way, so rewards appear
    ro, _ = learner.collect()
    ro = ro.clone()
    adv, target = learner.advantages(ro)
    logp0, v0 = _evaluate(learner, ro)
    learner.ppo_update(ro, adv, target)
    logp1, v1 = _evaluate(learner, ro)
    gain = float(((logp1 - logp0) * adv * ro.acting).sum())
    return gain, float(((v0 - target) ** 2).mean()), float(((v1 - target) ** 2).mean())


@pytest.mark.parametrize("env", ["tabular:dectiger", "hanabi", "overcooked-v2"])
def test_one_update_learns(env: str) -> None:
    gain, before, after = _progress(env, lr=0.5 if env.startswith("tabular") else 1e-3)
    assert gain > 0, f"{env}: the update moved log pi against the advantages ({gain})"
    assert after < before, f"{env}: the value loss did not fall ({before} -> {after})"
    gain0, before0, after0 = _progress(env, lr=0.0)
    assert gain0 == 0 and after0 == before0  # a no-op update fails both checks above


def test_bf16_update_learns_and_differs_from_float32() -> None:
    """``bf16_update``: the autocast update still learns (the check above) and is not the float32 update."""
    cfg = tiny_config("hanabi", collect_mode="eager", seeds=(0,), lr=1e-3, lr_schedule="constant")
    runs = []
    for bf16 in (False, True):
        learner = Learner(cfg.replace(bf16_update=bf16))
        learner.train_step()
        runs.append(torch.cat([p.detach().flatten() for p in learner.net.parameters()]))
    assert not torch.equal(runs[0], runs[1])
    gain, before, after = _progress("hanabi", 1e-3, bf16_update=True)
    assert gain > 0 and after < before
