"""The table-driven Overcooked V2 transition and observation against their slow references (the first port, itself
checked against JaxMARL), on every layout and every switch, from states reached by random play."""

from __future__ import annotations

import pytest
import torch

from ers_deep.envs.overcooked_v2 import OvercookedV2Env
from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS

from .overcooked_slow_reference import observe_reference, transition_reference

SWITCHES = [
    {},
    {"start_cooking_interaction": True},
    {"negative_rewards": False},
    {"paper_obs": True},
    {"indicate_successful_delivery": True},
    {"agent_view_size": None},
    {"agent_view_size": 1, "paper_obs": True, "indicate_successful_delivery": True},
]


def _random_actions(g: torch.Generator, batch: int, agents: int) -> torch.Tensor:
    """Interact with probability 0.4 (so that pots fill and buttons light), else a uniform other action."""
    return torch.where(
        torch.rand(batch, agents, generator=g) < 0.4, 5, torch.randint(5, (batch, agents), generator=g)
    )


@pytest.mark.parametrize("layout", sorted(LAYOUT_STRINGS))
@pytest.mark.parametrize("switch", range(len(SWITCHES)))
def test_fast_paths_equal_slow_references(layout: str, switch: int) -> None:
    env = OvercookedV2Env(
        layout, batch_size=32, seed=switch, max_steps=100, obs_dtype=torch.long, **SWITCHES[switch]
    )
    g = torch.Generator().manual_seed(switch)
    events = 0
    for t in range(120):
        a = _random_actions(g, 32, env.A)
        rng = env.generator.get_state()
        fast = env.transition(env.state, a)
        env.generator.set_state(rng)  # the recipe resampled after a delivery is the same draw
        slow = transition_reference(env, env.state, a)
        for k, v in vars(fast[0]).items():
            assert torch.equal(v, getattr(slow[0], k)), f"{layout} step {t}: state field {k}"
        for name, x, y in zip(("reward", "shaped_reward", "done"), fast[1:], slow[1:]):
            assert torch.equal(x, y), f"{layout} step {t}: {name}"
        events += int((fast[1] != 0).sum() + (fast[2] != 0).sum())
        env.state = fast[0]
        env.reset_games(fast[3])
        assert torch.equal(env.observe(env.state), observe_reference(env, env.state)), (
            f"{layout} step {t}: obs"
        )
    assert events > 0  # rewards (button presses, shaped placements) happened, so those paths were compared


def test_observation_dtypes_agree() -> None:
    obs = {
        dt: OvercookedV2Env(batch_size=8, seed=5, obs_dtype=dt).reset().obs
        for dt in (torch.uint8, torch.float32)
    }
    assert obs[torch.uint8].dtype == torch.uint8 and torch.equal(obs[torch.uint8].float(), obs[torch.float32])
