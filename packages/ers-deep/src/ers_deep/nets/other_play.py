"""The other-play actor-critic (paper eq. other-play): a trainable net pi that every actor plays through a
symmetry phi drawn from a set Phi (identity included) at the start of each of its episodes, so the learner
maximises E_phi J(pi, phi(pi)) -- each agent of each game draws its own phi, as the official code does.

    logits(a | o) = pi_logits(phi_O(o))[phi_A(a)]     (phi(pi)(a | o) = pi(action_map[a] | phi_O(o)))

The symmetries are anything with ``apply_obs`` and ``action_map`` (``ers_deep.envs.symmetry.Symmetry``): the
env's Dec-POMDP symmetries (Hanabi colour permutations, the Overcooked V2 flip) or learned ER symmetries.
phi_O(o) per entry: index symmetries by one gather of every entry; learned ones (real-valued outputs, so the
mapped observations are float even where the env's are uint8) on each phi's selected entries, or ``grouped``
(``nets.grouped``: no host sync).

Per-episode draws without extra learner state: the state the learner carries for every actor
(``NetState``) holds pi's own state (``gru``) and the actor's index n (``actor``) and episodes started
(``episode``); the draw of actor n of seed s in its e-th episode is a fixed integer hash of (s, n, e), so the rollout and
the PPO update (which replays the stored first-flags from the state before the rollout) see the same phi.
With Phi = {identity} the net is pi itself (tests: OP with the identity set equals self-play).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets.actor_critic import ActorCritic, take_rows
from ers_deep.nets.grouped import StackedMaps, grouped_obs_map, stack_maps
from ers_deep.nets.phi import ObsMap
from ers_deep.nets.state import NetState

__all__ = ["OtherPlayNet", "episode_hash"]

_MASK = (1 << 31) - 1
#: entries mapped at once by ``OtherPlayNet.stored_inputs`` (bounds the grouped path's temporaries)
STORE_CHUNK = 1 << 16


def _mix(x: Tensor) -> Tensor:
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK
    return x ^ (x >> 16)


def episode_hash(key: Tensor, episode: Tensor, purpose: int, salt: int = 0) -> Tensor:
    """A fixed pseudo-random integer in [0, 2^31) per (key, episode, purpose, salt) (int64 tensors)."""
    return _mix(_mix(_mix(key.long() + salt * 7919) + episode.long()) + purpose)


class OtherPlayNet(ActorCritic):
    """pi played through a per-actor, per-episode symmetry of ``symmetries``; ``base`` is pi (S seeds).
    ``grouped``: learned symmetries (``ObsMap`` s over the flat observation, beside index ones) run sorted into
    blocks (``nets.grouped``: no host sync, so the net is ``traceable``; ~1.5x their work), not each on its
    selected entries (a sync per symmetry); other-play picks it on CUDA (``ers_deep.other_play.op_net``)."""

    def __init__(
        self, base: ActorCritic, symmetries: Sequence[Symmetry], salt: int = 0, grouped: bool = False
    ) -> None:
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
        # each seed's own key: stacked seeds (and the agents of a ZSC population, trained as seeds of one pool)
        # draw independent phi sequences (before 2026-12-07 every seed drew the same one per actor and episode)
        keys = episode_hash(torch.tensor(self.seeds, dtype=torch.long), torch.zeros(len(self.seeds)), 11)
        self.register_buffer("seed_keys", keys.view(-1, 1, 1) << 20, persistent=False)
        # all index symmetries (Dec-POMDP ones): one batched gather instead of a masked pass per phi
        gathers = [g for s in self.symmetries if isinstance(g := getattr(s, "obs_index", None), Tensor)]
        stacked = (
            torch.stack([g.long().cpu() for g in gathers]) if len(gathers) == len(self.symmetries) else None
        )
        self.register_buffer("obs_indices", stacked, persistent=False)
        found = (
            _grouped_maps(self.symmetries, math.prod(base.obs_shape)) if grouped and stacked is None else None
        )
        #: the grouped path's depth (0: not taken) and output ReLU; its tensors are buffers (frozen: moved with the
        #: net, not in its state_dict or parameters)
        self.phi_layers = 0 if found is None else found.layers
        self.phi_relu_output = found is not None and found.relu_output
        for name, t in (found.buffers if found is not None else {}).items():
            self.register_buffer(name, t, persistent=False)
        # index symmetries map every entry in one gather; learned ones either run on their selected entries (a
        # sync) or, ``grouped``, sorted into blocks (``nets.grouped``; more work, no sync)
        self.traceable = base.traceable and (stacked is not None or self.phi_layers > 0)
        #: ``on_stored_inputs``'s twin: its observations are phi_O(o) already (``stored_inputs``)
        self.premapped = False

    action_maps: Tensor
    seed_keys: Tensor  # [S, 1, 1]: each seed's hash, shifted clear of the actor ids
    obs_indices: Tensor | None  # [G, prod(obs_shape)] when every symmetry is an IndexSymmetry
    phi_index: Tensor  # the grouped path's buffers (_grouped_maps)
    phi_learned: Tensor
    phi_slot: Tensor

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
        """[S, T, N] index into ``symmetries`` of every entry (fixed per actor and episode): the hash of (the seed,
        actor n, its episode index at step t = ``state.episode`` + the episode starts up to t)."""
        assert state.actor is not None and state.episode is not None, "other-play's state (initial_state)"
        actor = (state.actor[:, None] + self.seed_keys).expand_as(first)
        episode = state.episode[:, None] + first.long().cumsum(1)
        return episode_hash(actor, episode, 7, self.salt) % len(self.symmetries)

    def _grouped(self, flat: Tensor, code: Tensor) -> Tensor:
        """phi_O(o) of every entry's symmetry ``code`` without a sync: the index symmetries by one gather, the
        learned ones (``_grouped_maps``) by ``nets.grouped.grouped_obs_map``; [M, n] float."""
        x = flat.float()
        maps = StackedMaps(
            tuple(getattr(self, f"phi_weight_{k}") for k in range(self.phi_layers)),
            tuple(getattr(self, f"phi_bias_{k}") for k in range(self.phi_layers)),
            self.phi_relu_output,
        )
        learned = grouped_obs_map(maps, x, self.phi_slot[code])
        return torch.where(self.phi_learned[code, None], learned, x.gather(1, self.phi_index[code]))

    def _map(self, flat_obs: Tensor, flat_code: Tensor) -> Tensor:
        """phi_O(o) of every entry [M, *O] under its symmetry ``flat_code`` [M] ([M, ...], M x prod(O) values)."""
        if self.obs_indices is not None:  # obs of the mapped game: flat[obs_index] per entry
            return flat_obs.flatten(1).gather(1, self.obs_indices[flat_code])
        if self.phi_layers:
            return self._grouped(flat_obs.flatten(1), flat_code)
        # a learned phi_O's output is real-valued: never cast it back to an integer observation dtype
        dtype = flat_obs.dtype if flat_obs.is_floating_point() else torch.float32
        mapped = flat_obs.to(dtype, copy=True)
        for g, sym in enumerate(self.symmetries):
            sel = flat_code == g
            if bool(sel.any()):
                mapped[sel] = sym.apply_obs(flat_obs[sel]).to(dtype)
        return mapped

    def stored_inputs(self, obs: Tensor, first: Tensor, state: NetState) -> Tensor:
        """With learned symmetries, phi_O(o) of every entry of a rollout ([S, T, N, *O], float; in chunks of
        ``STORE_CHUNK`` entries) for ``on_stored_inputs()``: once per rollout, as the official code stores o' in
        its transitions, where the update mapped every minibatch in every epoch again (on the CPU, Hanabi-Full with
        12 learned phi: phi_O was over half of the update). Index symmetries: ``obs`` (a gather per minibatch)."""
        if self.obs_indices is not None or self.premapped:
            return obs
        code = self.draws(state, first).reshape(-1)
        flat = obs.reshape(-1, *self.obs_shape)
        dtype = obs.dtype if obs.is_floating_point() else torch.float32
        out = torch.empty(flat.shape[0], math.prod(self.obs_shape), dtype=dtype, device=obs.device)
        for i in range(0, flat.shape[0], STORE_CHUNK):
            out[i : i + STORE_CHUNK] = self._map(
                flat[i : i + STORE_CHUNK], code[i : i + STORE_CHUNK]
            ).flatten(1)
        return out.view(*obs.shape[:3], *self.obs_shape)

    def on_stored_inputs(self) -> ActorCritic:
        """The twin that reads ``stored_inputs`` (phi_O already applied; the draws still pick phi_A): the same
        modules and parameters, and traceable wherever pi is (no phi_O, so none of its syncs)."""
        if self.obs_indices is not None or self.premapped:
            return self
        twin = copy.copy(self)  # shares the parameter, buffer and module dicts
        twin.premapped, twin.traceable = True, self.base.traceable
        return twin

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
        mapped = flat_obs if self.premapped else self._map(flat_obs, flat_code)
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


class _GroupedMaps(NamedTuple):
    buffers: dict[str, Tensor]
    layers: int
    relu_output: bool


def _grouped_maps(symmetries: Sequence[Symmetry], n: int) -> _GroupedMaps | None:
    """The buffers of ``OtherPlayNet``'s grouped path (on the CPU), or None where some symmetry is neither an
    index map nor a learned ``ObsMap`` over the flat observation, or the learned maps differ in depth:
    ``phi_index`` [G, n] (the index maps; the identity for learned ones), ``phi_learned`` [G] (bool),
    ``phi_slot`` [G] (each learned one's candidate), ``phi_weight_k`` / ``phi_bias_k`` (``nets.grouped.stack_maps``)."""
    index: list[Tensor] = []
    slot: list[int] = []
    learned: list[ObsMap] = []
    for sym in symmetries:
        gather, obs_map = getattr(sym, "obs_index", None), getattr(sym, "obs_map", None)
        if isinstance(gather, Tensor):
            index.append(gather.long().cpu())
            slot.append(-1)
        elif isinstance(obs_map, ObsMap) and getattr(sym, "lift", None) is None and obs_map.size == n:
            index.append(torch.arange(n))
            slot.append(len(learned))
            learned.append(obs_map)
        else:
            return None
    stacked = stack_maps(learned) if learned else None
    if stacked is None:
        return None
    slots = torch.tensor(slot)
    buffers = {"phi_index": torch.stack(index), "phi_learned": slots >= 0, "phi_slot": slots.clamp(min=0)}
    for k, (w, b) in enumerate(zip(stacked.weights, stacked.biases)):
        buffers[f"phi_weight_{k}"], buffers[f"phi_bias_{k}"] = w.cpu(), b.cpu()
    return _GroupedMaps(buffers, len(stacked.weights), stacked.relu_output)
