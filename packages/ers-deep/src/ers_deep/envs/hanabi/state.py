"""The state of a batch of Hanabi games (``HanabiEnv.state``): one tensor per field, leading dim B."""

from __future__ import annotations

from dataclasses import dataclass, fields

from torch import Tensor


@dataclass
class HanabiState:
    """The full batched game state (every tensor has leading dim B). Card ids are 0..K-1; K means "no card"."""

    deck: Tensor  # [B, D] long card ids in draw order (the deal)
    deck_pos: Tensor  # [B] long cards drawn so far (deck size = D - deck_pos)
    hand: Tensor  # [B, P, H] long card per slot (oldest first), K = empty slot
    knowledge: (
        Tensor  # [B, P, H, K+C+R] bool HLE card knowledge: plausible cards, colour/rank hinted one-hots
    )
    fireworks: Tensor  # [B, C] long cards played per colour
    info: Tensor  # [B] long information tokens
    life: Tensor  # [B] long life tokens
    discards: Tensor  # [B, K] long discarded copies per card id
    cur: Tensor  # [B] long seat to move
    turns_left: Tensor  # [B] long HLE turns_to_play (counts down once the deck is empty)
    last_move: Tensor  # [B] long move id of the last move, M = none yet
    last_player: Tensor  # [B] long absolute seat of the last mover
    last_card: Tensor  # [B] long card played/discarded by the last move, K otherwise
    last_flags: Tensor  # [B, 2] bool last move was a successful play / a play that regained an info token
    last_reveal: Tensor  # [B, H] bool slots of the target hand matching the last hint
    score: Tensor  # [B] long current score (0 once out of lives)
    done: Tensor  # [B] bool game over
    moves: Tensor  # [B] long moves made in the current game

    def clone(self) -> HanabiState:
        """A deep copy (every tensor cloned)."""
        return HanabiState(**{f.name: getattr(self, f.name).clone() for f in fields(self)})
