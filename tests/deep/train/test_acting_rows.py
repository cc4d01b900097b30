"""The actor head on acting entries only (``ppo_loss(..., acting_share=P)``, Hanabi: one acting seat per step):
the same loss and gradients as the head on every entry, on minibatches of turn streams
(``ppo.turn_streams``); the learner batches by turn stream where it applies, by whole game for nets that
carry state (other-play) or with ``turn_streams=False``, and by actor elsewhere."""

from __future__ import annotations

import pytest
import torch

from ers_deep.train import Learner
from ers_deep.train.ppo import ppo_loss, turn_streams, update_data
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
    idx = turn_streams(ro.acting, 2)[:, :, torch.tensor([0, 3, 5, 6, 11])]  # streams of one seat of a game
    mb = select(update_data(ro, adv, target), idx)
    assert int(mb["acting"].sum()) * 2 == mb["acting"].numel()  # T M / P acting entries per seed
    rows = _loss_and_grads(learner, mb, 2)
    every = _loss_and_grads(learner, mb, None)
    for a, b in zip(rows, every, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), (a - b).abs().max()


def test_minibatches_hold_turn_streams_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    """With acting rows, each epoch's minibatches are random turn streams that together read every entry of
    the rollout once, each with exactly T M / P acting entries, and split games' seats (minibatches of whole
    games never did); without, minibatches of actors; Overcooked (both seats act) and a rollout length that P
    does not divide have no acting share."""
    assert Learner(tiny_config("hanabi", collect_mode="eager", acting_rows=False)).acting_share is None
    assert Learner(tiny_config("overcooked-v2", collect_mode="eager")).acting_share is None  # both seats act
    assert Learner(tiny_config("hanabi", collect_mode="eager", num_steps=31)).acting_share is None
    learner = Learner(tiny_config("hanabi", collect_mode="eager"))
    seen: list[torch.Tensor] = []
    real = PPOUpdate.__call__

    def spy(self: PPOUpdate, data: dict, batches: list, table: object = None) -> dict:
        seen.extend(batches)
        return real(self, data, batches, table)  # type: ignore[arg-type]

    monkeypatch.setattr(PPOUpdate, "__call__", spy)
    ro, _ = learner.collect()
    learner.ppo_update(ro, *learner.advantages(ro))
    cfg, (S, T, N) = learner.config, ro.acting.shape
    assert len(seen) == cfg.epochs * cfg.minibatches
    split = False
    for epoch in range(cfg.epochs):
        mbs = seen[epoch * cfg.minibatches : (epoch + 1) * cfg.minibatches]
        assert all(mb.shape[:2] == (S, T) for mb in mbs)
        every = torch.cat(mbs, 2).sort(2).values  # [S, T, N]: every actor at every step, once
        assert torch.equal(every, torch.arange(N).expand(S, T, N))
        for mb in mbs:
            assert int(ro.acting.gather(2, mb).sum()) == S * T * mb.shape[2] // 2
            games = mb // 2  # a stream reads one game slot throughout
            assert torch.equal(games, games[:, :1].expand_as(games))
            slots = games[0, 0].tolist()
            split |= any(slots.count(b) == 1 for b in slots)  # one seat's stream here, the other's elsewhere
    assert split
    without = Learner(tiny_config("hanabi", collect_mode="eager", acting_rows=False))
    seen.clear()
    ro, _ = without.collect()
    without.ppo_update(ro, *without.advantages(ro))
    assert all(mb.dim() == 1 for mb in seen)


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


@pytest.mark.parametrize("kind", ["self-play", "other-play"])
def test_every_minibatch_replays_the_rollouts_log_probabilities(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the first gradient step, the net on each minibatch the learner draws gives the log-probabilities
    collected: a minibatch reads its entries with the state they were played from. Other-play's net draws phi
    per actor and episode from the state it carries (actor id, episodes started), so its minibatches keep each
    seat's stream whole; the stateless MLP's are turn streams."""
    from ers_deep.nets import NetState, masked_logits
    from ers_deep.other_play import op_net, op_symmetries

    cfg = tiny_config("hanabi", collect_mode="eager", hanabi_preset="Hanabi-Small", num_steps=40)
    phi = op_symmetries(cfg, "mdp")
    assert len(phi) > 1
    learner = Learner(cfg, net=op_net(cfg, phi) if kind == "other-play" else None)
    seen: list[torch.Tensor] = []
    monkeypatch.setattr(
        PPOUpdate, "__call__", lambda self, data, batches, table=None: seen.extend(batches) or {}
    )
    learner.collect()
    ro, _ = learner.collect()
    assert bool(ro.first[:, 1:].any()), "the rollout should hold a game start"
    adv, target = learner.advantages(ro)
    data = update_data(ro, adv, target)
    learner.ppo_update(ro, adv, target)
    assert seen and all(mb.dim() == (3 if kind == "self-play" else 1) for mb in seen)
    with torch.no_grad():
        for idx in seen:
            mb = select(data, idx)
            logits, _, _ = learner.net(mb["obs"], mb["first"], NetState.from_tensors(mb, "hidden0/"))
            logp = torch.log_softmax(masked_logits(logits, mb["legal"]), -1)
            logp = logp.gather(-1, mb["action"][..., None])[..., 0]
            acting = mb["acting"]
            assert torch.allclose(logp[acting], mb["logp"][acting], atol=1e-5)


def test_turn_streams_off_draws_whole_games_and_old_configs_keep_them() -> None:
    """``turn_streams=False`` (and a run config written before the field, which drew whole games) gives
    minibatches of whole games; the default, turn streams; other-play's stateful net, whole games either way."""
    from ers_deep.other_play import op_net, op_symmetries

    cfg = tiny_config("hanabi", collect_mode="eager")
    assert cfg.turn_streams and Learner(cfg).minibatch_unit == "turn-streams"
    assert Learner(cfg.replace(turn_streams=False)).minibatch_unit == "games"
    assert Learner(cfg.replace(acting_rows=False)).minibatch_unit == "actors"
    assert Learner(cfg, net=op_net(cfg, op_symmetries(cfg, "mdp"))).minibatch_unit == "games"
    data = cfg.to_json()
    del data["turn_streams"]
    assert type(cfg).from_json(data).turn_streams is False
    assert type(cfg).from_json(cfg.to_json()) == cfg
