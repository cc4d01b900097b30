"""The other-play actor-critic (paper eq. other-play): a trainable net pi that every actor plays through a
symmetry phi drawn from a set Phi (identity included) at the start of each of its episodes, so the learner
maximises E_phi J(pi, phi(pi)) -- each agent of each game draws its own phi, as the official code does.

    logits(a | o) = pi_logits(phi_O(o))[phi_A(a)]     (phi(pi)(a | o) = pi(action_map[a] | phi_O(o)))

The symmetries are anything with ``apply_obs`` and ``action_map`` (``ers_deep.envs.symmetry.Symmetry``): the
env's Dec-POMDP symmetries (Hanabi colour permutations, the Overcooked V2 flip) or learned ER symmetries.

Per-episode draws without extra learner state: the state the learner carries for every actor
(``NetState``) holds pi's own state (``gru``) and the actor's index n (``actor``) and episodes started
(``episode``); the draw of actor n in its e-th episode is a fixed integer hash of (n, e), so the rollout and
the PPO update (which replays the stored first-flags from the state before the rollout) see the same phi.
With Phi = {identity} the net is pi itself (tests: OP with the identity set equals self-play).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets.actor_critic import ActorCritic, take_rows
from ers_deep.nets.state import NetState

__all__ = ["OtherPlayNet", "episode_hash"]

_MASK = (1 << 31) - 1


def _mix(x: Tensor) -> Tensor:
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK
    return x ^ (x >> 16)


def episode_hash(key: Tensor, episode: Tensor, purpose: int, salt: int = 0) -> Tensor:
    """A fixed pseudo-random integer in [0, 2^31) per (key, episode, purpose, salt) (int64 tensors)."""
    return _mix(_mix(_mix(key.long() + salt * 7919) + episode.long()) + purpose)


class OtherPlayNet(ActorCritic):
    """pi played through a per-actor, per-episode symmetry of ``symmetries``; ``base`` is pi (S seeds)."""

    def __init__(self, base: ActorCritic, symmetries: Sequence[Symmetry], salt: int = 0) -> None:
        super().__init__(base.seeds, base.obs_shape, base.num_actions)
        if not symmetries:
            raise ValueError("other-play needs at least one symmetry (the identity)")
        self.base = base
        self.symmetries = tuple(symmetries)
        self.salt = int(salt)
        self.hidden_size = base.hidden_size
        self.takes_rows = base.takes_rows  # forward_rows through pi's own
        maps = torch.stack([s.action_map.long().cpu() for s in self.symmetries])
        if maps.shape[1] != base.num_actions:
            raise ValueError(f"symmetry action maps have {maps.shape[1]} actions, the net {base.num_actions}")
        self.register_buffer("action_maps", maps)
        # all index symmetries (Dec-POMDP ones): one batched gather instead of a masked pass per phi
        gathers = [g for s in self.symmetries if isinstance(g := getattr(s, "obs_index", None), Tensor)]
        stacked = (
            torch.stack([g.long().cpu() for g in gathers]) if len(gathers) == len(self.symmetries) else None
        )
        self.register_buffer("obs_indices", stacked, persistent=False)
        # index symmetries map every entry in one gather; any other symmetry runs on its selected entries (a sync)
        self.traceable = base.traceable and stacked is not None

    action_maps: Tensor
    obs_indices: Tensor | None  # [G, prod(obs_shape)] when every symmetry is an IndexSymmetry

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> NetState:
        """pi's initial state, ``actor`` = 0..n-1 [S, n], ``episode`` = 0 (none started) [S, n]."""
        S = self.num_seeds
        ids = torch.arange(n, device=device).repeat(S, 1)
        return self.base.initial_state(n, device)._replace(actor=ids, episode=torch.zeros_like(ids))

    def state_from_columns(self, hidden: Tensor) -> NetState:
        """The state stored as one tensor [S, N, H + 2] (checkpoints written before issue 21): pi's state,
        then the actor id and the episodes started in the last two columns (as floats)."""
        return self.base.state_from_columns(hidden[..., :-2])._replace(
            actor=hidden[..., -2].long(), episode=hidden[..., -1].long()
        )

    def draws(self, state: NetState, first: Tensor) -> Tensor:
        """[S, T, N] index into ``symmetries`` of every entry (fixed per actor and episode): the hash of (actor n,
        its episode index at step t = ``state.episode`` + the episode starts up to t)."""
        assert state.actor is not None and state.episode is not None, "other-play's state (initial_state)"
        actor = state.actor[:, None].expand_as(first)
        episode = state.episode[:, None] + first.long().cumsum(1)
        return episode_hash(actor, episode, 7, self.salt) % len(self.symmetries)

    def forward(self, obs: Tensor, first: Tensor, state: NetState) -> tuple[Tensor, Tensor, NetState]:
        return self.forward_rows(obs, first, state, None)

    def forward_rows(
        self, obs: Tensor, first: Tensor, state: NetState, rows: Tensor | None
    ) -> tuple[Tensor, Tensor, NetState]:
        """``forward``; with ``rows`` [S, K] (pi has ``forward_rows``) the logits of those flattened T x N
        entries only, [S, K, A] (see ``FeedForward.forward_rows``)."""
        S, T, N = obs.shape[:3]
        code = self.draws(state, first)
        flat_obs, flat_code = obs.reshape(S * T * N, *self.obs_shape), code.reshape(-1)
        if self.obs_indices is not None:  # obs of the mapped game: flat[obs_index] per entry
            mapped = flat_obs.flatten(1).gather(1, self.obs_indices[flat_code])
        else:
            mapped = flat_obs.clone()
            for g, sym in enumerate(self.symmetries):
                sel = flat_code == g
                if bool(sel.any()):
                    mapped[sel] = sym.apply_obs(flat_obs[sel]).to(mapped.dtype)
        own = state._replace(actor=None, episode=None)  # pi's own state
        idx = self.action_maps[code]  # [S, T, N, A]
        if rows is None:
            logits, value, after = self.base(mapped.view(obs.shape), first, own)
        else:
            logits, value, after = self.base.forward_rows(mapped.view(obs.shape), first, own, rows)  # type: ignore[operator]
            idx = take_rows(idx, rows)
        logits = logits.gather(-1, idx)
        assert state.episode is not None
        return logits, value, after._replace(actor=state.actor, episode=state.episode + first.long().sum(1))
