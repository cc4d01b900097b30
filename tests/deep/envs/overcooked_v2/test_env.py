"""ers's batched Overcooked V2 (torch) against JaxMARL's overcooked_v2 and hand-checked scripts.

The differential tests run JaxMARL (the ``reference`` extra of ers-deep, installed by ``make test``) in a child
interpreter through ``overcooked_reference.py`` (beside this file): this one, or ``ERS_JAXMARL_PYTHON`` when
set. They skip when neither can import jaxmarl.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ers_deep.envs.overcooked_v2 import OvercookedState, OvercookedV2Env

JAX_PY = os.environ.get("ERS_JAXMARL_PYTHON", sys.executable)
REF = Path(__file__).with_name("overcooked_reference.py")


def _have_jaxmarl() -> bool:
    if not Path(JAX_PY).exists():
        return False
    return subprocess.run([JAX_PY, "-c", "import jaxmarl"], capture_output=True, check=False).returncode == 0


needs_jaxmarl = pytest.mark.skipif(
    not _have_jaxmarl(),
    reason=f"jaxmarl not importable by {JAX_PY} "
    "(set ERS_JAXMARL_PYTHON to an interpreter with jaxmarl==0.2.0)",
)


def _state(d: dict, prefix: str, t: int | None = None) -> OvercookedState:
    g = (lambda k: d[f"{prefix}_{k}"]) if t is None else (lambda k: d[f"{prefix}_{k}"][t])
    B = g("pos").shape[0]
    T = lambda x: torch.as_tensor(np.asarray(x)).long()  # noqa: E731
    return OvercookedState(
        pos=T(g("pos")),
        dir=T(g("dir")),
        inv=T(g("inv")),
        items=T(g("items")).reshape(B, -1),
        extra=T(g("extra")).reshape(B, -1),
        recipe=T(g("recipe")),
        step=T(g("step")),
        new_correct_delivery=torch.as_tensor(np.asarray(g("ncd"))).bool(),
    )


def _where(mask: torch.Tensor, a: OvercookedState, b: OvercookedState) -> OvercookedState:
    out = {}
    for k, v in vars(a).items():
        w = getattr(b, k)
        out[k] = torch.where(mask.view(-1, *([1] * (v.ndim - 1))), v, w)
    return OvercookedState(**out)


def run_differential(
    tmp: Path, layout: str, envs: int, steps: int, seed: int, random_reset: bool = False, view: int | None = 2
) -> dict:
    """Roll JaxMARL out, replay the same actions in the torch env from the same start; assert equality of every
    state field, observation, reward, shaped reward and done at every step. The only JaxMARL randomness inside
    a step (the recipe drawn after a correct delivery) and the reset states are copied from JaxMARL."""
    out = tmp / f"{layout}-{seed}.npz"
    cmd = [
        JAX_PY,
        str(REF),
        str(out),
        "--layout",
        layout,
        "--envs",
        str(envs),
        "--steps",
        str(steps),
        "--seed",
        str(seed),
        "--view",
        str(view or 0),
    ] + (["--random-reset"] if random_reset else [])
    subprocess.run(cmd, check=True, capture_output=True)
    d = dict(np.load(out))
    env = OvercookedV2Env(
        layout, batch_size=envs, seed=seed, auto_reset=False, obs_dtype=torch.long, agent_view_size=view
    )
    s = _state(d, "s0")
    np.testing.assert_array_equal(env.observe(s).numpy(), d["obs0"])
    stats = {"steps": 0, "deliveries": 0, "presses": 0, "shaped": 0}
    for t in range(steps):
        ns, rew, shaped, done = env.transition(s, torch.as_tensor(d["actions"][t]))
        ref = _state(d, "st", t)
        ncd = ref.new_correct_delivery
        for k in ("pos", "dir", "inv", "items", "extra", "step", "new_correct_delivery"):
            a, b = getattr(ns, k), getattr(ref, k)
            assert torch.equal(a, b), (
                f"{layout} step {t} field {k}: rows {(a != b).reshape(envs, -1).any(1).nonzero()}"
            )
        assert torch.equal(ns.recipe[~ncd], ref.recipe[~ncd]), f"{layout} step {t} recipe"
        ns.recipe = (
            ref.recipe.clone()
        )  # the recipe resampled after a correct delivery comes from JaxMARL's key
        np.testing.assert_allclose(rew.numpy(), d["reward"][t], err_msg=f"step {t} reward")
        np.testing.assert_allclose(shaped.numpy(), d["shaped"][t], err_msg=f"step {t} shaped")
        np.testing.assert_array_equal(done.numpy(), d["done"][t], err_msg=f"step {t} done")
        np.testing.assert_array_equal(env.observe(ns).numpy(), d["obs_st"][t], err_msg=f"step {t} obs")
        s = _where(done, _state(d, "nx", t), ns)
        np.testing.assert_array_equal(
            env.observe(s).numpy(), d["obs_nx"][t], err_msg=f"step {t} obs after reset"
        )
        stats["steps"] += envs
        stats["deliveries"] += int((d["reward"][t] == 20).sum() + (d["reward"][t] == -20).sum())
        stats["presses"] += int((d["reward"][t] == -5).sum())
        stats["shaped"] += int((d["shaped"][t] != 0).sum())
    return stats


# 200 episodes (x 400 steps) in all; the default run keeps the fastest case (20-40 s each on a 2-core CPU),
# the others run with `make test-slow`
_SLOW = pytest.mark.slow
DEFAULT = [
    pytest.param("grounded_coord_simple", 110, False, 2, marks=_SLOW),
    pytest.param("grounded_coord_simple", 40, True, 2, marks=_SLOW),
    pytest.param("grounded_coord_ring", 20, True, 2, marks=_SLOW),
    ("test_time_simple", 20, False, 2),
    pytest.param("grounded_coord_simple", 10, True, None, marks=_SLOW),
]


@needs_jaxmarl
@pytest.mark.parametrize("layout,envs,random_reset,view", DEFAULT)
def test_differential_vs_jaxmarl(
    tmp_path: Path, layout: str, envs: int, random_reset: bool, view: int | None
) -> None:
    stats = run_differential(
        tmp_path, layout, envs, 400, seed=envs + 7 * random_reset, random_reset=random_reset, view=view
    )
    print(layout, random_reset, stats)
    assert stats["shaped"] > 0


# >= 10,000 episodes in the slow run, in chunks of 250 (the JaxMARL dump of one chunk is ~200 MB unpacked)
SLOW = (
    [("grounded_coord_simple", False)] * 20
    + [("grounded_coord_simple", True)] * 12
    + [("grounded_coord_ring", True)] * 4
    + [("test_time_simple", True)] * 4
)


@pytest.mark.slow
@needs_jaxmarl
@pytest.mark.parametrize("chunk", range(len(SLOW)))
def test_differential_vs_jaxmarl_slow(tmp_path: Path, chunk: int) -> None:
    layout, random_reset = SLOW[chunk]
    stats = run_differential(tmp_path, layout, 250, 400, seed=1000 + chunk, random_reset=random_reset)
    print(layout, random_reset, stats, file=sys.stderr)


# ---- hand-checked behaviour -----------------------------------------------------------------------------------
R, D, LEFT, U, S, I = range(6)


def test_scripted_grounded_coord_simple() -> None:
    """Button press (-5), three useful onions (+3 each), plate (+3), dish (+5), correct delivery (+20)."""
    env = OvercookedV2Env(batch_size=1, random_agent_positions=False, auto_reset=False)
    env.reset()
    env.state.recipe[:] = 12  # [0, 0, 0]
    cook = [R, U, R, I, LEFT, D, LEFT, I] + [R, U, R, I, LEFT, D, LEFT, I] * 2 + [U, LEFT, I, D, LEFT]
    left = [R, I]
    total, shaped, t = 0.0, torch.zeros(2), 0
    while True:
        a1 = cook[t] if t < len(cook) else I
        a0 = left[t] if t < len(left) else S
        out = env.step(torch.tensor([[a0, a1]]))
        total += float(out.reward[0])
        shaped += out.shaped_reward[0]
        t += 1
        if int(env.state.inv[0, 1]) == (12 | 3):  # dish in hand
            break
        assert t < 100
    for a1 in (R, R, I):
        out = env.step(torch.tensor([[S, a1]]))
        total += float(out.reward[0])
        shaped += out.shaped_reward[0]
        t += 1
    assert total == 15.0 and shaped.tolist() == [0.0, 17.0]
    assert bool(env.state.new_correct_delivery[0]) and int(env.state.inv[0, 1]) == 0
    assert t > 40  # cooking alone takes 20 steps after the third onion


def test_collisions_and_swaps() -> None:
    env = OvercookedV2Env("cramped_room_v2", batch_size=2, random_agent_positions=False, auto_reset=False)
    env.reset()
    # game 0: agents (1,1) and (3,1) both step into (2,1) -> both stay; game 1: agents adjacent swap -> both stay
    env.state.pos[1] = torch.tensor([[1, 1], [2, 1]])
    s, *_ = env.transition(env.state, torch.tensor([[R, LEFT], [R, LEFT]]))
    assert s.pos.tolist() == [[[1, 1], [3, 1]], [[1, 1], [2, 1]]]
    assert s.dir.tolist() == [[2, 3], [2, 3]]
    # following: agent 0 moves into the cell agent 1 leaves -> allowed
    s2, *_ = env.transition(s, torch.tensor([[R, D], [R, D]]))
    assert s2.pos[1].tolist() == [[2, 1], [2, 2]]


@pytest.mark.parametrize("paper,channels", [(True, 38), (False, 40)])
def test_observation_shape_and_seed(paper: bool, channels: int) -> None:
    a = OvercookedV2Env(batch_size=16, seed=3, paper_obs=paper)
    b = OvercookedV2Env(batch_size=16, seed=3, paper_obs=paper)
    oa, ob = a.reset(), b.reset()
    assert oa.obs.shape == (16, 2, 5, 5, channels) and torch.equal(oa.obs, ob.obs)
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        act = torch.randint(6, (16, 2), generator=g)
        oa, ob = a.step(act), b.step(act)
        assert torch.equal(oa.obs, ob.obs) and torch.equal(oa.reward, ob.reward)
    full = OvercookedV2Env(batch_size=4, seed=3, agent_view_size=None).reset().obs
    assert full.shape == (4, 2, 5, 8, 40)


def test_view_size_zero_is_the_full_grid() -> None:
    """JaxMARL reads ``agent_view_size=0`` as the full grid (its observation is then [H, W, C]); negative sizes
    are refused (JaxMARL fails inside its crop)."""
    ref = OvercookedV2Env(batch_size=8, seed=3, agent_view_size=None)
    env = OvercookedV2Env(batch_size=8, seed=3, agent_view_size=0)
    assert env.obs_shape == ref.obs_shape == (5, 8, 40)
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        act = torch.randint(6, (8, 2), generator=g)
        assert torch.equal(env.step(act).obs, ref.step(act).obs)
    with pytest.raises(ValueError, match="agent_view_size"):
        OvercookedV2Env(agent_view_size=-1)


@pytest.mark.parametrize("branch_free", [False, True])
def test_random_positions_in_own_rooms_and_auto_reset(branch_free: bool) -> None:
    env = OvercookedV2Env(batch_size=256, seed=1, max_steps=10, branch_free=branch_free)
    s = env.state
    assert (s.pos[:, 0, 0] <= 2).all() and (s.pos[:, 1, 0] >= 5).all()
    assert len({tuple(p) for p in s.pos[:, 0].tolist()}) == 6  # all 6 cells of the left room are used
    for _ in range(10):
        out = env.step(torch.zeros(256, 2, dtype=torch.long))
    assert out.done.all() and (env.state.step == 0).all()
    s = env.state  # the restarted games are fresh episodes in the agents' own rooms
    assert (s.pos[:, 0, 0] <= 2).all() and (s.pos[:, 1, 0] >= 5).all()
    assert (s.inv == 0).all() and (s.items == 0).all() and not s.new_correct_delivery.any()


@pytest.mark.parametrize("branch_free", [False, True])
def test_bad_actions_are_refused(branch_free: bool) -> None:
    """Actions outside 0..5 and a wrong shape raise a ValueError naming them (a negative action indexed the
    action tables from the end: -1 stayed, -3 moved up; 6 raised an IndexError; [B] actions an IndexError)."""
    env = OvercookedV2Env(batch_size=3, seed=0, branch_free=branch_free)
    before = env.state.clone()
    for bad in (-1, -3, 6):
        actions = torch.full((3, 2), 4)
        actions[1, 0] = bad
        with pytest.raises(ValueError, match=f"action {bad} of agent 0 in game 1"):
            env.step(actions)
        with pytest.raises(ValueError, match=f"action {bad} of agent 0 in game 1"):
            env.transition(env.state, actions)
    with pytest.raises(ValueError, match=r"shape \[B, A\] = \[3, 2\]"):
        env.step(torch.zeros(3, dtype=torch.long))
    assert all(torch.equal(getattr(env.state, k), v) for k, v in vars(before).items())
    env.step(torch.full((3, 2), 5))  # valid actions still step


@pytest.mark.parametrize("sample_recipe", [False, True])
def test_next_state_shares_no_tensor_with_the_input(sample_recipe: bool) -> None:
    """``transition`` leaves its input unchanged, also after the next state is reset in place (the next state
    held the input's recipe tensor without ``sample_recipe_on_delivery``: restarting a game then rewrote the
    recipe of the state held from before the step)."""
    env = OvercookedV2Env(
        batch_size=64, seed=0, max_steps=3, sample_recipe_on_delivery=sample_recipe, branch_free=False
    )
    s = env.state
    tr = env.transition(s, torch.zeros(64, 2, dtype=torch.long))
    assert all(
        a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
        for a, b in zip(vars(s).values(), vars(tr.state).values())
    )
    prev = env.state
    held = prev.clone()
    for _ in range(3):
        env.step(torch.full((64, 2), 4))  # the third step ends every game: reset_games restarts them in place
    assert len(set(env.state.recipe.tolist())) == 2  # the new episodes drew both recipes
    assert all(torch.equal(getattr(prev, k), v) for k, v in vars(held).items())


@pytest.mark.parametrize(
    "text, where",
    [
        ("\nWWWWWWW\n A0BPXR\nWWWWWWW\n", "row 1, column 0"),  # left column, beside the agent
        ("\nW WWWWWW\nW A0BPXR\nWWWWWWWW\n", "row 0, column 1"),  # top row, two cells away
    ],
)
def test_a_free_cell_on_the_top_or_left_edge_is_refused(text: str, where: str) -> None:
    """JaxMARL reads an agent's facing cell at index -1 there (the far side of the map), ers clips to the map: a
    layout where the two would differ is refused, naming the cell."""
    from ers_deep.envs.overcooked_v2.layouts import parse_layout

    with pytest.raises(ValueError, match=where):
        parse_layout(text)


def test_free_cells_on_the_bottom_and_right_edges_and_the_shipped_layouts_are_accepted() -> None:
    from ers_deep.envs.overcooked_v2.layouts import LAYOUT_STRINGS, get_layout, parse_layout

    lay = parse_layout("\nWWWWWWW\nWA  0BPXR \nWW WWWWWWW\n")  # free cells at the right and bottom edges
    assert lay.static.shape == (3, 10)  # and one padded free cell in the top row no agent can reach
    assert parse_layout("\n W\nWW\nWA0BPXR\nWWWWWWW\n").static[0, 0] == 0  # a free corner no agent reaches
    for name in LAYOUT_STRINGS:
        assert get_layout(name).name == name


@needs_jaxmarl
def test_swap_agents_orders_the_agents_as_jaxmarls_layouts() -> None:
    """JaxMARL declares ``cramped_room`` and ``counter_circuit`` with ``swap_agents=True`` (agents in reverse
    reading order); ``parse_layout(..., swap_agents=True)`` of the same strings starts the agents where JaxMARL's
    layouts do, and without it in reading order (JaxMARL's ``from_string`` default)."""
    import json

    from ers_deep.envs.overcooked_v2.layouts import parse_layout

    script = (
        "import json, jaxmarl.environments.overcooked_v2.layouts as m\n"
        "out = {n: [getattr(m, n), [[int(x), int(y)] for x, y in m.overcooked_v2_layouts[n].agent_positions]]"
        " for n in ('cramped_room', 'counter_circuit')}\n"
        "print(json.dumps(out))"
    )
    run = subprocess.run([JAX_PY, "-c", script], capture_output=True, text=True, check=True)
    for name, (text, positions) in json.loads(run.stdout.strip().splitlines()[-1]).items():
        swapped = parse_layout(text, recipes=[[0, 0, 0]], swap_agents=True)
        assert [list(p) for p in swapped.agent_positions] == positions, name
        plain = parse_layout(text, recipes=[[0, 0, 0]])
        assert [list(p) for p in plain.agent_positions] == positions[::-1], name


def test_max_steps_below_one_is_refused() -> None:
    """An episode of fewer than one step would also make ``min_episode_steps`` (the learner's bound on a
    rollout's resets) wrong."""
    for bad in (0, -5):
        with pytest.raises(ValueError, match="max_steps must be >= 1"):
            OvercookedV2Env(max_steps=bad)
    assert OvercookedV2Env(max_steps=1).min_episode_steps == 1
