"""Dec-POMDP symmetries of Hanabi: colour permutations as index permutations of observations and move ids.

Relabelling colours by ``perm`` (colour c becomes ``perm[c]``) maps a game onto an equally valid game: the
permuted deal, the same moves with colours renamed. Because every colour appears as a contiguous block in each
section of HLE's canonical vector, the observation of the permuted game is a fixed re-indexing of the
original:

    obs_permuted = obs[..., obs_index]        legal_permuted = legal[..., move_index]
    move m of the original game is move move_map[m] of the permuted game (move_map = inverse of move_index)

These are what other-play needs (``phi_O`` = gather by ``obs_index``, ``phi_A`` = ``move_map``); each
colour permutation is an ``IndexSymmetry`` (``action_index`` = move_index, ``action_map`` = move_map,
``label_perm`` = the colour permutation). Every index map is derived in one place, by relabelling: every
observation position, move id and card id gets a semantic label (``observation_labels``, ``move_labels``,
``card_labels``; the observation labels re-derive HLE's layout and are checked against
``HanabiConfig.layout``), and ``_relabel`` renames the colours in a label.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from ers_deep.envs.hanabi.config import HanabiConfig
from ers_deep.envs.symmetry import IndexSymmetry, relabel_index

Label = tuple[Any, ...]
Deck = TypeVar("Deck", np.ndarray, torch.Tensor)

# the section of the canonical vector (``ObsLayout.sections``) each kind of observation label belongs to
_SECTION = {
    "hand": "hands",
    "missing": "hands",
    "deck": "board",
    "firework": "board",
    "info": "board",
    "life": "board",
    "discard": "discards",
    "plausible": "knowledge",
    "colour_hinted": "knowledge",
    "rank_hinted": "knowledge",
}


def card_labels(cfg: HanabiConfig) -> list[Label]:
    """(colour, rank) of every card id, in card-id order (HLE's colour-major ``CardIndex``)."""
    return [(c, r) for c in range(cfg.colors) for r in range(cfg.ranks)]


def move_labels(cfg: HanabiConfig) -> list[Label]:
    """("move", type, slot, target offset, colour, rank) of every move id (``HanabiConfig.move_table``)."""
    return [("move", *(int(x) for x in row)) for row in cfg.move_table()]


def observation_labels(cfg: HanabiConfig) -> list[Label]:
    """One semantic label per position of the canonical vector, in HLE's order (cards as (colour, rank))."""
    P, H, C, R = cfg.players, cfg.hand, cfg.colors, cfg.ranks
    cards = card_labels(cfg)
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
    for section, (start, stop) in cfg.layout.sections().items():
        for label in out[start:stop]:
            if _SECTION.get(label[0], "last_action") != section:  # pragma: no cover - guards the layout
                raise AssertionError(f"label {label} lies in section {section} of {cfg.layout}")
    return out


def _relabel(label: Label, perm: Sequence[int]) -> Label:
    """The label of the same feature after colours are renamed by ``perm``."""
    kind = label[0]
    if kind == "move":  # ("move", type, slot, offset, colour or -1, rank)
        return (*label[:4], perm[label[4]] if label[4] >= 0 else -1, *label[5:])
    if isinstance(kind, int):  # a card (colour, rank)
        return (perm[kind], label[1])

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


def colour_permutation(cfg: HanabiConfig, perm: Sequence[int]) -> IndexSymmetry:
    """The colour relabelling ``perm`` (colour c becomes ``perm[c]``, a permutation of range(colors)) as index
    maps: ``obs_index`` [O], ``action_index`` [M] (= move_index), ``action_map`` [M] (= move_map)."""
    perm = tuple(int(c) for c in perm)
    if sorted(perm) != list(range(cfg.colors)):
        raise ValueError(f"{perm} is not a permutation of the {cfg.colors} colours")
    relabel = functools.partial(_relabel, perm=perm)
    obs_index = relabel_index(observation_labels(cfg), relabel)
    move_index = relabel_index(move_labels(cfg), relabel)
    return IndexSymmetry(
        torch.as_tensor(obs_index), torch.as_tensor(move_index), f"colours{perm}", (cfg.obs_size,), perm
    )


def colour_permutations(cfg: HanabiConfig) -> list[IndexSymmetry]:
    """All colors! colour relabellings (identity first): the Dec-POMDP symmetry group used by other-play."""
    return [colour_permutation(cfg, p) for p in itertools.permutations(range(cfg.colors))]


def card_map(cfg: HanabiConfig, sym: IndexSymmetry) -> np.ndarray:
    """[K] int64: original card id -> card id in the game permuted by the colour permutation ``sym``."""
    return np.argsort(relabel_index(card_labels(cfg), functools.partial(_relabel, perm=sym.label_perm)))


def permute_deck(cfg: HanabiConfig, sym: IndexSymmetry, deck: Deck) -> Deck:
    """The permuted deal: every card id of ``deck`` ([..., D] array or tensor) mapped through ``card_map``."""
    cards = card_map(cfg, sym)
    if isinstance(deck, torch.Tensor):
        return torch.as_tensor(cards, device=deck.device)[deck]
    return cards[np.asarray(deck)]


def colour_permutation_tensors(
    cfg: HanabiConfig, device: str | torch.device = "cpu"
) -> dict[str, torch.Tensor]:
    """Stacked maps of every colour permutation: ``obs_index`` [G, O], ``move_index`` [G, M], ``move_map``
    [G, M], ``card_map`` [G, K] (G = colors!; index 0 is the identity), ready for batched gathers."""
    perms = colour_permutations(cfg)
    maps = {
        "obs_index": [p.obs_index for p in perms],
        "move_index": [p.action_index for p in perms],
        "move_map": [p.action_map for p in perms],
        "card_map": [torch.as_tensor(card_map(cfg, p)) for p in perms],
    }
    return {name: torch.stack(rows).to(device) for name, rows in maps.items()}
