"""The Overcooked V2 TorchRL env: specs (check_env_specs), layout and time-limit resets."""

from __future__ import annotations


def test_torchrl_check_env_specs() -> None:
    from torchrl.envs.utils import check_env_specs

    from ers_deep.envs.overcooked_v2.torchrl import OvercookedV2TorchRLEnv

    env = OvercookedV2TorchRLEnv(batch_size=4, seed=0, max_steps=20, paper_obs=True)
    check_env_specs(env, break_when_any_done="both")
    roll = env.rollout(45, break_when_any_done=False)
    assert roll["agents", "observation"].shape == (4, 45, 2, 5, 5, 38)
    done = roll["next", "done"].squeeze(-1)
    assert done[:, 19].all() and done[:, 39].all() and done.sum() == 8
