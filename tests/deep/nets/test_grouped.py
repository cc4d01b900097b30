"""``nets.grouped`` (each row through its own candidate of stacked ObsMaps, sorted into blocks, no host sync)
against the plain reference, each candidate's ObsMap on its selected rows; other-play with learned symmetries
grouped against its per-phi path; and the per-phi path on uint8 observations (Overcooked V2), where a learned
phi_O's real-valued output was cast back to uint8 before 2026-12-07."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.bench.other_play import near_identity_map, near_identity_symmetries
from ers_deep.discovery import LearnedSymmetry, compose
from ers_deep.nets import ActorCritic, NetConfig
from ers_deep.nets.grouped import grouped_obs_map, sort_into_blocks, stack_maps
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.nets.phi import ObsMap
from ers_deep.other_play import op_net
from ers_deep.train.config import TrainConfig, make_env, paper_config
from ers_deep.train.ippo import Learner
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, trained_params


def _reference(maps: list[ObsMap], x: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    with torch.no_grad():
        for k, m in enumerate(maps):
            sel = group == k
            out[sel] = m(x[sel][None])[0]
    return out


@settings(max_examples=60, deadline=None)
@given(
    group=st.lists(st.integers(0, 4), min_size=1, max_size=70),
    candidates=st.integers(1, 5),
    block=st.one_of(st.none(), st.integers(1, 9)),
)
def test_blocks_hold_each_row_once_and_only_its_candidate_s_rows(
    group: list[int], candidates: int, block: int | None
) -> None:
    g = torch.tensor(group) % candidates
    blocks = sort_into_blocks(g, candidates, block)
    b, M = blocks.block, g.numel()
    assert blocks.candidate.numel() == -(-M // b) + candidates  # static: the rows and K alone
    assert torch.unique(blocks.dest).numel() == M and int(blocks.dest.max()) < blocks.candidate.numel() * b
    assert torch.equal(blocks.candidate[blocks.dest // b], g)


@pytest.mark.parametrize("relu_output", [True, False])
@pytest.mark.parametrize("block", [None, 1, 5])
def test_grouped_maps_equal_each_map_on_its_rows(relu_output: bool, block: int | None) -> None:
    maps = [near_identity_map(12, k, relu_output, scale=0.5) for k in range(4)]
    x = torch.randn(101, 12, generator=torch.Generator().manual_seed(1))
    group = torch.tensor([3] * 40 + [0] * 3 + [1] * 58)[torch.randperm(101)]  # candidate 2 has no rows
    stacked = stack_maps(maps)
    assert stacked is not None
    got = grouped_obs_map(stacked, x, group, block)
    ref = _reference(maps, x, group)
    assert float((got - ref).abs().max()) < 1e-5 * float(ref.abs().max())
    assert not torch.allclose(ref, x, atol=1e-2)  # the maps move the rows


def test_maps_of_different_depth_or_output_are_not_stacked() -> None:
    assert stack_maps([ObsMap(1, 4), ObsMap(1, 4, layers=2)]) is None
    assert stack_maps([ObsMap(1, 4), ObsMap(1, 4, relu_output=False)]) is None


def _hanabi(**kw: object) -> TrainConfig:
    base = {
        "hanabi_preset": "Hanabi-Small",
        "num_envs": 16,
        "num_steps": 16,
        "minibatches": 2,
        "seeds": (0, 1),
    }
    return paper_config("hanabi", **{**base, "net": NetConfig(hidden=32), **kw})


def _overcooked() -> TrainConfig:
    return paper_config(
        "overcooked-v2", num_envs=8, seeds=(0,), net=NetConfig(kind="cnn-gru", hidden=16, conv=8)
    )


def _inputs(config: TrainConfig, net: ActorCritic, T: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """T steps of 16 games under random legal moves, [S, T, N, *O], and first-flags with new episodes (new
    draws) at t = 1 for a third of the actors."""
    env = make_env(config, 16, seed=2)
    g = torch.Generator().manual_seed(0)
    steps = [env.observe()]
    for _ in range(T - 1):
        weights = env.legal_mask().flatten(0, 1).float() + 1e-6  # a seat not to move has no legal move
        steps.append(env.step(torch.multinomial(weights, 1, generator=g).view(16, -1)).obs)
    S, N = net.num_seeds, 16 * env.num_agents
    o = torch.stack(steps).reshape(T, N, *env.obs_shape)[None].expand(S, T, N, *env.obs_shape)
    first = torch.zeros(S, T, N, dtype=torch.bool)
    first[:, 1, ::3] = True
    return o, first


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_grouped_other_play_equals_the_per_phi_path(env: str) -> None:
    """Identity + 3 learned symmetries: logits and values of the grouped net (traceable) against the per-phi
    selection (not traceable), on the same parameters; both against pi on phi_O(o) computed by hand."""
    config = _hanabi() if env == "hanabi" else _overcooked()
    phi = near_identity_symmetries(config, 3)
    plain = op_net(config, phi)
    grouped = OtherPlayNet(plain.base, phi, grouped=True)
    assert not plain.traceable and grouped.traceable and grouped.phi_layers == 3
    assert grouped.state_dict().keys() == plain.state_dict().keys()
    assert len(list(grouped.parameters())) == len(list(plain.parameters()))  # the maps are frozen buffers
    o, first = _inputs(config, plain)
    state = plain.initial_state(o.shape[2])
    with torch.no_grad():
        a, b = plain(o, first, state), grouped(o, first, state)
    assert float((a[0] - b[0]).abs().max()) < 1e-5 and float((a[1] - b[1]).abs().max()) < 1e-5
    code = plain.draws(state, first)
    assert {int(c) for c in code.unique()} == {0, 1, 2, 3}
    # by hand: entry (s, t, n) sees phi_{code}(o) and reads its logits at action_map
    flat = o.reshape(-1, *o.shape[3:]).float()
    mapped = torch.cat([phi[int(c)].apply_obs(flat[i : i + 1]) for i, c in enumerate(code.flatten())])
    with torch.no_grad():
        logits, value, _ = plain.base(mapped.view(o.shape), first, state._replace(actor=None, episode=None))
    idx = plain.action_maps[code]
    assert (
        float((logits.gather(-1, idx) - a[0]).abs().max()) < 1e-5 and float((value - a[1]).abs().max()) < 1e-5
    )


def test_learned_phi_on_uint8_observations_is_not_rounded() -> None:
    """Overcooked V2's observations are uint8: phi_O(o) = o / 2 must reach pi as o / 2 (before 2026-12-07 the
    per-phi path cast it back to uint8, flooring it)."""
    config = _overcooked()
    env = make_env(config, 4, seed=0)
    n = math.prod(env.obs_shape)
    half = ObsMap(1, n)
    with torch.no_grad():
        half.weights[0].mul_(0.5)
    sym = LearnedSymmetry(half, torch.arange(env.num_actions), "half", tuple(env.obs_shape))
    net = op_net(config, (sym,))
    obs = env.observe()
    assert obs.dtype == torch.uint8 and bool((obs % 2 == 1).any())
    o = obs.reshape(1, 1, -1, *env.obs_shape)
    first = torch.ones(1, 1, o.shape[2], dtype=torch.bool)
    with torch.no_grad():
        got = net(o, first, net.initial_state(o.shape[2]))
        want = net.base(o.float() / 2, first, net.base.initial_state(o.shape[2]))
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_composed_symmetries_take_the_per_phi_path() -> None:
    config = _hanabi()
    phi = near_identity_symmetries(config, 2)
    net = OtherPlayNet(op_net(config, phi).base, [compose([s]) for s in phi], grouped=True)
    assert net.phi_layers == 0 and not net.traceable


def test_the_compiled_grouped_op_update_equals_the_eager_one() -> None:
    """Other-play with learned symmetries, grouped: "auto" compiles its update from 8,192 samples as it does
    self-play's (and so does the per-phi path's, whose update reads phi_O(o) stored once per rollout), and the compiled update's parameters after 3 updates lie within
    1e-6 of the eager update's."""
    big = _hanabi(num_envs=512, minibatches=2)  # 16 x 1,024 / 2 samples
    phi = near_identity_symmetries(big, 3)
    grouped = OtherPlayNet(op_net(big, phi).base, phi, grouped=True)
    assert Learner(big, net=grouped).updater.mode == "compile"
    assert Learner(big, net=op_net(big, phi)).updater.mode == "compile"
    cfg = _hanabi(num_steps=24)

    def params(mode: str, updates: int) -> list[torch.Tensor]:
        net = OtherPlayNet(op_net(cfg, phi).base, phi, grouped=True)
        return trained_params(cfg.replace(update_mode=mode), updates, net=net)

    eager = params("eager", 3)
    assert max_difference(eager, params("compile", 3)) < 1e-6
    assert max_difference(eager, params("eager", 0)) > 1e-4
    per_phi = trained_params(cfg.replace(update_mode="eager"), 3, net=op_net(cfg, phi))
    assert max_difference(eager, per_phi) < 1e-5  # the same training as the per-phi path
