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

import torch
from torch import Tensor

from ers_deep.envs.base import batch_mask, check_batch_size, make_generator, reseed
from ers_deep.envs.hanabi.config import HanabiConfig, resolve_config, step_tables
from ers_deep.envs.hanabi.observe import HanabiObservation, Knowledge
from ers_deep.envs.hanabi.state import HanabiState, HanabiStep, HanabiTransition, IllegalMoveError

__all__ = ["HanabiEnv", "HanabiState", "HanabiStep", "HanabiTransition", "IllegalMoveError"]


class HanabiEnv(HanabiObservation):
    """A batch of B Hanabi games stepped together (follows ``ers_deep.envs.base.BatchedEnv``). Exactly one
    player acts at every step of every game (``one_actor_per_step``: the learner's update then runs the actor
    head on the acting entries only).

    Args:
        config: a ``HanabiConfig``, a preset name (``"Hanabi-Full"``, ``"small"``, ...) or None (2p Full).
        batch_size: B, the number of games.
        device: torch device of every tensor.
        seed: seed of the deal generator (deals are reproducible for the same seed, device and call sequence;
            None: a random seed). ``reset(seed=s)`` re-seeds it, ``reset()`` continues it.
        auto_reset: after a move that ends a game, deal that game anew inside ``step``.
        check_legal: raise ``IllegalMoveError`` on an illegal move (costs one device sync per step).
        obs_dtype: dtype of the observation tensor (the vector is 0/1).
        players: number of players when ``config`` is a preset name or None (default 2); a ``HanabiConfig``
            has its own, and a different value here is a ``ValueError``.
        branch_free: re-deal finished games with ``torch.where`` over a full batch of fresh deals drawn every
            step (no device sync, no data-dependent branch: ``step_state``), instead of indexing only the
            finished rows. None (default): branch-free everywhere but on CPU, where indexing is faster at
            large batches. The two draw different numbers from the generator (the same rules).
        knowledge: the K "plausible card" features of each hand slot in the card-knowledge section.
            ``"plausible"`` (default): HLE's canonical bits (1 where the slot may hold the card given the hints).
            ``"v0-belief"``: JaxMARL's encoding (the env of the JAX anchor): the plausible bits times the copies
            of each card not yet discarded or played, normalised to sum 1 over the slot (0 for an empty slot);
            every other feature unchanged (``tests/deep/envs/hanabi/test_jaxmarl_reference.py``). Needs a
            floating ``obs_dtype``.
    """

    one_actor_per_step = True

    def __init__(
        self,
        config: HanabiConfig | str | None = None,
        batch_size: int = 1,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
        auto_reset: bool = True,
        check_legal: bool = True,
        obs_dtype: torch.dtype = torch.float32,
        players: int | None = None,
        branch_free: bool | None = None,
        knowledge: Knowledge = "plausible",
    ) -> None:
        self.config = cfg = resolve_config(config, players)
        if knowledge not in ("plausible", "v0-belief"):
            raise ValueError(f"knowledge must be 'plausible' or 'v0-belief', not {knowledge!r}")
        if knowledge == "v0-belief" and not obs_dtype.is_floating_point:
            raise ValueError(f"knowledge='v0-belief' needs a floating obs_dtype, not {obs_dtype}")
        self.knowledge = knowledge
        self.batch_size = check_batch_size(batch_size)
        self.device = torch.device(device)
        self.auto_reset, self.check_legal, self.obs_dtype = auto_reset, check_legal, obs_dtype
        self.generator = make_generator(seed, self.device)
        self.num_players, self.hand_size = cfg.players, cfg.hand
        self.num_moves, self.obs_size, self.deck_size = cfg.num_moves, cfg.obs_size, cfg.deck_size
        self._t = {k: torch.as_tensor(v, device=self.device) for k, v in step_tables(cfg).items()}
        dev, P = self.device, cfg.players
        self._ar = torch.arange(self.batch_size, device=dev)  # [B]
        self._arP, self._arH = torch.arange(P, device=dev), torch.arange(cfg.hand, device=dev)
        self._arR, self._arK = torch.arange(cfg.ranks, device=dev), torch.arange(cfg.num_cards, device=dev)
        self._arDeck = torch.arange(cfg.deck_size - P * cfg.hand, device=dev)
        self._arI = torch.arange(cfg.max_information_tokens, device=dev)
        self._arL = torch.arange(cfg.max_life_tokens, device=dev)
        self._layout = cfg.layout
        self.branch_free = self.device.type != "cpu" if branch_free is None else bool(branch_free)
        self._copies = torch.bincount(self._t["full_deck"], minlength=cfg.num_cards)  # [K] copies per card id
        self.state = self._fresh_state(self.random_decks())
        self._legal_cur = torch.zeros(self.batch_size, self.num_moves, dtype=torch.bool, device=dev)  # [B, M]
        self.legal_mask()  # the env is ready to step right after construction (reset() is optional)

    @property
    def num_agents(self) -> int:
        """P, the players."""
        return self.num_players

    @property
    def num_actions(self) -> int:
        """M, the move ids."""
        return self.num_moves

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """(O,), the canonical observation of one player."""
        return (self.obs_size,)

    @property
    def binary_obs(self) -> bool:
        """Every observation entry is 0 or 1: HLE's canonical bits (``knowledge="plausible"``), not the V0
        belief's fractions."""
        return self.knowledge == "plausible"

    @property
    def current_legal(self) -> Tensor:
        """[B, M] bool legal moves of the player to move in every game of ``env.state``: the mask ``step``
        checks (refreshed by ``reset``, ``step`` and ``legal_mask()``). Not a copy."""
        return self._legal_cur

    # ---- deals and resets -----------------------------------------------------------------------------------
    def random_decks(self, n: int | None = None) -> Tensor:
        """[n, D] uniformly shuffled deck orders drawn from the env's generator (n defaults to B)."""
        n = self.batch_size if n is None else n
        return self.decks_from_keys(
            torch.rand(n, self.deck_size, generator=self.generator, device=self.device)
        )

    def decks_from_keys(self, keys: Tensor) -> Tensor:
        """[n, D] deck orders of the uniform sort keys ``keys`` [n, D] (a uniform shuffle per row). The sort is
        stable: float32 keys tie (about 16 ties in 512 games x 420 steps of fresh deals), and an unstable sort
        may order tied keys differently in eager and compiled code (the cause of the compile-graph mismatch)."""
        return self._t["full_deck"][keys.argsort(dim=1, stable=True)]

    def draw_noise(self) -> dict[str, Tensor]:
        """Every random number one branch-free step may use, drawn from the env's generator: ``"deal"`` [B, D]
        sort keys of a fresh deal per game (used where a game ends; nothing without ``auto_reset``)."""
        if not self.auto_reset:
            return {}
        return {
            "deal": torch.rand(self.batch_size, self.deck_size, generator=self.generator, device=self.device)
        }

    def _initial_values(self) -> dict[str, int | bool | Tensor]:
        """Initial value of every state field except the deal (deck, hand)."""
        cfg = self.config
        return dict(
            deck_pos=cfg.players * cfg.hand,
            knowledge=self._t["fresh_knowledge"],
            fireworks=0,
            info=cfg.max_information_tokens,
            life=cfg.max_life_tokens,
            discards=0,
            cur=0,
            turns_left=cfg.players,
            last_move=cfg.num_moves,
            last_player=0,
            last_card=cfg.num_cards,
            last_flags=False,
            last_reveal=False,
            score=0,
            done=False,
            moves=0,
        )

    def _fresh_state(self, decks: Tensor) -> HanabiState:
        """Initial states for the deals ``decks`` [n, D] (start player 0)."""
        cfg, n = self.config, decks.shape[0]
        P, H, F = cfg.players, cfg.hand, cfg.num_cards + cfg.colors + cfg.ranks
        shapes = dict(
            knowledge=(n, P, H, F),
            fireworks=(n, cfg.colors),
            discards=(n, cfg.num_cards),
            last_flags=(n, 2),
            last_reveal=(n, H),
        )
        values = {}
        for name, v in self._initial_values().items():
            shape = shapes.get(name, (n,))
            if isinstance(v, Tensor):
                values[name] = v.expand(shape).clone()
            else:
                values[name] = torch.full(
                    shape, v, dtype=torch.bool if isinstance(v, bool) else torch.long, device=self.device
                )
        return HanabiState(deck=decks, hand=decks[:, : P * H].reshape(n, P, H).clone(), **values)

    def _check_decks(self, decks: Tensor) -> Tensor:
        """``decks`` [n, D] checked, as a tensor of the env's own (the caller's array is never written to)."""
        decks = torch.as_tensor(decks, dtype=torch.long, device=self.device).clone()
        if decks.ndim != 2 or decks.shape[1] != self.deck_size:
            raise ValueError(f"decks must have shape [n, {self.deck_size}], got {tuple(decks.shape)}")
        if not torch.equal(decks.sort(dim=1).values, self._t["full_deck"].expand_as(decks)):
            raise ValueError("every deck must be a permutation of the full deck (config.full_deck())")
        return decks

    def reset(self, seed: int | None = None, *, decks: Tensor | None = None) -> HanabiStep:
        """Deal every game anew (random deals, or the given ``decks`` [B, D]) and return the first
        observation. ``seed`` re-seeds the deal generator first (None: continue it)."""
        reseed(self.generator, seed)
        decks = self.random_decks() if decks is None else self._check_decks(decks)
        self.state = self._fresh_state(decks)
        zeros = torch.zeros(self.batch_size, device=self.device)
        return self._output(zeros, self.state.done.clone(), self.state.score.clone())

    def reset_games(self, mask: Tensor, decks: Tensor | None = None) -> None:
        """Deal the games where ``mask`` [B] is True anew (random deals, or those rows of ``decks`` [B, D]).

        Unless ``branch_free`` only the masked games draw new deals; branch-free (or with ``decks``) a full batch
        is drawn and selected with ``torch.where`` so that no device sync is needed. The legal moves that
        ``step`` checks are those of the new deals afterwards."""
        self._reset_games(mask, decks)
        self.legal_mask()  # refresh the current players' legal moves (``step`` checks against them)

    def _reset_games(self, mask: Tensor, decks: Tensor | None = None) -> None:
        """``reset_games`` without the refresh of the legal-move cache (``step`` refreshes it after)."""
        s, P, H = self.state, self.config.players, self.config.hand
        mask = batch_mask(mask, self.batch_size, self.device)
        if decks is None and not self.branch_free:  # index only the finished games (no sync cost on CPU)
            rows = mask.nonzero().flatten()
            if rows.numel() == 0:
                return
            new = self.random_decks(rows.numel())
            s.deck[rows] = new
            s.hand[rows] = new[:, : P * H].reshape(-1, P, H)
            for name, v in self._initial_values().items():
                getattr(s, name)[rows] = v
            return
        self._redeal(s, mask, self.random_decks() if decks is None else self._check_decks(decks))

    def _redeal(self, s: HanabiState, mask: Tensor, decks: Tensor) -> None:
        """Branch-free: the games of ``s`` where ``mask`` [B] start anew from ``decks`` [B, D] (fields rebound
        or filled in place; the other games are unchanged)."""
        P, H = self.config.players, self.config.hand
        s.deck = torch.where(mask[:, None], decks, s.deck)
        s.hand = torch.where(mask[:, None, None], s.deck[:, : P * H].reshape(-1, P, H), s.hand)
        for name, v in self._initial_values().items():
            old = getattr(s, name)
            m = mask.view(-1, *([1] * (old.ndim - 1)))
            if isinstance(v, Tensor):
                setattr(s, name, torch.where(m, v, old))
            else:
                old.masked_fill_(m, v)

    # ---- the step ---------------------------------------------------------------------------------------------
    def _raise_illegal(self, s: HanabiState, legal_cur: Tensor, actions: Tensor, ok: Tensor) -> None:
        b = int((~ok).nonzero()[0, 0])
        a = int(actions[b])
        if bool(s.done[b]):
            raise IllegalMoveError(f"game {b} is over (auto_reset is off): reset it before moving (move {a})")
        legal = [int(m) for m in legal_cur[b].nonzero().flatten()]
        raise IllegalMoveError(
            f"illegal move {a} {self.config.describe_move(a)} in game {b} for player {int(s.cur[b])}; "
            f"legal moves: {legal} ({', '.join(self.config.describe_move(m) for m in legal)})"
        )

    def _moves(self, s: HanabiState, legal_cur: Tensor, actions: Tensor) -> Tensor:
        """[B] move ids of the players to move: ``actions`` is [B] (their moves) or [B, P] (one per player,
        the current player's is played); checked against ``legal_cur`` [B, M] when ``check_legal``."""
        a = self._select(s, actions)
        if self.check_legal:
            ok = (a >= 0) & (a < self.num_moves) & ~s.done
            ok &= legal_cur.gather(1, a.clamp(0, self.num_moves - 1)[:, None]).squeeze(1)
            if not bool(ok.all()):
                self._raise_illegal(s, legal_cur, a, ok)
        return a.clamp(0, self.num_moves - 1)

    def _select(self, s: HanabiState, actions: Tensor) -> Tensor:
        """[B] the moves of the players to move (``actions`` [B], or [B, P]: the current player's)."""
        a = torch.as_tensor(actions, device=self.device).long()
        shape = list(a.shape)
        if a.ndim == 2 and a.shape[1] == self.num_players:
            a = a.gather(1, s.cur[:, None]).squeeze(1)
        if a.numel() != self.batch_size:  # a reshape's RuntimeError named no argument
            B, P = self.batch_size, self.num_players
            raise ValueError(f"actions must have shape [B] = [{B}] or [B, P] = [{B}, {P}], got {shape}")
        return a.reshape(self.batch_size)

    def step(self, actions: Tensor) -> HanabiStep:
        """Apply moves to every game at once: ``actions`` [B] (move ids of each game's current player) or
        [B, P] (one per player, only the current player's is played). With ``auto_reset`` finished games are
        re-dealt (branch-free: by ``step_state``)."""
        a = self._moves(self.state, self._legal_cur, actions)
        if self.branch_free:
            out, self._legal_cur = self._step_state(self.state, a, self.draw_noise())
            return out
        reward = self._advance(self.state, a)
        done, score = self.state.done.clone(), self.state.score.clone()  # resets below write in place
        if self.auto_reset:
            self._reset_games(done)
        return self._output(reward, done, score)

    def step_state(
        self, state: HanabiState, actions: Tensor, noise: dict[str, Tensor], observe: bool = True
    ) -> HanabiStep:
        """One branch-free step of the games of ``state``, which advances in place (fields may be rebound):
        no legality check, no device sync, no generator (the re-deals of ``auto_reset`` come from ``noise``,
        see ``draw_noise``). What ``step`` runs when ``branch_free``, and what ``ers_deep.accel`` compiles
        and captures. ``actions`` as in ``step`` (assumed legal). ``observe=False``: ``obs`` is empty
        [B, P, 0] (state-only benchmarks)."""
        return self._step_state(state, self._select(state, actions), noise, observe)[0]

    def _step_state(
        self, s: HanabiState, a: Tensor, noise: dict[str, Tensor], observe: bool = True
    ) -> tuple[HanabiStep, Tensor]:
        reward = self._advance(s, a.clamp(0, self.num_moves - 1))
        done, score = s.done.clone(), s.score.clone()
        if self.auto_reset:
            self._redeal(s, done, self.decks_from_keys(noise["deal"]))
        legal_cur = self._legal_current(s)
        legal = self._per_player(s, legal_cur)
        obs = (
            self.observe(s)
            if observe
            else torch.zeros(self.batch_size, self.num_players, 0, device=self.device)
        )
        return HanabiStep(obs, legal, s.cur.clone(), reward, done, score), legal_cur

    def transition(self, state: HanabiState, actions: Tensor) -> HanabiTransition:
        """The pure transition: the move's next state (a copy; no re-deal) and outputs; ``state`` is
        unchanged. ``actions`` as in ``step`` (checked against the legal moves of ``state``)."""
        s = state.clone()
        reward = self._advance(s, self._moves(s, self._legal_current(s), actions))
        return HanabiTransition(s, reward, s.done.clone(), s.score.clone())

    def _advance(self, s: HanabiState, a: Tensor) -> Tensor:
        """Apply the moves ``a`` [B] (legal, clamped) to ``s`` in place; returns the reward [B]."""
        cfg, t, ar = self.config, self._t, self._ar
        P, R, K, D = cfg.players, cfg.ranks, cfg.num_cards, cfg.deck_size
        mt, slot = t["move_type"][a], t["move_slot"][a]
        is_disc, is_play, is_pd, is_hint = mt == 0, mt == 1, mt <= 1, mt >= 2
        cur = s.cur
        s.turns_left = s.turns_left - (s.deck_pos >= D).long()
        seat = (cur + t["move_offset"][a]) % P  # [B] the hand that changes (mover, or hint target)
        hand, know = s.hand[ar, seat], s.knowledge[ar, seat]  # [B, H], [B, H, F]
        # play / discard
        card = hand.gather(1, slot[:, None]).squeeze(1)  # [B] (meaningful where is_pd)
        cc, cr = t["card_colour"][card], t["card_rank"][card]
        playable = s.fireworks.gather(1, cc[:, None]).squeeze(1) == cr
        scored, failed = is_play & playable, is_play & ~playable
        s.fireworks = s.fireworks.scatter_add(1, cc[:, None], scored.long()[:, None])
        completed = scored & (s.fireworks.gather(1, cc[:, None]).squeeze(1) == R)
        gain = (is_disc | completed) & (s.info < cfg.max_information_tokens)
        s.info = s.info + gain.long() - is_hint.long()
        s.life = s.life - failed.long()
        s.discards = s.discards.scatter_add(
            1, card.clamp(max=K - 1)[:, None], (is_disc | failed).long()[:, None]
        )
        # hints: HLE RevealColor / RevealRank on the target hand (a no-op for play / discard)
        hit = t["hits"][a].gather(1, hand)  # [B, H]
        keep = torch.where(hit[..., None], t["keep_hit"][a][:, None], t["keep_miss"][a][:, None])
        know = (know & keep) | (hit[..., None] & t["set_hit"][a][:, None])
        # remove the played/discarded card (later slots shift left), draw the next card into the last slot
        draw = is_pd & (s.deck_pos < D)
        new_card = torch.where(draw, s.deck.gather(1, s.deck_pos.clamp(max=D - 1)[:, None]).squeeze(1), K)
        s.deck_pos = s.deck_pos + draw.long()
        src = torch.where(is_pd[:, None], t["shift"][slot], self._arH)  # [B, H] source column in 0..H
        s.hand[ar, seat] = torch.cat([hand, new_card[:, None]], 1).gather(1, src)
        fresh = t["fresh_knowledge"] & draw[:, None]  # [B, F]
        s.knowledge[ar, seat] = torch.cat([know, fresh[:, None]], 1).gather(1, src[..., None].expand_as(know))
        # last-action bookkeeping, score, end of game
        s.last_move, s.last_player, s.last_card = a, cur, torch.where(is_pd, card, K)
        s.last_flags, s.last_reveal = torch.stack([scored, is_play & gain], 1), hit
        total = s.fireworks.sum(1)
        score = torch.where(s.life > 0, total, 0)
        reward = (score - s.score).to(torch.float32)
        s.score = score
        s.done = (s.life <= 0) | (total >= cfg.max_score) | (s.turns_left <= 0)
        s.cur = (cur + 1) % P
        s.moves = s.moves + 1
        return reward

    # ---- observation and legal moves -------------------------------------------------------------------------
    def _output(self, reward: Tensor, done: Tensor, score: Tensor) -> HanabiStep:
        legal = self.legal_mask()
        return HanabiStep(self.observe(), legal, self.state.cur.clone(), reward, done, score)

    def legal_mask(self, state: HanabiState | None = None) -> Tensor:
        """[B, P, M] bool legal moves of every player of ``state`` (default ``env.state``; HLE: empty for all
        but the current player). For ``env.state`` it also refreshes the current player's mask that ``step``
        checks."""
        s = self.state if state is None else state
        legal_cur = self._legal_current(s)  # [B, M]
        if state is None:
            self._legal_cur = legal_cur
        return self._per_player(s, legal_cur)
