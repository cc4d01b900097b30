"""Batched Hanabi in torch: all games of a batch advance in one tensor step, on CPU or GPU.

For the same deal and moves it equals DeepMind's HLE (``hanabi_lib``) step for step: the canonical observation
of every player, the legal-move mask, the move order, the reward (score change; the score drops to 0 when the
last life is lost), the end of the game and the score. Start player is 0 (HLE's default). Shapes: B games,
P players, H hand slots, C colours, R ranks, K = C*R card ids, D deck cards, M moves, O observation length.

A *deal* is a deck order ``[B, D]`` of card ids: the first P*H cards fill the hands (player 0 slots 0..H-1,
then player 1, ...), the rest are drawn in order, exactly the sequence of HLE chance moves.
HLE semantics kept on purpose: a played/discarded card leaves a gap that the later cards close (they shift
left) and the new card goes to the last slot; the replacement card is drawn even when the move ends the game;
the legal mask of a finished game is still computed by the rules (for the next player), as HLE does.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import torch
from torch import Tensor

from ers_deep.envs.hanabi_config import HanabiConfig, resolve_config


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


@dataclass
class HanabiState:
    """The full batched game state (every tensor has leading dim B)."""

    deck: Tensor  # [B, D] long card ids in draw order (the deal)
    deck_pos: Tensor  # [B] long cards drawn so far (D - deck_pos = deck size)
    hand: Tensor  # [B, P, H] long card id per slot, -1 = empty
    colour_plausible: Tensor  # [B, P, H, C] bool (HLE CardKnowledge)
    rank_plausible: Tensor  # [B, P, H, R] bool
    colour_hinted: Tensor  # [B, P, H] bool
    rank_hinted: Tensor  # [B, P, H] bool
    fireworks: Tensor  # [B, C] long cards played per colour
    info: Tensor  # [B] long information tokens
    life: Tensor  # [B] long life tokens
    discards: Tensor  # [B, K] long discarded copies per card id
    cur: Tensor  # [B] long seat to move
    turns_left: Tensor  # [B] long HLE turns_to_play (counts down once the deck is empty)
    last_move: Tensor  # [B] long move id of the last move, -1 = none yet
    last_player: Tensor  # [B] long absolute seat of the last mover
    last_card: Tensor  # [B] long card played/discarded by the last move, -1 otherwise
    last_scored: Tensor  # [B] bool last move was a successful play
    last_info: Tensor  # [B] bool last move was a play that regained an information token
    last_reveal: Tensor  # [B, H] bool slots of the target hand matching the last hint
    score: Tensor  # [B] long current score (0 once out of lives)
    done: Tensor  # [B] bool game over
    moves: Tensor  # [B] long moves made in the current game

    def clone(self) -> HanabiState:
        return HanabiState(**{f.name: getattr(self, f.name).clone() for f in fields(self)})


class HanabiEnv:
    """A batch of B Hanabi games stepped together.

    Args:
        config: a ``HanabiConfig``, a preset name (``"Hanabi-Full"``, ``"small"``, ...) or None (2p Full).
        batch_size: B, the number of games.
        device: torch device of every tensor.
        seed: seed of the deal generator (deals are reproducible for the same seed and call sequence).
        auto_reset: after a move that ends a game, deal that game anew inside ``step``.
        check_legal: raise ``IllegalMoveError`` on an illegal move (costs one device sync per step).
        obs_dtype: dtype of the observation tensor (the vector is 0/1).
        players: number of players when ``config`` is a preset name or None.
    """

    def __init__(self, config: HanabiConfig | str | None = None, batch_size: int = 1, device: str | torch.device = "cpu",
                 seed: int | None = 0, auto_reset: bool = True, check_legal: bool = True,
                 obs_dtype: torch.dtype = torch.float32, players: int = 2) -> None:
        self.config = cfg = resolve_config(config, players)
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        self.auto_reset = auto_reset
        self.check_legal = check_legal
        self.obs_dtype = obs_dtype
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed) if seed is not None else int(torch.seed()) % 2**63)
        self.num_players, self.hand_size = cfg.players, cfg.hand
        self.num_moves, self.obs_size, self.deck_size = cfg.num_moves, cfg.obs_size, cfg.deck_size
        self._build_tables()
        self.state = self._fresh_state(self.random_decks())
        self._legal_cur = torch.zeros(self.batch_size, self.num_moves, dtype=torch.bool, device=self.device)

    # ---- constant tables ------------------------------------------------------------------------------------
    def _build_tables(self) -> None:
        cfg, dev = self.config, self.device
        P, H = cfg.players, cfg.hand

        def t(x: object) -> Tensor:
            return torch.as_tensor(x, dtype=torch.long, device=dev)

        table = t(cfg.move_table())  # [M, 5]
        self._mtype, self._mcard, self._moff, self._mcol, self._mrank = table.unbind(1)  # each [M]
        self._type_code = t([1, 0, 2, 3])  # our type -> HLE encoder order (play, discard, colour, rank)
        self._full_deck = t(cfg.full_deck())  # [D]
        slot_card, slot_copy = cfg.discard_slots()
        self._slot_card, self._slot_copy = t(slot_card), t(slot_copy)  # [D], [D]
        seats = torch.arange(P, device=dev)
        self._rel_all = (seats[:, None] + seats[None, :]) % P  # [P, P] observer o -> seat (o + k) % P
        self._shift = torch.stack([torch.where(torch.arange(H) < i, torch.arange(H), torch.arange(H) + 1)
                                   for i in range(H)]).to(dev)  # [H, H] slot source after removing slot i
        self._ar = torch.arange(self.batch_size, device=dev)  # [B]
        self._arP, self._arH = seats, torch.arange(H, device=dev)
        self._arC, self._arR = torch.arange(cfg.colors, device=dev), torch.arange(cfg.ranks, device=dev)
        self._arK = torch.arange(cfg.num_cards, device=dev)
        self._arDeck = torch.arange(cfg.deck_size - P * H, device=dev)
        self._arI = torch.arange(cfg.max_information_tokens, device=dev)
        self._arL = torch.arange(cfg.max_life_tokens, device=dev)
        self._offsets = torch.arange(1, P, device=dev)  # [P-1]
        self._ar4 = torch.arange(4, device=dev)

    # ---- deals and resets -----------------------------------------------------------------------------------
    def random_decks(self, n: int | None = None) -> Tensor:
        """[n, D] uniformly shuffled deck orders drawn from the env's generator (n defaults to B)."""
        n = self.batch_size if n is None else n
        keys = torch.rand(n, self.deck_size, generator=self.generator, device=self.device)
        return self._full_deck[keys.argsort(dim=1)]

    def _fresh_state(self, decks: Tensor) -> HanabiState:
        """Initial states for the deals ``decks`` [n, D] (start player 0)."""
        cfg, dev = self.config, self.device
        n, P, H, C, R = decks.shape[0], cfg.players, cfg.hand, cfg.colors, cfg.ranks

        def full(shape: tuple[int, ...], value: int | bool, dtype: torch.dtype = torch.long) -> Tensor:
            return torch.full(shape, value, dtype=dtype, device=dev)

        return HanabiState(
            deck=decks, deck_pos=full((n,), P * H), hand=decks[:, : P * H].reshape(n, P, H).clone(),
            colour_plausible=full((n, P, H, C), True, torch.bool), rank_plausible=full((n, P, H, R), True, torch.bool),
            colour_hinted=full((n, P, H), False, torch.bool), rank_hinted=full((n, P, H), False, torch.bool),
            fireworks=full((n, C), 0), info=full((n,), cfg.max_information_tokens), life=full((n,), cfg.max_life_tokens),
            discards=full((n, cfg.num_cards), 0), cur=full((n,), 0), turns_left=full((n,), P), last_move=full((n,), -1),
            last_player=full((n,), -1), last_card=full((n,), -1), last_scored=full((n,), False, torch.bool),
            last_info=full((n,), False, torch.bool), last_reveal=full((n, H), False, torch.bool), score=full((n,), 0),
            done=full((n,), False, torch.bool), moves=full((n,), 0))

    def _check_decks(self, decks: Tensor) -> Tensor:
        decks = torch.as_tensor(decks, dtype=torch.long, device=self.device)
        if decks.ndim != 2 or decks.shape[1] != self.deck_size:
            raise ValueError(f"decks must have shape [n, {self.deck_size}], got {tuple(decks.shape)}")
        if not torch.equal(decks.sort(dim=1).values, self._full_deck.expand_as(decks)):
            raise ValueError("every deck must be a permutation of the full deck (config.full_deck())")
        return decks

    def reset(self, seed: int | None = None, decks: Tensor | None = None) -> HanabiStep:
        """Deal every game anew (random deals, or the given ``decks`` [B, D]) and return the first observation."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        decks = self.random_decks() if decks is None else self._check_decks(decks)
        self.state = self._fresh_state(decks)
        zeros = torch.zeros(self.batch_size, device=self.device)
        return self._output(zeros, self.state.done.clone(), self.state.score.clone())

    def reset_games(self, mask: Tensor, decks: Tensor | None = None) -> None:
        """Deal the games where ``mask`` [B] is True anew (random deals, or rows of ``decks`` [B, D]); others keep
        their state. Sync-free: a full batch of deals is drawn and selected with ``torch.where``."""
        mask = torch.as_tensor(mask, dtype=torch.bool, device=self.device).reshape(self.batch_size)
        decks = self.random_decks() if decks is None else self._check_decks(decks)
        fresh, s = self._fresh_state(decks), self.state
        for f in fields(s):
            old, new = getattr(s, f.name), getattr(fresh, f.name)
            setattr(s, f.name, torch.where(mask.view(-1, *([1] * (old.ndim - 1))), new, old))

    # ---- the step ---------------------------------------------------------------------------------------------
    def _raise_illegal(self, actions: Tensor, ok: Tensor) -> None:
        b = int((~ok).nonzero()[0, 0])
        a = int(actions[b])
        if bool(self.state.done[b]):
            raise IllegalMoveError(f"game {b} is over (auto_reset is off): reset it before moving (move {a})")
        legal = [int(m) for m in self._legal_cur[b].nonzero().flatten()]
        raise IllegalMoveError(
            f"illegal move {a} {self.config.describe_move(a)} in game {b} for player {int(self.state.cur[b])}; "
            f"legal moves: {legal} ({', '.join(self.config.describe_move(m) for m in legal)})")

    def step(self, actions: Tensor) -> HanabiStep:
        """Apply move ``actions`` [B] (move ids of each game's current player) to every game at once."""
        cfg, s, ar = self.config, self.state, self._ar
        P, H, C, R, D = cfg.players, cfg.hand, cfg.colors, cfg.ranks, cfg.deck_size
        a = torch.as_tensor(actions, device=self.device).long().reshape(self.batch_size)
        if self.check_legal:
            in_range = (a >= 0) & (a < self.num_moves)
            ok = in_range & ~s.done & self._legal_cur.gather(1, a.clamp(0, self.num_moves - 1)[:, None]).squeeze(1)
            if not bool(ok.all()):
                self._raise_illegal(a, ok)
        a = a.clamp(0, self.num_moves - 1)
        mt, slot, col, rnk = self._mtype[a], self._mcard[a].clamp(min=0), self._mcol[a], self._mrank[a]
        is_disc, is_play, is_pd = mt == 0, mt == 1, mt <= 1
        is_col, is_rank, is_hint = mt == 2, mt == 3, mt >= 2
        cur = s.cur
        s.turns_left = s.turns_left - (s.deck_pos >= D).long()
        seat = torch.where(is_pd, cur, (cur + self._moff[a].clamp(min=0)) % P)  # [B] the hand that changes
        hand = s.hand[ar, seat]  # [B, H]
        cp, rp = s.colour_plausible[ar, seat], s.rank_plausible[ar, seat]  # [B, H, C], [B, H, R]
        ch, rh = s.colour_hinted[ar, seat], s.rank_hinted[ar, seat]  # [B, H]
        # play / discard
        card = torch.where(is_pd, hand.gather(1, slot[:, None]).squeeze(1), -1)  # [B]
        cc, cr = card.clamp(min=0) // R, card.clamp(min=0) % R
        playable = s.fireworks.gather(1, cc[:, None]).squeeze(1) == cr
        scored, failed = is_play & playable, is_play & ~playable
        fireworks = s.fireworks.scatter_add(1, cc[:, None], scored.long()[:, None])
        completed = scored & (fireworks.gather(1, cc[:, None]).squeeze(1) == R)
        gain = (is_disc | completed) & (s.info < cfg.max_information_tokens)
        s.info = s.info + gain.long() - is_hint.long()
        s.life = s.life - failed.long()
        s.discards = s.discards.scatter_add(1, cc[:, None] * R + cr[:, None], (is_disc | failed).long()[:, None])
        s.fireworks = fireworks
        # hints: HLE RevealColor/RevealRank on the target hand
        valid = hand >= 0
        match_c = is_col[:, None] & valid & (hand // R == col[:, None])  # [B, H]
        match_r = is_rank[:, None] & valid & (hand % R == rnk[:, None])
        col_oh = (self._arC == col[:, None]) & is_col[:, None]  # [B, C]
        rank_oh = (self._arR == rnk[:, None]) & is_rank[:, None]  # [B, R]
        cp = torch.where(match_c[..., None], col_oh[:, None, :], cp & ~col_oh[:, None, :])
        rp = torch.where(match_r[..., None], rank_oh[:, None, :], rp & ~rank_oh[:, None, :])
        ch, rh = ch | match_c, rh | match_r
        # remove the played/discarded card (later slots shift left) and draw into the last slot
        draw = is_pd & (s.deck_pos < D)
        new_card = torch.where(draw, s.deck.gather(1, s.deck_pos.clamp(max=D - 1)[:, None]).squeeze(1), -1)
        s.deck_pos = s.deck_pos + draw.long()
        src = torch.where(is_pd[:, None], self._shift[slot], self._arH)  # [B, H] source column in 0..H
        true_col = torch.ones_like(ch[:, :1])
        s.hand[ar, seat] = torch.cat([hand, new_card[:, None]], 1).gather(1, src)
        s.colour_plausible[ar, seat] = torch.cat([cp, true_col[..., None].expand(-1, 1, C)], 1).gather(
            1, src[..., None].expand(-1, -1, C))
        s.rank_plausible[ar, seat] = torch.cat([rp, true_col[..., None].expand(-1, 1, R)], 1).gather(
            1, src[..., None].expand(-1, -1, R))
        s.colour_hinted[ar, seat] = torch.cat([ch, ~true_col], 1).gather(1, src)
        s.rank_hinted[ar, seat] = torch.cat([rh, ~true_col], 1).gather(1, src)
        # bookkeeping for the last-action section
        s.last_move, s.last_player, s.last_card = a, cur, card
        s.last_scored, s.last_info, s.last_reveal = scored, is_play & gain, match_c | match_r
        total = fireworks.sum(1)
        score = torch.where(s.life > 0, total, 0)
        reward = (score - s.score).to(torch.float32)
        s.score = score
        s.done = (s.life <= 0) | (total >= cfg.max_score) | (s.turns_left <= 0)
        s.cur = (cur + 1) % P
        s.moves = s.moves + 1
        done, final = s.done.clone(), score.clone()
        if self.auto_reset:
            self.reset_games(done)
        return self._output(reward, done, final)

    # ---- observation and legal moves -------------------------------------------------------------------------
    def _output(self, reward: Tensor, done: Tensor, score: Tensor) -> HanabiStep:
        legal = self.legal_moves()
        return HanabiStep(self.observe(), legal, self.state.cur.clone(), reward, done, score)

    def legal_moves(self) -> Tensor:
        """[B, P, M] bool legal moves of every player (HLE: empty for all but the current player)."""
        cfg, s = self.config, self.state
        P, R = cfg.players, cfg.ranks
        own = s.hand[self._ar, s.cur]  # [B, H]
        has = own >= 0
        targets = s.hand[self._ar[:, None], (s.cur[:, None] + self._offsets) % P]  # [B, P-1, H]
        tv = targets >= 0
        colours = ((targets // R)[..., None] == self._arC) & tv[..., None]  # [B, P-1, H, C]
        ranks = ((targets % R)[..., None] == self._arR) & tv[..., None]  # [B, P-1, H, R]
        can_hint = (s.info > 0)[:, None]
        legal_cur = torch.cat([has & (s.info < cfg.max_information_tokens)[:, None], has,
                               colours.any(2).flatten(1) & can_hint, ranks.any(2).flatten(1) & can_hint], 1)
        self._legal_cur = legal_cur  # [B, M]
        return legal_cur[:, None, :] & (self._arP == s.cur[:, None])[..., None]

    def observe(self) -> Tensor:
        """[B, P, O] HLE canonical observation vector of every player (observer-relative seats)."""
        cfg, s = self.config, self.state
        B, P, H, C, R = self.batch_size, cfg.players, cfg.hand, cfg.colors, cfg.ranks
        rel = self._rel_all
        valid = s.hand >= 0  # [B, P, H]
        card_oh = s.hand[..., None] == self._arK  # [B, P, H, K]
        hands = card_oh[:, rel[:, 1:]].reshape(B, P, -1)  # [B, P, (P-1)*H*K] other players' cards
        missing = (~valid).any(2)[:, rel]  # [B, P, P]
        board = torch.cat([self._arDeck < (cfg.deck_size - s.deck_pos)[:, None],
                           ((s.fireworks - 1)[..., None] == self._arR).flatten(1),
                           self._arI < s.info[:, None], self._arL < s.life[:, None],
                           s.discards[:, self._slot_card] > self._slot_copy], 1)  # [B, board + D]
        has = s.last_move >= 0
        lm = s.last_move.clamp(min=0)
        ltype = self._mtype[lm]
        is_hint, is_pd = has & (ltype >= 2), has & (ltype <= 1)
        target = (s.last_player + self._moff[lm].clamp(min=0)) % P
        seat_oh = self._arP[None, :, None]  # observer o along dim 1, relative seat along dim 2
        player_rel = ((s.last_player[:, None, None] - seat_oh) % P == self._arP) & has[:, None, None]
        target_rel = ((target[:, None, None] - seat_oh) % P == self._arP) & is_hint[:, None, None]
        type_oh = (self._ar4 == self._type_code[ltype][:, None]) & has[:, None]
        detail = torch.cat([(self._arC == self._mcol[lm][:, None]) & has[:, None],
                            (self._arR == self._mrank[lm][:, None]) & has[:, None],
                            s.last_reveal & is_hint[:, None],
                            (self._arH == self._mcard[lm][:, None]) & is_pd[:, None],
                            self._arK == s.last_card[:, None],
                            torch.stack([s.last_scored, s.last_info], 1) & has[:, None]], 1)
        parts = [hands, missing, board[:, None].expand(B, P, -1), player_rel,
                 type_oh[:, None].expand(B, P, -1), target_rel, detail[:, None].expand(B, P, -1)]
        if cfg.observation_type != "minimal":
            plaus = (s.colour_plausible[..., :, None] & s.rank_plausible[..., None, :]).flatten(3)  # [B,P,H,K]
            know = torch.cat([plaus, ((s.hand // R)[..., None] == self._arC) & s.colour_hinted[..., None],
                              ((s.hand % R)[..., None] == self._arR) & s.rank_hinted[..., None]], 3)
            parts.append((know & valid[..., None])[:, rel].reshape(B, P, -1))  # [B, P, P*H*(K+C+R)]
        return torch.cat([p.to(self.obs_dtype) for p in parts], 2)
