"""Dec-POMDP symmetries of Hanabi: colour permutations as index permutations of observations and move ids.

Relabelling colours by ``perm`` (colour c becomes ``perm[c]``) maps a game onto an equally valid game: the
permuted deal, the same moves with colours renamed. Because every colour appears as a contiguous block in each
section of HLE's canonical vector, the observation of the permuted game is a fixed re-indexing of the original:

    obs_permuted = obs[..., obs_index]        legal_permuted = legal[..., move_index]
    move m of the original game is move move_map[m] of the permuted game (move_map = inverse of move_index)

These are what other-play needs (``phi_O`` = gather by ``obs_index``, ``phi_A`` = ``move_map``). The index maps are
built from a labelled layout (every vector position gets a semantic label), which also re-derives the layout.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ers_deep.envs.hanabi_config import MOVE_REVEAL_COLOUR, HanabiConfig

Label = tuple[Any, ...]


def observation_labels(cfg: HanabiConfig) -> list[Label]:
    """One semantic label per position of the canonical vector, in HLE's order (cards as (colour, rank))."""
    P, H, C, R = cfg.players, cfg.hand, cfg.colors, cfg.ranks
    cards = [(c, r) for c in range(C) for r in range(R)]
    out: list[Label] = [("hand", k, h, card) for k in range(1, P) for h in range(H) for card in cards]
    out += [("missing", k) for k in range(P)]
    out += [("deck", i) for i in range(cfg.deck_size - P * H)]
    out += [("firework", c, r) for c in range(C) for r in range(R)]
    out += [("info", i) for i in range(cfg.max_information_tokens)]
    out += [("life", i) for i in range(cfg.max_life_tokens)]
    out += [("discard", (c, r), i) for c in range(C) for r in range(R) for i in range(int(cfg.copies[r]))]
    out += [("last_player", q) for q in range(P)] + [("last_type", t) for t in range(4)]
    out += [("last_target", q) for q in range(P)] + [("last_colour", c) for c in range(C)]
    out += [("last_rank", r) for r in range(R)] + [("last_outcome", h) for h in range(H)]
    out += [("last_position", h) for h in range(H)] + [("last_card", card) for card in cards]
    out += [("last_scored",), ("last_info",)]
    if cfg.observation_type != "minimal":
        for k in range(P):
            for h in range(H):
                out += [("plausible", k, h, card) for card in cards]
                out += [("colour_hinted", k, h, c) for c in range(C)]
                out += [("rank_hinted", k, h, r) for r in range(R)]
    if len(out) != cfg.obs_size:  # pragma: no cover - guards the layout
        raise AssertionError(f"labelled layout has {len(out)} entries, expected {cfg.obs_size}")
    return out


def _relabel(label: Label, perm: Sequence[int]) -> Label:
    """The label of the same feature after colours are renamed by ``perm``."""
    kind = label[0]

    def card(x: tuple[int, int]) -> tuple[int, int]:
        return (perm[x[0]], x[1])

    if kind in ("hand", "plausible"):
        return (kind, label[1], label[2], card(label[3]))
    if kind == "discard":
        return (kind, card(label[1]), label[2])
    if kind == "last_card":
        return (kind, card(label[1]))
    if kind == "firework":
        return (kind, perm[label[1]], label[2])
    if kind == "last_colour":
        return (kind, perm[label[1]])
    if kind == "colour_hinted":
        return (kind, label[1], label[2], perm[label[3]])
    return label


@dataclass(frozen=True)
class ColourPermutation:
    """One colour relabelling and its index maps (numpy int64)."""

    perm: tuple[int, ...]  # colour c -> perm[c]
    obs_index: np.ndarray  # [O] obs of the permuted game = obs[..., obs_index]
    move_index: np.ndarray  # [M] legal mask of the permuted game = legal[..., move_index]
    move_map: np.ndarray  # [M] original move id -> move id in the permuted game
    card_map: np.ndarray  # [K] original card id -> card id in the permuted game

    def permute_deck(self, deck: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """The permuted deal: every card id mapped through ``card_map`` (works on [..., D] arrays)."""
        if isinstance(deck, torch.Tensor):
            return torch.as_tensor(self.card_map, device=deck.device)[deck]
        return self.card_map[np.asarray(deck)]


def colour_permutation(cfg: HanabiConfig, perm: Sequence[int]) -> ColourPermutation:
    """Index maps of the colour relabelling ``perm`` (a permutation of range(colors))."""
    perm = tuple(int(c) for c in perm)
    if sorted(perm) != list(range(cfg.colors)):
        raise ValueError(f"{perm} is not a permutation of the {cfg.colors} colours")
    labels = observation_labels(cfg)
    position = {lab: i for i, lab in enumerate(labels)}
    forward = np.array([position[_relabel(lab, perm)] for lab in labels], dtype=np.int64)  # i -> new position
    obs_index = np.argsort(forward)
    moves = cfg.move_table()
    move_map = np.arange(cfg.num_moves, dtype=np.int64)
    hint0 = 2 * cfg.hand
    for m, (mtype, _, off, col, _) in enumerate(moves):
        if mtype == MOVE_REVEAL_COLOUR:
            move_map[m] = hint0 + (off - 1) * cfg.colors + perm[col]
    card_map = np.array([perm[k // cfg.ranks] * cfg.ranks + k % cfg.ranks for k in range(cfg.num_cards)])
    return ColourPermutation(perm, obs_index, np.argsort(move_map), move_map, card_map)


def colour_permutations(cfg: HanabiConfig) -> list[ColourPermutation]:
    """All colors! colour relabellings (identity first): the Dec-POMDP symmetry group used by other-play."""
    return [colour_permutation(cfg, p) for p in itertools.permutations(range(cfg.colors))]


def colour_permutation_tensors(cfg: HanabiConfig, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Stacked maps of every colour permutation: ``obs_index`` [G, O], ``move_index`` [G, M], ``move_map`` [G, M],
    ``card_map`` [G, K] (G = colors!; index 0 is the identity), ready for batched gathers."""
    perms = colour_permutations(cfg)
    return {name: torch.as_tensor(np.stack([getattr(p, name) for p in perms]), device=device)
            for name in ("obs_index", "move_index", "move_map", "card_map")}
