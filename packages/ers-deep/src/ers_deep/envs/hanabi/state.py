"""The state of a batch of Hanabi games (``HanabiEnv.state``): one tensor per field, leading dim B; what
``HanabiEnv.reset``/``step`` and the pure ``transition`` return; the error an illegal move raises."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

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


class IllegalMoveError(ValueError):
    """A move that is not legal for the current player of its game (HLE would abort the process)."""


class HanabiStep(NamedTuple):
    """What ``reset``/``step`` return. After an auto-reset, obs/legal/cur_player describe the new game while
    reward/done/score describe the move that ended the old one."""

    obs: Tensor  # [B, P, O] canonical observation of every player (float32 unless configured)
    legal: Tensor  # [B, P, M] bool legal moves; only the current player's row can be True
    cur_player: Tensor  # [B] long seat to move
    reward: Tensor  # [B] float32 score change caused by the move
    done: Tensor  # [B] bool the move ended the game
    score: Tensor  # [B] long score after the move (the final score where done)


class HanabiTransition(NamedTuple):
    """What the pure ``transition`` returns: the next state (never reset) and the move's outputs."""

    state: HanabiState  # the next state (a new object)
    reward: Tensor  # [B] float32 score change caused by the move
    done: Tensor  # [B] bool the move ended the game
    score: Tensor  # [B] long score after the move
