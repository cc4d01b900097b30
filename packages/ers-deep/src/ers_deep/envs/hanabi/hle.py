"""Reference adapter for DeepMind's hanabi-learning-environment (HLE), driven through pyhanabi's cffi library.

``HLEGame`` plays one game of a ``HanabiConfig`` in HLE. It can play a *given* deal: HLE has no C entry point for
choosing a chance outcome, so the adapter builds an HLE ``HanabiMove`` of type kDeal (an 8-byte C++ object:
int32 type, then int8 card_index, target_offset, color, rank; the layout is checked against a move that HLE
itself allocates) and applies it with ``StateApplyMove`` whenever HLE's current player is the chance player.
Every move is checked with HLE's ``MoveIsLegal`` first, because HLE aborts the process on an illegal move.

Like HLE's ``rl_env``, the replacement card is dealt right after each move, also when the move ends the game.
``HLEBatch`` steps B such games in a Python loop (the reference for benchmarks); ``replay`` replays a whole game.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ers_deep.envs.hanabi.config import HanabiConfig, resolve_config
from ers_deep.envs.hanabi.state import IllegalMoveError

CHANCE_PLAYER = -1
_DEAL = 5  # HanabiMove::kDeal


def _pyhanabi() -> Any:
    try:
        from hanabi_learning_environment import pyhanabi
    except ImportError as err:  # pragma: no cover - the package is a dependency of ers-deep
        raise ImportError(
            "the HLE reference needs hanabi-learning-environment (pip install "
            "hanabi-learning-environment; building it may need CMAKE_POLICY_VERSION_MINIMUM=3.5)"
        ) from err
    if not (pyhanabi.cdef_loaded() and pyhanabi.lib_loaded()):  # pragma: no cover
        raise ImportError("pyhanabi failed to load its C library")
    return pyhanabi


class HLEGame:
    """One HLE game. ``new_game(deck)`` deals the card ids of ``deck`` [D] in order (None: HLE's own RNG)."""

    def __init__(
        self, config: HanabiConfig | str | None = None, players: int | None = None, seed: int = 1
    ) -> None:
        self.config = cfg = resolve_config(config, players)
        ph = _pyhanabi()
        self._ffi, self._lib = ffi, lib = ph.ffi, ph.lib
        params = dict(cfg.hle_params, seed=str(seed))
        c_params = [ffi.new("char[]", s.encode("ascii")) for kv in params.items() for s in kv]
        self._game = ffi.new("pyhanabi_game_t*")
        lib.NewGame(self._game, len(c_params), ffi.new(f"char * [{len(c_params)}]", c_params))
        self._encoder = ffi.new("pyhanabi_observation_encoder_t*")
        lib.NewObservationEncoder(self._encoder, self._game, 0)  # CANONICAL
        shape = ffi.string(c := lib.ObservationShape(self._encoder))
        lib.DeleteString(c)
        if int(shape) != cfg.obs_size or lib.MaxMoves(self._game) != cfg.num_moves:
            raise RuntimeError(
                f"HLE sizes {shape!r}/{lib.MaxMoves(self._game)} differ from the config's "
                f"{cfg.obs_size}/{cfg.num_moves}"
            )
        self._moves = []
        for uid in range(cfg.num_moves):
            m = ffi.new("pyhanabi_move_t*")
            lib.GetMoveByUid(self._game, uid, m)
            self._moves.append(m)
        self._deal_bytes = ffi.new("int8_t[8]")
        self._deal = ffi.new("pyhanabi_move_t*")
        self._deal.move = ffi.cast("void*", self._deal_bytes)
        self._check_move_layout()
        self._obs = ffi.new("pyhanabi_observation_t*")
        self._state: Any = None
        self._deck: np.ndarray | None = None
        self._pos = 0
        self.last_score = 0

    def _check_move_layout(self) -> None:
        """Verify the assumed C++ HanabiMove layout on a move HLE allocated, then on the hand-built deal move."""
        ffi, lib = self._ffi, self._lib
        probe = ffi.new("pyhanabi_move_t*")
        lib.GetRevealColorMove(1, 3, probe)
        raw = list(ffi.cast("int8_t*", probe.move)[0:8])
        lib.DeleteMove(probe)
        if raw != [3, 0, 0, 0, -1, 1, 3, -1]:
            raise RuntimeError(f"unexpected HanabiMove layout {raw}; cannot inject chance outcomes")
        self._set_deal(2, 4)
        if (lib.MoveType(self._deal), lib.MoveColor(self._deal), lib.MoveRank(self._deal)) != (_DEAL, 2, 4):
            raise RuntimeError("hand-built deal move is not read back by HLE")

    def _set_deal(self, colour: int, rank: int) -> None:
        b = self._deal_bytes
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7] = _DEAL, 0, 0, 0, -1, -1, colour, rank

    # ---- game control ---------------------------------------------------------------------------------------
    def new_game(self, deck: Sequence[int] | np.ndarray | None = None) -> None:
        """Start a game; ``deck`` [D] card ids (colour * ranks + rank) in deal order, or None for HLE's RNG."""
        self._free_state()
        self._state = self._ffi.new("pyhanabi_state_t*")
        self._lib.NewState(self._game, self._state)
        self._deck = (
            None if deck is None else np.array(deck, dtype=np.int64)
        )  # a copy: callers may reuse theirs
        self._pos = 0
        self.last_score = 0
        self._deal_chance()

    def _deal_chance(self) -> None:
        lib, state, ranks = self._lib, self._state, self.config.ranks
        while lib.StateCurPlayer(state) == CHANCE_PLAYER:
            if self._deck is None:
                lib.StateDealRandomCard(state)
                continue
            if self._pos >= len(self._deck):
                raise ValueError("the deck ran out while HLE still deals cards")
            card = int(self._deck[self._pos])
            self._set_deal(card // ranks, card % ranks)
            if not lib.MoveIsLegal(state, self._deal):
                raise ValueError(
                    f"deal of card {self.config.card_name(card)} at deck position {self._pos} is "
                    "not possible (no copy left): the deck is not a permutation of the full deck"
                )
            lib.StateApplyMove(state, self._deal)
            self._pos += 1

    def step(self, move: int) -> tuple[float, bool]:
        """Apply move id ``move`` for the current player, deal the replacement card; return (reward, done)."""
        lib, state = self._lib, self._state
        if self.done:
            raise IllegalMoveError(f"the HLE game is over; move {move} refused")
        cur = lib.StateCurPlayer(state)
        if not (0 <= move < self.config.num_moves) or not lib.MoveIsLegal(state, self._moves[move]):
            raise IllegalMoveError(
                f"illegal move {move} {self.config.describe_move(move)} for player {cur} "
                f"in HLE; legal: {self.legal_moves()}"
            )
        lib.StateApplyMove(state, self._moves[move])
        self._deal_chance()
        score = lib.StateScore(state)
        reward, self.last_score = float(score - self.last_score), score
        return reward, self.done

    # ---- queries --------------------------------------------------------------------------------------------
    @property
    def cur_player(self) -> int:
        return int(self._lib.StateCurPlayer(self._state))

    @property
    def done(self) -> bool:
        return bool(self._lib.StateEndOfGameStatus(self._state) != 0)

    @property
    def score(self) -> int:
        return int(self._lib.StateScore(self._state))

    def legal_moves(self) -> list[int]:
        """Legal move ids of the current player (HLE's ``LegalMoves``: by the rules, also after the end)."""
        lib, state = self._lib, self._state
        return [u for u, m in enumerate(self._moves) if lib.MoveIsLegal(state, m)]

    def legal_mask(self) -> np.ndarray:
        """[P, M] bool: the current player's row holds its legal moves, other rows are empty (as in HLE)."""
        mask = np.zeros((self.config.players, self.config.num_moves), dtype=bool)
        cur = self.cur_player
        if cur >= 0:
            mask[cur, self.legal_moves()] = True
        return mask

    def observation(self, player: int) -> np.ndarray:
        """[O] uint8 canonical observation vector of ``player`` (HLE's ``EncodeObservation``)."""
        ffi, lib = self._ffi, self._lib
        lib.NewObservation(self._state, player, self._obs)
        c = lib.EncodeObservation(self._encoder, self._obs)
        raw = ffi.string(c)
        lib.DeleteString(c)
        lib.DeleteObservation(self._obs)
        return np.frombuffer(raw, dtype=np.uint8)[::2] - 48

    def observations(self) -> np.ndarray:
        """[P, O] uint8 canonical observations of all players."""
        return np.stack([self.observation(p) for p in range(self.config.players)])

    def hands(self) -> list[list[int]]:
        """Card ids in every hand, oldest first (HLE slot order)."""
        card = self._ffi.new("pyhanabi_card_t*")
        out = []
        for p in range(self.config.players):
            row = []
            for i in range(self._lib.StateGetHandSize(self._state, p)):
                self._lib.StateGetHandCard(self._state, p, i, card)
                row.append(card.color * self.config.ranks + card.rank)
            out.append(row)
        return out

    def move_string(self, move: int) -> str:
        """HLE's own text for move id ``move`` (``HanabiMove::ToString``)."""
        c = self._lib.MoveToString(self._moves[move])
        s = self._ffi.string(c).decode()
        self._lib.DeleteString(c)
        return s

    def state_string(self) -> str:
        c = self._lib.StateToString(self._state)
        s = self._ffi.string(c).decode()
        self._lib.DeleteString(c)
        return s

    # ---- lifetime ---------------------------------------------------------------------------------------------
    def _free_state(self) -> None:
        if self._state is not None:
            self._lib.DeleteState(self._state)
            self._state = None

    def close(self) -> None:
        """Free the C++ objects (also done on garbage collection)."""
        self._free_state()
        if getattr(self, "_moves", None):
            for m in self._moves:
                self._lib.DeleteMove(m)
            self._moves = []
        if getattr(self, "_encoder", None) is not None:
            self._lib.DeleteObservationEncoder(self._encoder)
            self._encoder = None
        if getattr(self, "_game", None) is not None:
            self._lib.DeleteGame(self._game)
            self._game = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown may have torn down cffi already
            self.close()


@dataclass(frozen=True)
class HLERecord:
    """One step of a replayed game, as HLE reports it after the move."""

    obs: np.ndarray  # [P, O] uint8
    legal: np.ndarray  # [P, M] bool
    cur_player: int
    reward: float
    done: bool
    score: int


def replay(
    config: HanabiConfig | str | None,
    deck: Sequence[int] | np.ndarray,
    moves: Sequence[int],
    players: int | None = None,
) -> list[HLERecord]:
    """Replay an ers game in HLE: record 0 is the initial observation, record t the result of move t-1."""
    game = HLEGame(config, players=players)
    game.new_game(deck)
    records = [HLERecord(game.observations(), game.legal_mask(), game.cur_player, 0.0, game.done, game.score)]
    for m in moves:
        reward, done = game.step(int(m))
        records.append(
            HLERecord(game.observations(), game.legal_mask(), game.cur_player, reward, done, game.score)
        )
    game.close()
    return records


class HLEBatch:
    """B HLE games stepped one after another (numpy in, numpy out); finished games restart with HLE's RNG.

    ``step`` returns (obs [B, P, O] uint8, legal [B, P, M] bool, reward [B] float32, done [B] bool)."""

    def __init__(
        self,
        config: HanabiConfig | str | None = None,
        batch_size: int = 1,
        players: int | None = None,
        seed: int = 1,
    ) -> None:
        self.config = resolve_config(config, players)
        self.games = [HLEGame(self.config, seed=seed + i) for i in range(batch_size)]
        for g in self.games:
            g.new_game(None)

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.stack([g.observations() for g in self.games]),
            np.stack([g.legal_mask() for g in self.games]),
        )

    def step(
        self, actions: Sequence[int] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        rewards = np.zeros(len(self.games), dtype=np.float32)
        dones = np.zeros(len(self.games), dtype=bool)
        for i, (g, a) in enumerate(zip(self.games, actions)):
            rewards[i], dones[i] = g.step(int(a))
            if dones[i]:
                g.new_game(None)
        obs, legal = self.observe()
        return obs, legal, rewards, dones

    def close(self) -> None:
        for g in self.games:
            g.close()
