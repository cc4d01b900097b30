"""What every player of ``ers_deep.envs.hanabi.HanabiEnv`` sees and may do (a mixin: ``HanabiObservation``):
HLE's ``CanonicalObservationEncoder`` vector of every player, with the plausible-card features either HLE's bits
or JaxMARL's V0 belief (``HanabiEnv(knowledge=)``), and the legal moves of the player to move (HLE's
``LegalMoves``; ``HanabiEnv.legal_mask``)."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor

from ers_deep.envs.hanabi.state import HanabiState

#: the plausible-card features of the observation: HLE's bits or JaxMARL's V0 belief (``HanabiEnv(knowledge=)``)
Knowledge = Literal["plausible", "v0-belief"]


class HanabiObservation:
    """``observe``: HLE's canonical observation of every player of a ``HanabiEnv`` state; the legal moves of
    its players (the current player's, per player)."""

    config: Any
    state: HanabiState
    batch_size: int
    device: torch.device
    obs_dtype: torch.dtype
    knowledge: Knowledge
    _t: dict[str, Tensor]
    _ar: Tensor
    _layout: Any
    _arP: Tensor
    _arR: Tensor
    _arK: Tensor
    _arI: Tensor
    _arL: Tensor
    _arDeck: Tensor
    _copies: Tensor

    def observe(self, state: HanabiState | None = None) -> Tensor:
        """[B, P, O] HLE canonical observation vector of every player of ``state`` (default ``env.state``;
        observer-relative seats). Eager: written section by section into a byte buffer (fastest on CPU);
        under ``torch.compile``: one concatenation of boolean sections, which fuses into a single kernel (the
        in-place writes compile into one pass over the buffer per section, 10x slower on CPU). The two are
        equal (tested)."""
        s = self.state if state is None else state
        return self._observe_concat(s) if torch.compiler.is_compiling() else self._observe_inplace(s)

    def _shared_bits(self, s: HanabiState) -> Tensor:
        """[B, board + D] bool the sections every player sees alike: deck size, fireworks, information and life
        tokens, discards."""
        cfg, t = self.config, self._t
        return torch.cat(
            [
                self._arDeck < (cfg.deck_size - s.deck_pos)[:, None],
                ((s.fireworks - 1)[..., None] == self._arR).flatten(1),
                self._arI < s.info[:, None],
                self._arL < s.life[:, None],
                s.discards[:, t["slot_card"]] > t["slot_copy"],
            ],
            1,
        )

    def _observe_inplace(self, s: HanabiState) -> Tensor:
        cfg, t, lay = self.config, self._t, self._layout
        B, P, H, K = self.batch_size, cfg.players, cfg.hand, cfg.num_cards
        out = torch.zeros(
            B, P, cfg.obs_size, dtype=torch.uint8, device=self.device
        )  # built as bytes (2x faster)
        rel = t["rel"]  # [P, P]
        others = s.hand[:, rel[:, 1:]].reshape(B, P, -1)  # [B, P, (P-1)*H] cards of seats +1.. per observer
        out[..., : lay.board - P].scatter_(
            2, t["hand_base"] + others.clamp(max=K - 1), (others < K).to(out.dtype)
        )
        out[..., lay.board - P : lay.board] = (s.hand[:, :, -1] == K)[:, rel]  # [B, P, P] hand misses a card
        shared = self._shared_bits(s)  # [B, board + D]
        out[..., lay.board : lay.last_action] = shared[:, None, :]
        mover = (s.last_player[:, None] - self._arP) % P  # [B, P] last mover relative to each observer
        la = out[..., lay.last_action : lay.knowledge]
        la.copy_(t["last_action"][s.last_move[:, None], mover])  # [B, P, LA] static bits of the last move
        o_out = 2 * P + 4 + cfg.colors + cfg.ranks
        la[..., o_out : o_out + H] = s.last_reveal[:, None, :]
        o_card = o_out + 2 * H
        la[..., o_card : o_card + K].scatter_(
            2,
            s.last_card.clamp(max=K - 1)[:, None, None].expand(B, P, 1),
            (s.last_card < K)[:, None, None].expand(B, P, 1).to(out.dtype),
        )
        la[..., o_card + K :] = s.last_flags[:, None, :]
        if cfg.observation_type != "minimal" and self.knowledge == "plausible":
            out[..., lay.knowledge :] = s.knowledge[:, rel].reshape(B, P, -1)  # [B, P, P*H*F]
        if self.knowledge == "v0-belief" and cfg.observation_type != "minimal":
            out = out.to(self.obs_dtype)
            out[..., lay.knowledge :] = self._belief_knowledge(s)
            return out
        return out if self.obs_dtype == torch.uint8 else out.to(self.obs_dtype)

    def _observe_concat(self, s: HanabiState) -> Tensor:
        cfg, t = self.config, self._t
        B, P, H, K = self.batch_size, cfg.players, cfg.hand, cfg.num_cards
        rel = t["rel"]  # [P, P] observer, relative seat -> absolute seat
        others = s.hand[:, rel[:, 1:]].reshape(B, P, -1)  # [B, P, (P-1)*H] cards of seats +1.. per observer
        shared = self._shared_bits(s)  # [B, board + D]
        mover = (s.last_player[:, None] - self._arP) % P  # [B, P] last mover relative to each observer
        static = t["last_action"][s.last_move[:, None], mover]  # [B, P, LA] static bits of the last move
        o_out = 2 * P + 4 + cfg.colors + cfg.ranks
        o_card = o_out + 2 * H
        parts = [
            (others[..., None] == self._arK).flatten(
                2
            ),  # hands: one-hot card per slot (K, "empty", never hits)
            (s.hand[:, :, -1] == K)[:, rel],  # [B, P, P] hand misses a card
            shared[:, None, :].expand(B, P, -1),
            static[..., :o_out],
            s.last_reveal[:, None, :].expand(B, P, H),  # slots the last hint revealed
            static[..., o_out + H : o_card],
            (s.last_card[:, None] == self._arK)[:, None, :].expand(B, P, K),  # card played/discarded
            s.last_flags[:, None, :].expand(B, P, 2),
        ]
        if cfg.observation_type != "minimal" and self.knowledge == "v0-belief":
            parts.append(self._belief_knowledge(s))
        elif cfg.observation_type != "minimal":
            parts.append(s.knowledge[:, rel].reshape(B, P, -1))  # [B, P, P*H*F]
        return torch.cat([p.to(self.obs_dtype) for p in parts], -1)  # no bool output: slow to compile on CPU

    def _belief_knowledge(self, s: HanabiState) -> Tensor:
        """[B, P, P*H*F] the card-knowledge section with JaxMARL's V0 belief in place of the plausible bits:
        b[slot, k] = plausible[slot, k] n_k / sum_k' plausible[slot, k'] n_k', n_k = copies of card k not yet
        discarded or played (``knowledge="v0-belief"``)."""
        cfg = self.config
        B, P, K = self.batch_size, cfg.players, cfg.num_cards
        know = s.knowledge.to(self.obs_dtype)  # [B, P, H, F] absolute seats: each hand's belief once
        played = (s.fireworks[:, :, None] > self._arR).flatten(1)  # [B, C*R]: card c*R + r is on the board
        count = (self._copies - s.discards - played.long()).to(self.obs_dtype)  # [B, K]
        weight = know[..., :K] * count[:, None, None, :]
        total = weight.sum(-1, keepdim=True)
        belief = weight / torch.where(total > 0, total, torch.ones_like(total))
        know = torch.cat([belief, know[..., K:]], -1)[:, self._t["rel"]]  # [B, P, P, H, F] observer-relative
        return know.reshape(B, P, -1)

    def _per_player(self, s: HanabiState, legal_cur: Tensor) -> Tensor:
        """[B, P, M] the current player's legal moves ``legal_cur`` [B, M] in its row, nothing elsewhere."""
        return legal_cur[:, None, :] & (self._arP == s.cur[:, None])[..., None]

    def _legal_current(self, s: HanabiState) -> Tensor:
        """[B, M] bool legal moves of the player to move in every game of ``s``."""
        cfg, t = self.config, self._t
        P, K = cfg.players, cfg.num_cards
        hands = s.hand[self._ar[:, None], t["rel"][s.cur]]  # [B, P, H] mover first, then seats +1, +2, ...
        has = hands[:, 0] < K  # [B, H]
        colours = torch.zeros(self.batch_size, P, cfg.colors + 1, dtype=torch.bool, device=self.device)
        colours.scatter_(2, t["hint_colour"][hands], True)  # [B, P, C+1] colours each seat holds (+ "none")
        ranks = torch.zeros(self.batch_size, P, cfg.ranks + 1, dtype=torch.bool, device=self.device)
        ranks.scatter_(2, t["hint_rank"][hands], True)  # [B, P, R+1]
        can_hint = (s.info > 0)[:, None]
        return torch.cat(
            [
                has & (s.info < cfg.max_information_tokens)[:, None],
                has,
                colours[:, 1:, :-1].flatten(1) & can_hint,
                ranks[:, 1:, :-1].flatten(1) & can_hint,
            ],
            1,
        )
