"""The TorchRL env: specs (check_env_specs), multi-agent layout, resets, and a Collector with a masked policy."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs.utils import check_env_specs
from torchrl.modules import MaskedCategorical, MultiAgentMLP, ProbabilisticActor

from ers_deep.envs import HanabiConfig
from ers_deep.envs.hanabi.torchrl import HanabiTorchRLEnv


@pytest.mark.parametrize(
    "config, players", [("Hanabi-Full", 2), ("Hanabi-Small", 3), ("Hanabi-Very-Small", 5)]
)
def test_check_env_specs(config: str, players: int) -> None:
    env = HanabiTorchRLEnv(config, players=players, batch_size=6, seed=0)
    check_env_specs(env, break_when_any_done="both")


def test_layout_and_partial_resets() -> None:
    env = HanabiTorchRLEnv(batch_size=16, seed=0)
    td = env.reset()
    assert td["agents", "observation"].shape == (16, 2, 658)
    assert td["agents", "mask"].squeeze(-1).sum(-1).eq(1).all()
    assert (td["current_player"] == 0).all()
    roll = env.rollout(60, break_when_any_done=False)
    acting = roll["agents", "mask"].squeeze(-1)  # [B, T, P]
    actions = roll["agents", "action"]
    legal = roll["agents", "action_mask"].gather(-1, actions[..., None]).squeeze(-1)
    assert legal[acting].all()  # the player to move always chose a legal move
    non_acting_masks = roll["agents", "action_mask"][~acting]
    assert non_acting_masks.all()  # non-acting players get all-True masks (ignored)
    done = roll["next", "done"].squeeze(-1)  # [B, T]
    assert done.any()
    reward = roll["next", "agents", "reward"]
    assert torch.equal(reward[..., 0, :], reward[..., 1, :])  # team reward
    b, t = done.nonzero()[0].tolist()
    assert t + 1 < 60 and int(roll["current_player"][b, t + 1]) == 0 and int(roll["score"][b, t + 1]) == 0
    # the sum of rewards of a finished game is its final score
    start = 0
    assert float(reward[b, start : t + 1, 0].sum()) == float(roll["next", "score"][b, t])


def test_collector_with_masked_policy() -> None:
    cfg = HanabiConfig()
    env = HanabiTorchRLEnv(cfg, batch_size=32, seed=0)
    net = MultiAgentMLP(
        cfg.obs_size, cfg.num_moves, n_agents=2, centralized=False, share_params=True, depth=1, num_cells=32
    )
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=[("agents", "observation")], out_keys=[("agents", "logits")]),
        in_keys={"logits": ("agents", "logits"), "mask": ("agents", "action_mask")},
        out_keys=[("agents", "action")],
        distribution_class=MaskedCategorical,
        return_log_prob=True,
    )
    collector = Collector(
        env, actor, frames_per_batch=32 * 20, total_frames=32 * 60, auto_register_policy_transforms=False
    )
    batches = 0
    for batch in collector:
        batches += 1
        assert batch["agents", "observation"].shape == (32, 20, 2, cfg.obs_size)
        acting = batch["agents", "mask"].squeeze(-1)
        chosen = batch["agents", "action_mask"].gather(-1, batch["agents", "action"][..., None]).squeeze(-1)
        assert chosen[acting].all()
    collector.shutdown()
    assert batches == 3


def test_torchrl_random_policy_is_told_where_the_legal_moves_are() -> None:
    """TorchRL's ``Collector(env, None)`` plays ``RandomPolicy`` over the whole action spec: the env's error
    names the illegal move and where legal moves come from; ``policy=env.rand_action`` collects."""
    from ers_deep.envs.hanabi.state import IllegalMoveError

    env = HanabiTorchRLEnv("Hanabi-Very-Small", batch_size=4, seed=0)
    with pytest.raises(IllegalMoveError, match=r"illegal move .*action_mask.*policy=env\.rand_action"):
        for _ in Collector(env, None, frames_per_batch=40, total_frames=400):
            pass
    batches = list(Collector(env, env.rand_action, frames_per_batch=40, total_frames=80))
    assert [b.batch_size for b in batches] == [torch.Size([4, 10])] * 2
