"""The vertical-flip symmetry of Overcooked V2 layouts: observation and transition commute with it."""

from __future__ import annotations

import pytest
import torch

from ers_deep.envs.overcooked_v2 import OvercookedV2Env


@pytest.mark.parametrize(
    "layout,paper,expected",
    [
        ("grounded_coord_simple", False, (1, 0, 2)),
        ("grounded_coord_simple", True, (1, 0, 2)),
        ("test_time_simple", False, (1, 0, 2)),
        ("cramped_room_v2", False, "none"),
    ],
)
def test_vertical_symmetry_commutes(layout: str, paper: bool, expected: object) -> None:
    """obs(phi(s)) = perm(obs(s)) and step(phi(s), phi(a)) = phi(step(s, a)) on states of random play."""
    from ers_deep.envs.overcooked_v2.symmetry import apply_to_state, find_vertical_symmetry

    env = OvercookedV2Env(
        layout, batch_size=64, seed=2, sample_recipe_on_delivery=False, paper_obs=paper, obs_dtype=torch.long
    )
    if expected == "none":
        assert find_vertical_symmetry(env) is None
        return
    sym = find_vertical_symmetry(env)
    assert sym is not None and sym.label_perm == expected
    g = torch.Generator().manual_seed(0)
    for _ in range(150):
        act = torch.where(torch.rand(64, 2, generator=g) < 0.3, 5, torch.randint(5, (64, 2), generator=g))
        s = env.state.clone()
        o = env.observe(s).reshape(64, 2, -1)
        ps = apply_to_state(env, sym, s)
        assert torch.equal(env.observe(ps).reshape(64, 2, -1), o[..., sym.obs_index])
        a, *ra = env.transition(s, act)
        b, *rb = env.transition(ps, sym.action_map[act])
        pa = apply_to_state(env, sym, a)
        for k in ("pos", "dir", "inv", "items", "extra", "recipe", "step"):
            assert torch.equal(getattr(pa, k), getattr(b, k)), k
        assert all(torch.equal(x, y) for x, y in zip(ra, rb))
        env.step(act)
