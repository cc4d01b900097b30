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
