"""The actor head on acting entries only (``ppo_loss(..., acting_share=P)``, Hanabi: one acting seat per step):
the same loss and gradients as the head on every entry, on minibatches of whole games; the learner batches
by game where it applies and by actor elsewhere."""

from __future__ import annotations

import pytest
import torch

from ers_deep.train import Learner
from ers_deep.train.ppo import ppo_loss, update_data
from ers_deep.train.update import PPOUpdate, select
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import tiny_config


def _loss_and_grads(learner: Learner, mb: dict[str, torch.Tensor], share: int | None) -> list[torch.Tensor]:
    learner.net.zero_grad(set_to_none=True)
    loss, parts = ppo_loss(learner.net, learner.config, mb, None, share)
    loss.sum().backward()
    return [loss.detach(), *parts.values(), *(p.grad.clone() for p in learner.net.parameters())]


def test_acting_rows_give_the_loss_of_every_entry() -> None:
    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    assert learner.acting_share == 2
    learner.collect()
    ro, _ = learner.collect()
    adv, target = learner.advantages(ro)
    games = torch.tensor([0, 3, 5])
    idx = (games[:, None] * 2 + torch.arange(2)).flatten()  # whole games: both seats
    mb = select(update_data(ro, adv, target), idx)
    assert int(mb["acting"].sum()) * 2 == mb["acting"][0].numel() * 2  # one acting seat per step and game
    rows = _loss_and_grads(learner, mb, 2)
    every = _loss_and_grads(learner, mb, None)
    for a, b in zip(rows, every, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), (a - b).abs().max()


def test_minibatches_hold_whole_games_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Learner(tiny_config("hanabi", collect_mode="eager", acting_rows=False)).acting_share is None
    assert Learner(tiny_config("overcooked-v2", collect_mode="eager")).acting_share is None  # both seats act
    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    seen: list[torch.Tensor] = []
    real = PPOUpdate.__call__

    def spy(self: PPOUpdate, data: dict, batches: list, table: object = None) -> dict:
        seen.extend(batches)
        return real(self, data, batches, table)  # type: ignore[arg-type]

    monkeypatch.setattr(PPOUpdate, "__call__", spy)
    ro, _ = learner.collect()
    learner.ppo_update(ro, *learner.advantages(ro))
    assert len(seen) == learner.config.epochs * learner.config.minibatches
    for idx in seen:
        assert sorted(idx.tolist()) == sorted(set(idx.tolist()))
        assert all(int(a) ^ 1 in set(idx.tolist()) for a in idx)  # seat 0 and seat 1 of each game together


@pytest.mark.parametrize("acting_rows", [True, False])
def test_the_learner_learns_either_way(acting_rows: bool) -> None:
    learner = Learner(tiny_config("hanabi", collect_mode="eager", acting_rows=acting_rows, seeds=(0,)))
    before = [p.detach().clone() for p in learner.net.parameters()]
    learner.train_step()
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.net.parameters(), strict=True))


def _official_loss(learner: Learner, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The official code's loss (JaxMARL ``ippo_ff_hanabi.py``, ``../shared/anchors/ippo_hanabi_jax.py``),
    written out plainly: every term a mean over every entry, the waiting seat's forced no-op included; the
    advantages normalised over every entry. Returns (loss [S], actor term [S], normalised advantages)."""
    cfg = learner.config
    logits, value, _ = learner.net(mb["obs"], mb["first"], learner.net.initial_state(mb["obs"].shape[2]))
    # JaxMARL's action set: ers's A moves and a no-op, the waiting seat's only legal move (ers has no no-op:
    # the env ignores the waiting seat's move)
    acting = mb["acting"]
    logits = torch.cat([logits, torch.zeros_like(logits[..., :1])], -1)
    legal = torch.cat([mb["legal"] & acting[..., None], ~acting[..., None]], -1)
    action = torch.where(acting, mb["action"], logits.shape[-1] - 1)
    logits = logits - (~legal).float() * 1e10
    lp_all = torch.log_softmax(logits, -1)
    lp = lp_all.gather(-1, action[..., None])[..., 0]
    old = torch.where(acting, mb["logp"], 0.0)
    ratio = torch.exp(lp - old)
    adv = mb["adv"]
    flat = adv.flatten(1)
    adv = (adv - flat.mean(1).view(-1, 1, 1)) / (flat.std(1, correction=0).view(-1, 1, 1) + 1e-8)
    clip = cfg.clip_eps
    pg = -torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).flatten(1).mean(1)
    vc = mb["value"] + (value - mb["value"]).clamp(-clip, clip)
    vl = 0.5 * torch.maximum((value - mb["target"]) ** 2, (vc - mb["target"]) ** 2).flatten(1).mean(1)
    ent = -(lp_all.exp() * torch.where(legal, lp_all, 0.0)).sum(-1).flatten(1).mean(1)
    return pg + cfg.vf_coef * vl - cfg.alpha * ent, pg, adv


@pytest.mark.parametrize("share", [2, None])
def test_loss_mean_all_is_the_official_loss_up_to_a_constant(share: int | None) -> None:
    """``loss_mean="all"`` (the default): the gradient of the official loss over every entry; the loss itself
    differs by the waiting seats' constant actor term, -sum_waiting A / (T M), and nothing else."""
    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    assert learner.config.loss_mean == "all"
    learner.collect()
    ro, _ = learner.collect()
    adv, target = learner.advantages(ro)
    games = torch.tensor([1, 2, 6])
    mb = select(update_data(ro, adv, target), (games[:, None] * 2 + torch.arange(2)).flatten())
    ours = _loss_and_grads(learner, mb, share)
    learner.net.zero_grad(set_to_none=True)
    official, pg, norm = _official_loss(learner, mb)
    official.sum().backward()
    grads = [p.grad.clone() for p in learner.net.parameters()]
    for a, b in zip(ours[4:], grads, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4), (a - b).abs().max()
    constant = -(norm * (~mb["acting"]).float()).flatten(1).sum(1) / norm[0].numel()
    assert torch.allclose(ours[0], official - constant, atol=1e-5), (ours[0], official - constant)
    assert torch.allclose(ours[1], pg - constant, atol=1e-5)  # the actor term


def test_loss_mean_acting_differs_and_old_configs_keep_it() -> None:
    """``"acting"`` (ers before the option) weighs the policy terms twice as much on Hanabi: a different
    gradient; a run config written before the field loads as ``"acting"``, the loss it ran with."""
    learner = Learner(tiny_config("hanabi", collect_mode="eager", loss_mean="acting"))
    learner.collect()
    ro, _ = learner.collect()
    mb = select(update_data(ro, *learner.advantages(ro)), torch.arange(6))
    acting = _loss_and_grads(learner, mb, None)
    learner.config = learner.config.replace(loss_mean="all")
    every = _loss_and_grads(learner, mb, None)
    assert not torch.allclose(acting[4], every[4])
    data = learner.config.to_json()
    del data["loss_mean"]
    assert type(learner.config).from_json(data).loss_mean == "acting"
