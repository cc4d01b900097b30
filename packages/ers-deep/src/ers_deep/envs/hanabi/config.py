"""Hanabi game configuration, HLE presets, move tables and the canonical observation layout.

Everything here is plain Python/numpy (no torch) and mirrors DeepMind's hanabi-learning-environment (HLE):

* cards are ids ``card = colour * ranks + rank`` (HLE's colour-major ``CardIndex``);
* move ids follow ``HanabiGame::ConstructMove``: ``[0, H)`` discard slot i, ``[H, 2H)`` play slot i, then
  reveal colour ``2H + (offset - 1) * C + colour``, then reveal rank ``2H + (P - 1) * C + (offset - 1) * R + rank``
  (offset = target seat relative to the mover, 1..P-1);
* the observation is HLE's ``CanonicalObservationEncoder`` vector: hands, board, discards, last action and
  (unless ``observation_type == "minimal"``) card knowledge, in that order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

import numpy as np

from ers_deep.envs.base import whole_number

ObservationType = Literal["card_knowledge", "minimal"]

COLOUR_CHARS = "RYGWB"
MOVE_DISCARD, MOVE_PLAY, MOVE_REVEAL_COLOUR, MOVE_REVEAL_RANK = 0, 1, 2, 3
MOVE_TYPE_NAMES = ("discard", "play", "reveal-colour", "reveal-rank")

# HLE's rl_env presets (``rl_env.make``); keys are HLE's names, aliases below.
PRESETS: dict[str, dict[str, object]] = {
    "Hanabi-Full": dict(colors=5, ranks=5, max_information_tokens=8, max_life_tokens=3),
    "Hanabi-Full-Minimal": dict(
        colors=5, ranks=5, max_information_tokens=8, max_life_tokens=3, observation_type="minimal"
    ),
    "Hanabi-Small": dict(colors=2, ranks=5, hand_size=2, max_information_tokens=3, max_life_tokens=1),
    "Hanabi-Very-Small": dict(colors=1, ranks=5, hand_size=2, max_information_tokens=3, max_life_tokens=1),
}
PRESET_ALIASES: dict[str, str] = {
    "full": "Hanabi-Full",
    "hanabi-full-cardknowledge": "Hanabi-Full",
    "full-minimal": "Hanabi-Full-Minimal",
    "minimal": "Hanabi-Full-Minimal",
    "small": "Hanabi-Small",
    "very-small": "Hanabi-Very-Small",
    "verysmall": "Hanabi-Very-Small",
}


def preset_name(name: str) -> str:
    """HLE's name of the preset ``name`` (one of :data:`PRESETS`, any case, or an alias of
    :data:`PRESET_ALIASES`); ``ValueError`` naming the known ones otherwise."""
    key = PRESET_ALIASES.get(name.lower(), name)
    match = {k.lower(): k for k in PRESETS}.get(key.lower())
    if match is None:
        raise ValueError(f"unknown Hanabi preset {name!r}; known: {sorted(PRESETS) + sorted(PRESET_ALIASES)}")
    return match


def canonical_preset(name: str) -> str:
    """HLE's name of the preset ``name`` where it names one (``very-small`` -> ``Hanabi-Very-Small``), else
    ``name`` as given (for the env to refuse): configs store it, so one game has one name everywhere."""
    try:
        return preset_name(name)
    except ValueError:
        return name


@dataclass(frozen=True)
class ObsLayout:
    """Start offsets and lengths of the canonical observation's sections (HLE ``canonical_encoders.cc``)."""

    hands: int
    board: int
    discards: int
    last_action: int
    knowledge: int
    size: int

    def sections(self) -> dict[str, tuple[int, int]]:
        """Section name -> (start, stop) index range of the vector."""
        starts = [
            ("hands", self.hands),
            ("board", self.board),
            ("discards", self.discards),
            ("last_action", self.last_action),
            ("knowledge", self.knowledge),
        ]
        out: dict[str, tuple[int, int]] = {}
        for (name, start), (_, stop) in zip(starts, starts[1:] + [("end", self.size)]):
            out[name] = (start, stop)
        return out


@dataclass(frozen=True)
class HanabiConfig:
    """A Hanabi variant. Fields use HLE's parameter names; ``hand_size=None`` means HLE's rule (5, or 4 for >= 4
    players). Derived sizes are properties."""

    players: int = 2
    colors: int = 5
    ranks: int = 5
    hand_size: int | None = None
    max_information_tokens: int = 8
    max_life_tokens: int = 3
    observation_type: ObservationType = "card_knowledge"

    def __post_init__(self) -> None:
        for name in ("players", "colors", "ranks", "hand_size", "max_information_tokens", "max_life_tokens"):
            if name != "hand_size" or self.hand_size is not None:  # a str failed in a comparison below
                object.__setattr__(self, name, whole_number(getattr(self, name), name))
        if not 2 <= self.players <= 5:
            raise ValueError(f"players must be in 2..5, got {self.players}")
        if not 1 <= self.colors <= 5:
            raise ValueError(f"colors must be in 1..5, got {self.colors}")
        if not 1 <= self.ranks <= 5:
            raise ValueError(f"ranks must be in 1..5, got {self.ranks}")
        if self.hand_size is not None and not 1 <= self.hand_size <= 8:
            raise ValueError(f"hand_size must be in 1..8 (HLE bitmasks), got {self.hand_size}")
        if self.max_information_tokens < 0 or self.max_life_tokens < 1:
            raise ValueError("need max_information_tokens >= 0 and max_life_tokens >= 1")
        if self.observation_type not in ("card_knowledge", "minimal"):
            raise ValueError(
                f"observation_type must be 'card_knowledge' or 'minimal', got {self.observation_type!r}"
            )
        if self.hand * self.players > self.deck_size:
            raise ValueError(f"{self.players} hands of {self.hand} cards exceed the deck of {self.deck_size}")
        for name in ("num_moves", "max_score", "obs_size"):  # fill the caches (the rest are filled by these)
            getattr(self, name)

    @classmethod
    def preset(cls, name: str, players: int = 2, **overrides: object) -> HanabiConfig:
        """HLE preset by name (``Hanabi-Full``, ``Hanabi-Full-Minimal``, ``Hanabi-Small``, ``Hanabi-Very-Small``;
        case-insensitive aliases ``full``, ``small``, ``very-small``, ``minimal``)."""
        params = dict(PRESETS[preset_name(name)], players=players)
        params.update(overrides)
        return cls(**params)  # type: ignore[arg-type]

    def with_players(self, players: int) -> HanabiConfig:
        return replace(self, players=players)

    # ---- derived sizes -------------------------------------------------------------------------------------
    @cached_property  # derived sizes: computed once, then plain attributes (torch.compile traces them)
    def hand(self) -> int:
        """Effective hand size H."""
        if self.hand_size is not None:
            return self.hand_size
        return 5 if self.players < 4 else 4

    @cached_property
    def num_cards(self) -> int:
        """K = colours * ranks distinct cards."""
        return self.colors * self.ranks

    @cached_property
    def copies(self) -> np.ndarray:
        """[R] copies of each rank per colour (HLE: 3 of rank 0, 1 of the top rank, 2 otherwise)."""
        out = np.full(self.ranks, 2, dtype=np.int64)
        out[-1] = 1
        out[0] = 3
        return out

    @cached_property
    def deck_size(self) -> int:
        """D = cards in the full deck (50 for Full)."""
        return int(self.copies.sum()) * self.colors

    @cached_property
    def num_moves(self) -> int:
        """M = 2H + (P - 1)(C + R)."""
        return 2 * self.hand + (self.players - 1) * (self.colors + self.ranks)

    @cached_property
    def max_score(self) -> int:
        return self.colors * self.ranks

    @property
    def hle_params(self) -> dict[str, str]:
        """Parameters for ``pyhanabi.HanabiGame`` (strings, as HLE passes them to C++)."""
        return {
            "players": str(self.players),
            "colors": str(self.colors),
            "ranks": str(self.ranks),
            "hand_size": str(self.hand),
            "max_information_tokens": str(self.max_information_tokens),
            "max_life_tokens": str(self.max_life_tokens),
            "observation_type": "0" if self.observation_type == "minimal" else "1",
            "seed": "1",
            "random_start_player": "false",
        }

    @cached_property
    def last_action_length(self) -> int:
        p, c, r, h = self.players, self.colors, self.ranks, self.hand
        return p + 4 + p + c + r + h + h + c * r + 2

    @cached_property
    def layout(self) -> ObsLayout:
        p, h, k = self.players, self.hand, self.num_cards
        hands = (p - 1) * h * k + p
        board = (self.deck_size - p * h) + k + self.max_information_tokens + self.max_life_tokens
        knowledge = 0 if self.observation_type == "minimal" else p * h * (k + self.colors + self.ranks)
        starts = np.cumsum([0, hands, board, self.deck_size, self.last_action_length, knowledge])
        return ObsLayout(*(int(x) for x in starts))

    @cached_property
    def obs_size(self) -> int:
        """Length of the canonical observation vector (658 for 2-player Full)."""
        return self.layout.size

    # ---- move tables ---------------------------------------------------------------------------------------
    def move_table(self) -> np.ndarray:
        """[M, 5] int64 rows (type, card_index, target_offset, colour, rank), -1 where not applicable."""
        return _move_table(self).copy()

    def describe_move(self, move: int) -> str:
        """Human-readable move, HLE style: ``(Play 2)``, ``(Reveal player +1 color R)``."""
        if not 0 <= move < self.num_moves:
            return f"(invalid move id {move}; this game has {self.num_moves} moves)"
        t, i, off, col, rk = (int(x) for x in _move_table(self)[move])
        if t == MOVE_DISCARD:
            return f"(Discard {i})"
        if t == MOVE_PLAY:
            return f"(Play {i})"
        if t == MOVE_REVEAL_COLOUR:
            return f"(Reveal player +{off} color {COLOUR_CHARS[col]})"
        return f"(Reveal player +{off} rank {rk + 1})"

    def card_name(self, card: int) -> str:
        """``R1``-style name of a card id (``XX`` for no card)."""
        return (
            "XX"
            if not 0 <= card < self.num_cards
            else f"{COLOUR_CHARS[card // self.ranks]}{card % self.ranks + 1}"
        )

    def full_deck(self) -> np.ndarray:
        """[D] card ids of the full deck in sorted order (each card repeated by its copy count)."""
        reps = np.tile(self.copies, self.colors)
        return np.repeat(np.arange(self.num_cards, dtype=np.int64), reps)

    def discard_slots(self) -> tuple[np.ndarray, np.ndarray]:
        """([D] card id, [D] copy index) of every bit of the discard thermometer section."""
        cards = self.full_deck()
        copy_idx = np.concatenate([np.arange(n) for n in np.tile(self.copies, self.colors)])
        return cards, copy_idx.astype(np.int64)


@functools.lru_cache(maxsize=64)
def _move_table(cfg: HanabiConfig) -> np.ndarray:
    h, c, r, p = cfg.hand, cfg.colors, cfg.ranks, cfg.players
    rows = [(MOVE_DISCARD, i, -1, -1, -1) for i in range(h)]
    rows += [(MOVE_PLAY, i, -1, -1, -1) for i in range(h)]
    rows += [(MOVE_REVEAL_COLOUR, -1, 1 + u // c, u % c, -1) for u in range((p - 1) * c)]
    rows += [(MOVE_REVEAL_RANK, -1, 1 + u // r, -1, u % r) for u in range((p - 1) * r)]
    return np.asarray(rows, dtype=np.int64)


def resolve_config(config: HanabiConfig | str | None = None, players: int | None = None) -> HanabiConfig:
    """A config from a config, a preset name, or None (Full). ``players``: of a preset or None (default 2); a
    ``HanabiConfig`` has its own, and a different explicit ``players`` is a ``ValueError`` (it was ignored)."""
    if config is None:
        return HanabiConfig(players=2 if players is None else players)
    if isinstance(config, str):
        return HanabiConfig.preset(config, players=2 if players is None else players)
    if not isinstance(config, HanabiConfig):
        raise TypeError(f"config must be a HanabiConfig, a preset name or None, not {type(config).__name__}")
    if players is not None and players != config.players:
        raise ValueError(
            f"players={players} conflicts with the given HanabiConfig's players={config.players}: a config "
            "object sets its own (give HanabiConfig(players=...) or a preset name with players=)"
        )
    return config


def step_tables(cfg: HanabiConfig) -> dict[str, np.ndarray]:
    """Constant lookup tables (numpy) that let the batched env step and encode with gathers instead of branches.

    Card ids run 0..K-1 and K stands for "no card" (an empty hand slot). Knowledge rows have F = K + C + R bits
    per hand slot: plausible cards (K), colour hinted one-hot (C), rank hinted one-hot (R), as HLE encodes them.
    """
    P, H, C, R, K = cfg.players, cfg.hand, cfg.colors, cfg.ranks, cfg.num_cards
    F = K + C + R
    moves = cfg.move_table()
    mtype, slot, off, col, rank = (moves[:, i] for i in range(5))
    M = len(moves)
    card_colour = np.append(np.arange(K) // R, -1)  # [K+1]
    card_rank = np.append(np.arange(K) % R, -1)
    hits = np.zeros((M, K + 1), dtype=bool)  # hint m reveals card k
    keep_hit = np.ones((M, F), dtype=bool)  # knowledge bits kept on a slot the hint touches
    keep_miss = np.ones((M, F), dtype=bool)  # ... on a slot it does not touch
    set_hit = np.zeros((M, F), dtype=bool)  # knowledge bits set on a touched slot
    for m in range(M):
        if mtype[m] == MOVE_REVEAL_COLOUR:
            same = card_colour[:K] == col[m]
            hits[m, :K] = same
            keep_hit[m, :K], keep_miss[m, :K] = same, ~same
            set_hit[m, K + col[m]] = True
        elif mtype[m] == MOVE_REVEAL_RANK:
            same = card_rank[:K] == rank[m]
            hits[m, :K] = same
            keep_hit[m, :K], keep_miss[m, :K] = same, ~same
            set_hit[m, K + C + rank[m]] = True
    fresh_knowledge = np.zeros(F, dtype=bool)
    fresh_knowledge[:K] = True
    # last-action section per (last move, mover seat relative to observer); row M = no move yet
    la = np.zeros((M + 1, P, cfg.last_action_length), dtype=bool)
    code = {MOVE_PLAY: 0, MOVE_DISCARD: 1, MOVE_REVEAL_COLOUR: 2, MOVE_REVEAL_RANK: 3}
    o_col, o_rank = 2 * P + 4, 2 * P + 4 + C
    o_pos = o_rank + R + H
    for m in range(M):
        for q in range(P):
            la[m, q, q] = True
            la[m, q, P + code[int(mtype[m])]] = True
            if mtype[m] >= MOVE_REVEAL_COLOUR:
                la[m, q, P + 4 + (q + off[m]) % P] = True
            if mtype[m] == MOVE_REVEAL_COLOUR:
                la[m, q, o_col + col[m]] = True
            if mtype[m] == MOVE_REVEAL_RANK:
                la[m, q, o_rank + rank[m]] = True
            if mtype[m] <= MOVE_PLAY:
                la[m, q, o_pos + slot[m]] = True
    seats = np.arange(P)
    rel = (seats[:, None] + seats[None, :]) % P  # [P, P] observer o, relative seat k -> absolute seat
    hand_base = ((np.arange(1, P)[:, None] - 1) * H * K + np.arange(H)[None, :] * K).reshape(-1)
    shift = np.stack([np.where(np.arange(H) < i, np.arange(H), np.arange(H) + 1) for i in range(H)])
    slot_card, slot_copy = cfg.discard_slots()
    return dict(
        move_type=mtype,
        move_slot=np.maximum(slot, 0),
        move_offset=np.maximum(off, 0),
        hits=hits,
        keep_hit=keep_hit,
        keep_miss=keep_miss,
        set_hit=set_hit,
        fresh_knowledge=fresh_knowledge,
        card_colour=np.maximum(card_colour, 0),
        card_rank=np.maximum(card_rank, 0),
        last_action=la,
        rel=rel,
        hint_colour=np.append(np.arange(K) // R, C),
        hint_rank=np.append(np.arange(K) % R, R),
        hand_base=np.broadcast_to(hand_base, (P, len(hand_base))).copy(),
        shift=shift,
        full_deck=cfg.full_deck(),
        slot_card=slot_card,
        slot_copy=slot_copy,
    )
