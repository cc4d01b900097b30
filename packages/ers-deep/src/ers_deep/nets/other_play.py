"""The other-play actor-critic (paper eq. other-play): a trainable net pi that every actor plays through a
symmetry phi drawn from a set Phi (identity included) at the start of each of its episodes, so the learner
maximises E_phi J(pi, phi(pi)) -- each agent of each game draws its own phi, as the official code does.

    logits(a | o) = pi_logits(phi_O(o))[phi_A(a)]     (phi(pi)(a | o) = pi(action_map[a] | phi_O(o)))

The symmetries are anything with ``apply_obs`` and ``action_map`` (``ers_deep.envs.symmetry.Symmetry``): the
env's Dec-POMDP symmetries (Hanabi colour permutations, the Overcooked V2 flip) or learned ER symmetries.

Per-episode draws without extra learner state: the recurrent state the learner carries for every actor is
(pi's own state, actor id, episodes started); the draw of actor n in its e-th episode is a fixed integer hash
of (n, e), so the rollout and the PPO update (which replays the stored first-flags) see the same phi.
With Phi = {identity} the net is pi itself (tests: OP with the identity set equals self-play).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets.actor_critic import ActorCritic

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
        self.hidden_size = base.hidden_size + 2
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

    action_maps: Tensor
    obs_indices: Tensor | None  # [G, prod(obs_shape)] when every symmetry is an IndexSymmetry

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> Tensor:
        """[S, n, H + 2]: pi's zero state, actor ids 0..n-1, no episode started."""
        S = len(self.seeds)
        ids = torch.arange(n, device=device, dtype=torch.float32).expand(S, n)
        return torch.cat(
            [self.base.initial_state(n, device), ids[..., None], torch.zeros(S, n, 1, device=device)], -1
        )

    def draws(self, hidden: Tensor, first: Tensor) -> Tensor:
        """[S, T, N] index into ``symmetries`` of every entry (fixed per actor and episode)."""
        actor = hidden[..., -2].long()[:, None].expand_as(first)
        episode = hidden[..., -1].long()[:, None] + first.long().cumsum(1)
        return episode_hash(actor, episode, 7, self.salt) % len(self.symmetries)

    def forward(self, obs: Tensor, first: Tensor, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        S, T, N = obs.shape[:3]
        H = self.base.hidden_size
        code = self.draws(hidden, first)
        flat_obs, flat_code = obs.reshape(S * T * N, *self.obs_shape), code.reshape(-1)
        if self.obs_indices is not None:  # obs of the mapped game: flat[obs_index] per entry
            mapped = flat_obs.flatten(1).gather(1, self.obs_indices[flat_code])
        else:
            mapped = flat_obs.clone()
            for g, sym in enumerate(self.symmetries):
                sel = flat_code == g
                if bool(sel.any()):
                    mapped[sel] = sym.apply_obs(flat_obs[sel]).to(mapped.dtype)
        logits, value, h = self.base(mapped.view(obs.shape), first, hidden[..., :H])
        idx = self.action_maps[code]  # [S, T, N, A]
        logits = logits.gather(-1, idx)
        counter = hidden[..., -1:] + first.float().sum(1)[..., None]
        return logits, value, torch.cat([h, hidden[..., -2:-1], counter], -1)
