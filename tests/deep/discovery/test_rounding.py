"""A learned phi's rounding against the env's known Dec-POMDP symmetries (``rounding.match_known``): hand-built
phi equal to a Hanabi colour permutation, the identity, Overcooked V2's vertical flip, and maps that are no
symmetry, each rounded on observations of real states (``nearest_permutation``) as ``discover`` rounds them."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from ers_deep.crossplay import env_symmetries
from ers_deep.discovery import LearnedSymmetry
from ers_deep.discovery.rounding import match_known, nearest_permutation
from ers_deep.envs.base import BatchedEnv
from ers_deep.envs.hanabi import HanabiEnv
from ers_deep.envs.symmetry import IndexSymmetry
from ers_deep.nets.phi import ObsMap
from ers_deep.train.config import make_env, paper_config
from ers_exact.interface import SymmetryMatch
from tests.deep.discovery.test_net import SMALL, _permutation_map


def _observations(env: BatchedEnv, steps: int = 40, seed: int = 3) -> Tensor:
    """[n, *O] observations of every seat over ``steps`` steps of uniformly random legal play."""
    gen = torch.Generator().manual_seed(seed)
    seen = []
    for _ in range(steps):
        obs, legal = env.observe(), env.legal_mask()
        seen.append(obs.reshape(-1, *env.obs_shape))
        legal = legal | ~legal.any(-1, keepdim=True)  # a player not to move: any move (ignored by the env)
        probs = legal.reshape(-1, legal.shape[-1]).float()
        env.step(torch.multinomial(probs, 1, generator=gen).view(legal.shape[:2]))
    return torch.cat(seen)


@pytest.fixture(scope="module")
def hanabi() -> dict[str, tuple[Tensor, tuple[IndexSymmetry, ...]]]:
    """Observations of real states and the known group (``env_symmetries``, as ``discover`` takes it)."""
    out = {}
    for preset in (SMALL, "Hanabi-Full"):
        cfg = paper_config("hanabi", hanabi_preset=preset)
        out[preset] = _observations(make_env(cfg, 32, seed=3)), env_symmetries(cfg)
    return out


@pytest.fixture(scope="module")
def overcooked() -> tuple[Tensor, tuple[IndexSymmetry, ...]]:
    cfg = paper_config("overcooked-v2")  # grounded_coord_simple, the paper's 38 channels
    return _observations(make_env(cfg, 16, seed=3), steps=30), env_symmetries(cfg)


def _rounded(
    obs: Tensor, sym: IndexSymmetry, actions: Tensor, group: tuple[IndexSymmetry, ...]
) -> SymmetryMatch:
    """A hand-built phi with phi_O = the gather by ``sym.obs_index`` and phi_A = ``actions``, rounded on ``obs``
    and matched as ``discover`` does."""
    learned = LearnedSymmetry(_permutation_map(sym), actions, "hand-built", sym.obs_shape)
    perm, dist = nearest_permutation(learned, obs)
    assert dist == pytest.approx(0.0, abs=1e-12)
    match = match_known(perm, learned.action_map, obs, group)
    assert match is not None
    return match


@pytest.mark.parametrize(
    ("preset", "colours"),
    [
        pytest.param(SMALL, (1, 0), id="small-swap"),
        pytest.param("Hanabi-Full", (1, 2, 0, 3, 4), id="full-3-cycle"),  # not its own inverse
        pytest.param("Hanabi-Full", (4, 3, 2, 0, 1), id="full-5-perm"),
    ],
)
def test_a_hand_built_colour_permutation_is_reported_as_that_permutation(hanabi, preset, colours) -> None:
    obs, group = hanabi[preset]
    index = next(i for i, g in enumerate(group) if g.label_perm == colours)
    sym = group[index]
    match = _rounded(obs, sym, sym.action_map.clone(), group)
    assert (match.match, match.index, match.agreement, match.same_actions) == (
        f"colours{colours}",
        index,
        1.0,
        True,
    )
    varying = obs.reshape(obs.shape[0], -1)
    assert 0 < match.varying == int((varying != varying[:1]).any(0).sum()) < varying.shape[1]


@pytest.mark.parametrize("preset", [SMALL, "Hanabi-Full"])
def test_the_identity_is_the_identity_element(hanabi, preset: str) -> None:
    obs, group = hanabi[preset]
    size = obs.shape[-1]
    learned = LearnedSymmetry(ObsMap(1, size), torch.arange(group[0].action_map.numel()), "identity", (size,))
    perm, dist = nearest_permutation(learned, obs)
    match = match_known(perm, learned.action_map, obs, group)
    assert dist == 0.0 and match is not None
    assert (match.match, match.index, match.agreement) == ("identity", 0, 1.0)


def _block_swap(n: int, a: int, b: int, width: int, shape: tuple[int, ...]) -> IndexSymmetry:
    """The observation map that swaps features [a, a + width) with [b, b + width), as an IndexSymmetry."""
    index = torch.arange(n)
    index[a : a + width], index[b : b + width] = torch.arange(b, b + width), torch.arange(a, a + width)
    return IndexSymmetry(index, torch.arange(1), "block-swap", shape)


def test_a_swap_of_unrelated_feature_blocks_matches_nothing(hanabi) -> None:
    """The partner's first card (a colour-major one-hot) swapped with the board's card counts and tokens: no
    colour permutation moves either, so the nearest is the identity, agreeing off the two blocks only."""
    obs, group = hanabi[SMALL]
    layout = HanabiEnv(SMALL, batch_size=1).config.layout.sections()
    hand, board = layout["hands"][0], layout["board"][0]
    card = 10  # 2 colours x 5 ranks
    swap = _block_swap(obs.shape[-1], hand, board, card, tuple(obs.shape[1:]))
    match = _rounded(obs, swap, group[0].action_map.clone(), group)
    assert match.match is None and match.index == 0 and match.same_actions
    assert 1 - 2 * card / match.varying <= match.agreement < 1.0  # off the two blocks, all agree


def test_the_colour_swap_of_observations_with_other_actions_is_no_match(hanabi) -> None:
    """phi_O the colour swap, phi_A the identity: agreement 1 on the observations, but not the symmetry."""
    obs, group = hanabi[SMALL]
    match = _rounded(obs, group[1], group[0].action_map.clone(), group)
    assert (match.match, match.index, match.agreement, match.same_actions) == (None, 1, 1.0, False)


def test_agreement_reads_sampled_columns_and_counts_varying_features_only() -> None:
    """Features 0 and 1 never vary (both 0), 3 and 4 vary alike (equal columns): the rounding cannot tell either
    pair apart, so swapping within them keeps the match; features 2-4 vary, so a wrong feature costs 1 of 3;
    the nearest is the highest agreement even with other actions; no varying feature: NaN, no match."""
    obs = torch.tensor([[0, 0, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]])
    ident = IndexSymmetry(torch.arange(5), torch.arange(2), "ident", (5,))
    swap = IndexSymmetry(torch.tensor([0, 1, 3, 2, 4]), torch.tensor([1, 0]), "swap", (5,))
    group = (ident, swap)
    same = match_known((1, 0, 2, 4, 3), torch.arange(2), obs, group)
    assert same is not None and (same.match, same.agreement, same.varying) == ("identity", 1.0, 3)
    off = match_known((2, 1, 0, 3, 4), torch.arange(2), obs, group)  # output 2 reads a constant feature
    assert off is not None and (off.match, off.index) == (None, 0) and off.agreement == pytest.approx(2 / 3)
    other = match_known((0, 1, 3, 2, 4), torch.arange(2), obs, group)  # swap's observations, ident's actions
    assert other is not None and (other.match, other.index, other.agreement, other.same_actions) == (
        None,
        1,
        1.0,
        False,
    )
    flat = match_known((1, 0, 2, 3, 4), torch.tensor([1, 0]), torch.zeros(2, 5), group)
    assert flat is not None and flat.match is None and math.isnan(flat.agreement) and flat.index == 1
    assert match_known((0, 1, 2, 3, 4), torch.arange(2), obs, ()) is None
    with pytest.raises(ValueError, match="4 features"):
        match_known((0, 1, 2, 3), torch.arange(2), obs, group)


def test_overcooked_flip_and_identity_are_reported(overcooked) -> None:
    obs, group = overcooked
    assert len(group) == 2 and group[0].is_identity()
    flip = group[1]
    match = _rounded(obs, flip, flip.action_map.clone(), group)
    assert (match.match, match.index, match.agreement) == ("vertical-flip(1, 0, 2)", 1, 1.0)
    ident = _rounded(obs, group[0], torch.arange(flip.action_map.numel()), group)
    assert (ident.match, ident.index, ident.agreement) == ("identity", 0, 1.0)
    # discover's Overcooked phi_A is the identity (the official code's frozen map): the flip's observation map
    # with it is no Dec-POMDP symmetry
    frozen = _rounded(obs, flip, torch.arange(flip.action_map.numel()), group)
    assert (frozen.match, frozen.index, frozen.agreement, frozen.same_actions) == (None, 1, 1.0, False)
