"""The networks of deep ER-symmetry discovery: learned symmetries as objects, and the composite actor-critic
phi(pi) that PPO trains through frozen pool policies (the paper's Algorithms 1-3; official code: see
``../shared/notes/reference-code-and-jaxmarl.md`` 1.3-1.7).

* :class:`LearnedSymmetry` -- one phi = (phi_O, phi_A): an ``ObsMap`` (a network) and an action map. It has
  ``apply_obs`` and ``action_map`` like ``ers_deep.envs.symmetry.IndexSymmetry``, so the symmetriser
  (``ers_deep.train.evaluate.Agent``), cross-play and other-play take learned and Dec-POMDP symmetries alike:
  phi(pi)(a | o) = pi(action_map[a] | phi_O(o)). :func:`compose` chains them.
* :class:`DiscoveryNet` -- L candidate symmetries trained together (the learner's S = L stacks): candidate l
  acts as phi_l(pi_m) where pi_m is the frozen pool member of the game (member b mod M for game b). Only
  phi_O and a critic (on the raw observation) learn; phi_A is a fixed action map per candidate.

  - ``mode="sp"`` (Algorithm 1, eq. sp-max): every agent of the game plays phi_l(pi_m).
  - with ``earlier`` symmetries and ``compose_prob`` = lambda_1 (Algorithm 2, eq. sp-max-with-reg-stoch):
    per game and episode, with probability lambda_1 both agents play phi_i o phi_l o phi_j (pi_m) with phi_i,
    phi_j drawn uniformly from the earlier symmetries and the identity; ``invertibility`` = lambda_2 adds
    lambda_2 E_o ||o - phi_l(phi_l(o))||^2 to the loss (``auxiliary_loss``).
  - ``mode="xp"`` (Algorithm 3, eq. xp-max): per game and episode one seat plays pi_m and the other
    phi_l(pi_m') with m' != m (both drawn per episode), so the objective is XP(pi_m, phi_l(pi_m')).

Per-episode draws without extra state: the learner carries each actor's state (``NetState``) between steps,
and here that state is the actor's index (``actor`` [L, N]; game = actor // P, seat = actor % P), its episodes
started (``episode`` [L, N]) and the frozen pool members' own state (``gru``, recurrent pools). Every draw is a
fixed integer hash of (game, episode index, purpose), so the rollout and the PPO update see the same draws,
and a resumed run too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets import ActorCritic, NetConfig, NetState, build_net
from ers_deep.nets.other_play import episode_hash
from ers_deep.nets.phi import ObsMap

__all__ = ["DiscoveryNet", "LearnedSymmetry", "Symmetry", "compose", "episode_hash", "stack_nets"]


#: initial bias of every layer of a tabular env's per-observation map (keeps every unit active at the start)
TABULAR_MAP_BIAS = 0.01
#: beta of the softmax that reads a tabular per-observation map's output as a distribution
TABULAR_SHARPNESS = 3.0
#: std of the Gaussian noise added (seeded per candidate) to the last layer of a tabular per-observation map
TABULAR_INIT_NOISE = 1.0

Lift = Callable[[Tensor, Tensor], Tensor]  # (obs maps [L, O, O], action maps [L, A]) -> [L, K, K]


def apply_map(obs_map: ObsMap, x: Tensor, action_maps: Tensor, lift: Lift | None) -> Tensor:
    """x [L, R, n] -> phi_O(x) per candidate: the network itself, or (tabular envs, ``lift`` given) the
    network applied to every one-hot observation, read as a distribution over observations
    (:func:`observation_rows`; so a map cannot sharpen a tabular policy by scaling its one-hot input) and
    lifted to local histories: x @ lift(rows, phi_A)."""
    if lift is None:
        return obs_map(x)
    L, n_o = obs_map.candidates, obs_map.size
    eye = torch.eye(n_o, device=x.device).expand(L, n_o, n_o)
    return torch.bmm(x, lift(observation_rows(obs_map, eye), action_maps).to(x.dtype))


def observation_rows(obs_map: ObsMap, eye: Tensor) -> Tensor:
    """[L, O, O]: row o = softmax(beta phi_O(e_o)), the distribution over the observations o is mapped to
    (tabular envs; beta = ``TABULAR_SHARPNESS``; no row can die, unlike a normalised ReLU output)."""
    return torch.softmax(TABULAR_SHARPNESS * obs_map(eye), -1)


@dataclass(frozen=True, eq=False)
class LearnedSymmetry:
    """phi = (phi_O, phi_A) with phi_O a single-candidate ``ObsMap`` over the flattened observation."""

    obs_map: ObsMap
    action_map: Tensor  # [A] long: phi(pi)(a | o) = pi(action_map[a] | phi_O(o))
    name: str
    obs_shape: tuple[int, ...]
    lift: Lift | None = None  # tabular envs: phi_O acts on one observation, lifted to local histories

    def apply_obs(self, obs: Tensor) -> Tensor:
        """phi_O(o) for observations [n, *O]."""
        n = obs.shape[0]
        with torch.no_grad():
            x = obs.reshape(1, n, -1).float()
            return apply_map(self.obs_map, x, self.action_map[None], self.lift)[0].view(obs.shape)


@dataclass(frozen=True, eq=False)
class _Composed:
    parts: tuple[Symmetry, ...]
    name: str

    @property
    def action_map(self) -> Tensor:
        out = self.parts[0].action_map
        for p in self.parts[1:]:
            out = p.action_map.to(out.device)[out]
        return out

    def apply_obs(self, obs: Tensor) -> Tensor:
        for p in self.parts:
            obs = p.apply_obs(obs)
        return obs


def compose(parts: Sequence[Symmetry]) -> Symmetry:
    """phi_1 o ... o phi_k as one symmetry: phi_1(...phi_k(pi))(a | o) = pi(A_k..A_1(a) | O_k(..O_1(o)))."""
    if not parts:
        raise ValueError("compose() needs at least one symmetry")
    return _Composed(tuple(parts), " o ".join(p.name for p in parts))


def stack_nets(nets: Sequence[ActorCritic], config: NetConfig) -> ActorCritic:
    """M single-seed nets of one architecture as one frozen stacked net (seed slice m = nets[m])."""
    first = nets[0]
    out = build_net(config, list(range(len(nets))), first.obs_shape, first.num_actions)
    keys = first.state_dict().keys()
    out.load_state_dict({k: torch.cat([n.state_dict()[k] for n in nets]) for k in keys})
    out.requires_grad_(False)
    return out


class DiscoveryNet(ActorCritic):
    """phi_l(pi_m) for L candidates over a frozen pool of M policies; see the module docstring."""

    hidden_size = 0  # the pool's GRU state size (set in __init__)
    action_maps: Tensor  # [L, A] buffer
    earlier_maps: Tensor  # [E, A] buffer

    def __init__(
        self,
        seeds: Sequence[int],
        pool: Sequence[ActorCritic],
        pool_net: NetConfig,
        action_maps: Tensor,
        num_agents: int,
        *,
        mode: Literal["sp", "xp"] = "sp",
        earlier: Sequence[LearnedSymmetry] = (),
        compose_prob: float = 0.0,
        invertibility: float = 0.0,
        critic_hidden: int = 128,
        lift: Lift | None = None,
        obs_map_size: int | None = None,
    ) -> None:
        first = pool[0]
        super().__init__(seeds, first.obs_shape, first.num_actions)
        L, A = len(self.seeds), self.num_actions
        if tuple(action_maps.shape) != (L, A):
            raise ValueError(f"action_maps must be [{L}, {A}], got {tuple(action_maps.shape)}")
        if mode == "xp" and len(pool) < 2:
            raise ValueError("xp-max needs at least two pool policies")
        if mode == "xp" and num_agents < 2:
            raise ValueError("xp-max needs two seats or more (one plays pi_m, another phi(pi_m'))")
        self.M, self.P, self.mode = len(pool), int(num_agents), mode
        self.compose_prob, self.invertibility = float(compose_prob), float(invertibility)
        size = int(torch.tensor(first.obs_shape).prod()) if obs_map_size is None else int(obs_map_size)
        self.lift = lift
        # the tabular history lift indexes with numpy on the observed histories (a host sync)
        self.traceable = lift is None and all(p.traceable for p in pool)
        # tabular per-observation maps start with every unit active (see ObsMap: one-hot inputs)
        self.phi = (
            ObsMap(L, size, bias=TABULAR_MAP_BIAS, relu_output=False) if lift is not None else ObsMap(L, size)
        )
        if lift is not None and TABULAR_INIT_NOISE > 0:  # candidates with the same phi_A start apart
            with torch.no_grad():
                last = self.phi.weights[-1]
                for c, seed in enumerate(self.seeds):
                    g = torch.Generator().manual_seed(seed)
                    last[c] += TABULAR_INIT_NOISE * torch.randn(last.shape[1:], generator=g)
        self.pool = stack_nets(pool, pool_net)
        self.hidden_size = self.pool.hidden_size
        critic_cfg = (
            NetConfig(kind="tabular") if pool_net.kind == "tabular" else NetConfig(hidden=critic_hidden)
        )
        self.critic = build_net(critic_cfg, self.seeds, first.obs_shape, A)
        self.register_buffer("action_maps", action_maps.long().clone())
        self.earlier = None
        if earlier:
            # the earlier maps as they were learned: a tabular map's last layer is linear (its rows are softmax
            # of its logits), so rebuilding it with the default ReLU output would clip its negative logits
            relu = {e.obs_map.relu_output for e in earlier}
            if len(relu) != 1:
                raise ValueError("earlier symmetries mix ReLU and linear output layers (maps of other envs)")
            self.earlier = ObsMap(len(earlier), size, relu_output=relu.pop())
            with torch.no_grad():
                for k, e in enumerate(earlier):
                    for dst, src in zip(
                        [*self.earlier.weights, *self.earlier.biases],
                        [*e.obs_map.weights, *e.obs_map.biases],
                    ):
                        dst[k] = src[0]
            self.earlier.requires_grad_(False)
            maps = torch.stack([e.action_map.long().cpu() for e in earlier])
        else:
            maps = torch.zeros(0, A, dtype=torch.long)
        self.register_buffer("earlier_maps", maps)

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> NetState:
        """``actor`` = 0..n-1 [L, n] (actor = game x P + seat), ``episode`` = 0 (none started) [L, n], and the
        frozen pool member's initial state (``gru`` [L, n, H] for recurrent pools)."""
        L = self.num_seeds
        ids = torch.arange(n, device=device).repeat(L, 1)
        pool = self.pool.initial_state(n, device).map(lambda v: v.new_zeros(L, *v.shape[1:]))  # zero h
        return pool._replace(actor=ids, episode=torch.zeros_like(ids))

    def state_from_columns(self, hidden: Tensor) -> NetState:
        """The state stored as one tensor [L, N, 2 + H] (checkpoints written before issue 21): actor id and
        episodes started (as floats) in the first two columns, then the pool's state."""
        gru = hidden[..., 2:] if self.pool.hidden_size else None
        return NetState(gru=gru, actor=hidden[..., 0].long(), episode=hidden[..., 1].long())

    def _draws(self, state: NetState, first: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per entry [L, T, N]: game, seat, episode index and the episode's hash base."""
        assert state.actor is not None and state.episode is not None, "discovery's state (initial_state)"
        actor = state.actor[:, None].expand_as(first)
        episode = state.episode[:, None] + first.long().cumsum(1)
        game, seat = actor // self.P, actor % self.P
        return game, seat, episode, actor

    def _earlier_apply(self, x: Tensor, which: Tensor, use: Tensor) -> Tensor:
        """x [L, R, n] -> earlier symmetry ``which`` [L, R] applied where ``use`` (index E = identity)."""
        assert self.earlier is not None
        E = self.earlier.candidates
        L, R, n = x.shape
        mapped = apply_map(
            self.earlier, x.reshape(1, L * R, n).expand(E, L * R, n), self.earlier_maps, self.lift
        ).view(E, L, R, n)
        pick = mapped.gather(0, which.clamp(max=E - 1)[None, ..., None].expand(1, L, R, n))[0]
        return torch.where((use & (which < E))[..., None], pick, x)

    def forward(self, obs: Tensor, first: Tensor, state: NetState) -> tuple[Tensor, Tensor, NetState]:
        L, T, N = obs.shape[:3]
        A, M, R = self.num_actions, self.M, T * N
        game, seat, episode, _ = self._draws(state, first)
        x = obs.reshape(L, R, -1).float()
        member = game % M
        raw = torch.zeros_like(game, dtype=torch.bool)
        if self.mode == "xp":  # one seat plays pi_m untouched, the other phi(pi_m'), m' != m
            member = episode_hash(game, episode, 1) % M
            other = (member + 1 + episode_hash(game, episode, 2) % (M - 1)) % M
            transformed_seat = episode_hash(game, episode, 3) % self.P
            raw = seat != transformed_seat
            member = torch.where(raw, member, other)
        idx = torch.arange(A, device=obs.device).expand(L, R, A)
        use = torch.zeros(L, R, dtype=torch.bool, device=obs.device)
        if self.earlier is not None and self.compose_prob > 0:
            E = self.earlier.candidates
            use = (episode_hash(game, episode, 4) % 10_000 < int(self.compose_prob * 10_000)).view(L, R)
            i = (episode_hash(game, episode, 5) % (E + 1)).view(L, R)
            j = (episode_hash(game, episode, 6) % (E + 1)).view(L, R)
            x_in = self._earlier_apply(x, i, use)
            ext = torch.cat([self.earlier_maps, torch.arange(A, device=obs.device)[None]])  # E + 1 maps
            idx = torch.where(use[..., None], ext[i], idx)
        else:
            x_in = x
        y = apply_map(self.phi, x_in, self.action_maps, self.lift)
        idx = self.action_maps[:, None, :].expand(L, R, A).gather(-1, idx)
        if self.earlier is not None and self.compose_prob > 0:
            y = self._earlier_apply(y, j, use)
            idx = torch.where(use[..., None], ext[j].gather(-1, idx), idx)
        flat_raw = raw.view(L, R)
        y = torch.where(flat_raw[..., None], x, y)
        idx = torch.where(flat_raw[..., None], torch.arange(A, device=obs.device).expand(L, R, A), idx)
        own = state._replace(actor=None, episode=None)  # the pool members' own state
        logits, pool_state = self._pool_logits(y, first, own, member)
        logits = logits.gather(-1, idx)
        _, value, _ = self.critic(obs, first, self.critic.initial_state(N, obs.device))
        assert state.episode is not None
        after = pool_state._replace(actor=state.actor, episode=state.episode + first.long().sum(1))
        return logits.view(L, T, N, A), value, after

    def _pool_logits(
        self, y: Tensor, first: Tensor, state: NetState, member: Tensor
    ) -> tuple[Tensor, NetState]:
        """Logits [L, T*N, A] of every entry's pool member on the mapped observations y [L, T*N, n], and the
        members' state after the last step (each field [L, N, ...]). Every member runs on every entry (the
        frozen pool is one stacked net); each entry keeps its own member's output. A recurrent member resets at
        episode starts (``first``), before the step, as in training."""
        L, T, N = first.shape
        M, A = self.M, self.num_actions
        seq = y.view(L, T, N, -1).transpose(0, 1).reshape(1, T, L * N, *self.obs_shape)
        starts = first.transpose(0, 1).reshape(1, T, L * N)
        h0 = state.map(
            lambda v: v.reshape(1, L * N, *v.shape[2:]).expand(M, L * N, *v.shape[2:]).contiguous()
        )
        out, _, h = self.pool(seq.expand(M, *seq.shape[1:]), starts.expand(M, T, L * N), h0)
        who = member.view(L, T, N).transpose(0, 1).reshape(1, T, L * N, 1)
        logits = out.gather(0, who.expand(1, T, L * N, A))[0].view(T, L, N, A).transpose(0, 1)
        last = who[:, -1]  # [1, L*N, 1]: the member of each actor's last step

        def own_member(v: Tensor) -> Tensor:  # [M, L*N, *r] -> [L, N, *r]
            rest = v.shape[2:]
            return v.gather(0, last.view(1, L * N, *([1] * len(rest))).expand(1, L * N, *rest))[0].view(
                L, N, *rest
            )

        return logits.reshape(L, T * N, A), h.map(own_member)

    def auxiliary_loss(self, obs: Tensor) -> Tensor:
        """lambda_2 E_o ||o - phi(phi(o))||^2 per candidate [L] (Algorithm 2's invertibility penalty)."""
        if self.invertibility == 0:
            return torch.zeros(obs.shape[0], device=obs.device)  # L from the input: no guard on the seeds
        x = obs.reshape(obs.shape[0], -1, math.prod(self.obs_shape)).float()
        twice = apply_map(
            self.phi, apply_map(self.phi, x, self.action_maps, self.lift), self.action_maps, self.lift
        )
        return self.invertibility * (twice - x).pow(2).sum(-1).mean(1)

    def symmetry(self, index: int, name: str | None = None) -> LearnedSymmetry:
        """Candidate ``index`` as a standalone LearnedSymmetry."""
        return LearnedSymmetry(
            self.phi.select(index),
            self.action_maps[index].clone(),
            name or f"phi-{index}",
            self.obs_shape,
            self.lift,
        )
