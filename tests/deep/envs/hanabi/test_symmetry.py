"""Colour permutations: permuting a deal's colours permutes observations and legal moves exactly as the exposed
index maps say, checked against HLE and on the batched env."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ers_deep.envs import HanabiConfig, HanabiEnv
from ers_deep.envs.hanabi.hle import HLEGame
from ers_deep.envs.hanabi.symmetry import (
    colour_permutation,
    colour_permutation_tensors,
    colour_permutations,
    permute_deck,
)

CONFIGS = [
    HanabiConfig(),
    HanabiConfig(players=3),
    HanabiConfig.preset("small", players=4),
    HanabiConfig.preset("minimal"),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["full-2p", "full-3p", "small-4p", "minimal-2p"])
def test_permuted_deal_in_hle_gives_permuted_observations(cfg: HanabiConfig) -> None:
    rng = np.random.default_rng(0)
    perms = colour_permutations(cfg)
    base, other = HLEGame(cfg), HLEGame(cfg)
    for _ in range(12):
        sym = perms[rng.integers(1, len(perms))]
        deck = rng.permutation(cfg.full_deck())
        base.new_game(deck)
        other.new_game(permute_deck(cfg, sym, deck))
        while True:
            assert np.array_equal(other.observations(), base.observations()[..., sym.obs_index.numpy()])
            assert np.array_equal(other.legal_mask(), base.legal_mask()[..., sym.action_index.numpy()])
            if base.done:
                break
            move = int(rng.choice(base.legal_moves()))
            assert base.step(move) == other.step(int(sym.action_map[move]))
    base.close()
    other.close()


def test_permuted_batch_in_ers() -> None:
    cfg, B = HanabiConfig(), 32
    maps = colour_permutation_tensors(cfg)
    g = torch.randint(1, 120, (B,), generator=torch.Generator().manual_seed(0))
    a = HanabiEnv(cfg, batch_size=B, seed=1, auto_reset=False)
    b = HanabiEnv(cfg, batch_size=B, seed=2, auto_reset=False)
    out_a = a.reset()
    decks = maps["card_map"][g[:, None], a.state.deck]  # [B, D] every game with its own colour permutation
    out_b = b.reset(decks=decks)
    gen = torch.Generator().manual_seed(3)
    for _ in range(8):
        assert torch.equal(
            out_b.obs, out_a.obs.gather(2, maps["obs_index"][g][:, None, :].expand_as(out_a.obs))
        )
        assert torch.equal(
            out_b.legal, out_a.legal.gather(2, maps["move_index"][g][:, None, :].expand_as(out_a.legal))
        )
        if out_a.done.any():
            break
        moves = (torch.rand(B, cfg.num_moves, generator=gen) * a.current_legal).argmax(1)
        out_a, out_b = a.step(moves), b.step(maps["move_map"][g, moves])
        assert torch.equal(out_a.reward, out_b.reward)


def test_group_structure() -> None:
    cfg = HanabiConfig()
    perms = colour_permutations(cfg)
    assert len(perms) == 120 and perms[0].label_perm == (0, 1, 2, 3, 4)
    assert np.array_equal(perms[0].obs_index.numpy(), np.arange(658))
    assert np.array_equal(perms[0].action_map.numpy(), np.arange(20))
    p, q = colour_permutation(cfg, (1, 2, 0, 4, 3)), colour_permutation(cfg, (4, 0, 3, 2, 1))
    pq = colour_permutation(cfg, tuple(q.label_perm[c] for c in p.label_perm))  # first p, then q
    assert np.array_equal(pq.obs_index.numpy(), p.obs_index[q.obs_index].numpy())
    assert np.array_equal(pq.action_map.numpy(), q.action_map[p.action_map].numpy())
    assert sorted(p.obs_index.tolist()) == list(range(658))
    moved = np.flatnonzero(p.obs_index.numpy() != np.arange(658))
    assert moved.min() >= 0 and set(np.flatnonzero(p.action_map.numpy() != np.arange(20))) <= set(
        range(10, 15)
    )
    # the shared IndexSymmetry algebra agrees with building the composite directly
    composed = p.compose(q)
    assert torch.equal(composed.obs_index, pq.obs_index) and torch.equal(composed.action_map, pq.action_map)
    assert composed.label_perm == pq.label_perm and p.compose(p.inverse()).is_identity()
    with pytest.raises(ValueError, match="not a permutation"):
        colour_permutation(cfg, (0, 0, 1, 2, 3))
