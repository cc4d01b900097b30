"""The one collection path of every trainer: ``FastCollection.collect(state) -> (rollout, state, stats)``.

A rollout is ``num_steps`` joint steps of the S x B games of the learner's env, driven by the learner's
stacked network (``ers_deep.accel.PolicyActor``: ``ers_deep.nets.sample``, the recurrent state reset where an
episode starts) and run by ``ers_deep.accel.FastRollout`` in the collection mode (``TrainConfig.collect_mode``;
``"auto"``: compile-graph on CUDA, compiled on CPU at the batch sizes where it measured faster, else eager).
The step's own observation and legal moves feed the next step (no re-observation), and the per-step fields
are named, not positional:

=============  ==========================  =================================================================
field          shape (``Rollout``)         what
=============  ==========================  =================================================================
``obs``        [S, T, N, *O]               the actor's input at step t
``legal``      [S, T, N, A] bool           the policy's mask (all True for a player not to move)
``acting``     [S, T, N] bool              the actor's move is played
``first``      [S, T, N] bool              step t starts an episode (the recurrent state resets before it)
``action``     [S, T, N] long              the sampled action
``logp``       [S, T, N]                   log pi(action) at collection
``value``      [S, T, N]                   the critic at collection
``reward``     [S, T, N]                   team reward + the annealed shaped reward (Overcooked V2)
``done``       [S, T, N] bool              the step ended the episode (no bootstrap through it)
=============  ==========================  =================================================================

plus ``hidden0`` (the net's state before step 0: a ``NetState``, named fields [S, N, ...]) and ``last_value``
[S, N]. N = B x P actors per seed, actor n = b * P + p; game g = s * B + b of the env (seed-major).

``RunnerState`` is everything a collection carries from one call to the next besides the env's state and
generators: the episode-start flags, the net's state and the running returns. ``FastCollection`` keeps
it in the fast path's (static) buffers (the state's fields as carry entries ``hidden/<field>``); ``state`` reads it, ``collect(state)`` continues from any state
(``load`` copies it in: resume), so a checkpoint of (env state, generators, ``RunnerState``) restores a
collection exactly, captured or not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from ers_deep.accel import FastRollout, PolicyActor, game_to_actors
from ers_deep.envs.base import BatchedEnv
from ers_deep.nets import ActorCritic, NetState, policy_mask
from ers_deep.nets.switches import ProductSwitches

#: recorded by the fast path: the actor's inputs and outputs and the step's rewards and done flags
RECORD = ("obs", "legal", "first", "action", "logp", "value", "reward", "done")


@dataclass
class Rollout:
    """One collection, time-major per seed: [S, T, N, ...] (see the module docstring)."""

    obs: Tensor
    legal: Tensor
    acting: Tensor
    first: Tensor
    hidden0: NetState
    action: Tensor
    logp: Tensor
    value: Tensor
    reward: Tensor
    done: Tensor
    last_value: Tensor

    def tensors(self) -> dict[str, Tensor]:
        """Every tensor by name, the state's fields as ``hidden0/<field>``."""
        out = {k: v for k, v in vars(self).items() if k != "hidden0"}
        return out | self.hidden0.tensors("hidden0/")

    def clone(self) -> Rollout:
        """A copy (graph modes rewrite a rollout's buffers at the next call)."""
        return Rollout(**{k: v.clone() for k, v in vars(self).items()})

    def to(self, device: torch.device | str) -> Rollout:
        """The rollout on ``device`` (a copy where it moves)."""
        return Rollout(**{k: v.to(device) for k, v in vars(self).items()})


@dataclass
class RunnerState:
    """What a collection carries between calls (besides the env): ``first`` [S*B] bool (the next step starts
    an episode), ``hidden`` (the net's state, ``NetState``), ``ep_return`` / ``ep_shaped`` [S, B] (running team
    and shaped returns of the episodes in progress)."""

    first: Tensor
    hidden: NetState
    ep_return: Tensor
    ep_shaped: Tensor

    def tensors(self) -> dict[str, Tensor]:
        """Every tensor by name, the state's fields as ``hidden/<field>`` (checkpoints' ``runner/...``)."""
        plain = {"first": self.first, "ep_return": self.ep_return, "ep_shaped": self.ep_shaped}
        return plain | self.hidden.tensors("hidden/")

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, Tensor]) -> RunnerState:
        """The inverse of ``tensors``."""
        hidden = NetState.from_tensors(tensors, "hidden/")
        return cls(tensors["first"], hidden, tensors["ep_return"], tensors["ep_shaped"])

    def clone(self) -> RunnerState:
        return RunnerState.from_tensors({k: v.clone() for k, v in self.tensors().items()})


def actor_major(x: Tensor, S: int) -> Tensor:
    """[T, S*B, P, *r] (the fast path's records) -> [S, T, N, *r], a view (N = B x P)."""
    T, SB, P = x.shape[:3]
    return x.view(T, S, SB // S * P, *x.shape[3:]).transpose(0, 1)


def per_actor(x: Tensor, S: int, P: int) -> Tensor:
    """[T, S*B] per-game flags or rewards -> [S, T, N] (every agent of a game gets its game's entry)."""
    T, SB = x.shape
    return x.view(T, SB, 1).expand(T, SB, P).reshape(T, S, SB // S * P).transpose(0, 1)


def running_returns(
    state: RunnerState, team: Tensor, shaped: Tensor | None, done: Tensor
) -> tuple[dict[str, Tensor], RunnerState]:
    """Per seed, the mean team (and shaped) return of the episodes that ended in a rollout (NaN where none
    did) and the running returns after it. ``team`` / ``done`` [T, S, B], ``shaped`` [T, S, B] or None."""
    ret, shp = state.ep_return.clone(), state.ep_shaped.clone()
    ended_ret, ended_shp = [], []
    for t in range(team.shape[0]):  # [S, B] per step: the running sums in the eager order of additions
        if shaped is not None:
            shp += shaped[t]
        ret += team[t]
        ended_ret.append(ret.clone())
        ended_shp.append(shp.clone())
        ret = torch.where(done[t], 0.0, ret)
        shp = torch.where(done[t], 0.0, shp)
    count = done.sum((0, 2)).float()
    stats = {
        "episodes": count,
        "return": (torch.stack(ended_ret) * done).sum((0, 2)) / count,
        "shaped_return": (torch.stack(ended_shp) * done).sum((0, 2)) / count,
    }
    return stats, RunnerState(state.first, state.hidden, ret, shp)


def bootstrap_value(net: ActorCritic, obs: Tensor, first: Tensor, hidden: NetState) -> Tensor:
    """[S, N] the critic's value of the games as they stand after a rollout: ``obs`` [S*B, P, *O], ``first``
    [S*B] (the next step starts an episode), ``hidden`` the net's state (GAE bootstraps from it)."""
    S, P = len(net.seeds), obs.shape[1]
    _, value, _ = net(obs.reshape(S, 1, -1, *obs.shape[2:]), game_to_actors(first, S, P)[:, None], hidden)
    return value[:, 0]


class FastCollection:
    """The learner's collection: ``num_steps`` steps of ``env`` (S x B games) by ``net`` (S seed stacks),
    sampling with ``generator``, through ``FastRollout(mode)``; see the module docstring."""

    def __init__(
        self,
        env: BatchedEnv,
        net: ActorCritic,
        generator: torch.Generator,
        num_steps: int,
        mode: str = "auto",
        shaped_reward: bool = False,
        switches: Callable[[], ProductSwitches] | None = None,
    ) -> None:
        self.env, self.net, self.S = env, net, len(net.seeds)
        # the learner's product switches as they are when ``collect`` enters them (None: the process's)
        self.switches = switches
        self.B, self.P = env.batch_size // self.S, env.num_agents
        record = RECORD + (("shaped_reward",) if shaped_reward else ())
        self.fast = FastRollout(env, PolicyActor(net, self.S, generator), num_steps, mode, record=record)
        zeros = torch.zeros(self.S, self.B, device=env.device)
        self.ep_return, self.ep_shaped = zeros, zeros.clone()

    @property
    def mode(self) -> str:
        return self.fast.mode

    @property
    def state(self) -> RunnerState:
        """The current runner state (views of the fast path's carry; clone to keep)."""
        c = self.fast.carry
        return RunnerState(c["first"], NetState.from_tensors(c, "hidden/"), self.ep_return, self.ep_shaped)

    def restart(self) -> None:
        """Start every game afresh from the env's current state (e.g. after ``env.reset(seed=...)``): the fast
        path's fresh carry (``first`` True, the net's initial state) and zero running returns."""
        self.fast.restart()
        self.ep_return, self.ep_shaped = torch.zeros_like(self.ep_return), torch.zeros_like(self.ep_shaped)

    def load(self, state: RunnerState) -> None:
        """Continue from ``state`` and the env's current state (e.g. both restored from a checkpoint)."""
        carry = self.fast.carry
        if state.first is carry["first"] and state.hidden.is_(NetState.from_tensors(carry, "hidden/")):
            self.ep_return, self.ep_shaped = state.ep_return, state.ep_shaped
            return
        self.fast.restart(first=state.first, **state.hidden.tensors("hidden/"))
        self.ep_return, self.ep_shaped = state.ep_return.clone(), state.ep_shaped.clone()

    @torch.no_grad()
    def collect(
        self, state: RunnerState, shaped_coef: float = 1.0
    ) -> tuple[Rollout, RunnerState, dict[str, Tensor]]:
        """One rollout from ``state``; returns it, the state after it and the ended-episode statistics
        (``shaped_coef``: the weight of Overcooked V2's shaped reward in ``Rollout.reward``). In graph modes the
        rollout's tensors are static buffers that the next call rewrites."""
        self.load(state)
        S, B, P = self.S, self.B, self.P
        hidden0 = NetState.from_tensors(self.fast.carry, "hidden/").clone()
        with self.switches().applied() if self.switches is not None else contextlib.nullcontext():
            rec = self.fast()
            c = self.fast.carry
            last = bootstrap_value(self.net, c["obs"], c["first"], NetState.from_tensors(c, "hidden/"))
        T = rec["done"].shape[0]
        team, done = rec["reward"].view(T, S, B), rec["done"].view(T, S, B)
        shaped = rec["shaped_reward"].view(T, S, B, P).float() if "shaped_reward" in rec else None
        stats, after = running_returns(self.state, team, None if shaped is None else shaped.sum(-1), done)
        reward = per_actor(rec["reward"], S, P)
        if shaped is not None:
            reward = reward + shaped_coef * actor_major(shaped.view(T, S * B, P), S)
        legal = actor_major(rec["legal"], S)
        ro = Rollout(
            obs=actor_major(rec["obs"], S),
            legal=policy_mask(legal),
            acting=legal.any(-1),
            first=per_actor(rec["first"], S, P),
            hidden0=hidden0,
            action=actor_major(rec["action"], S),
            logp=rec["logp"].transpose(0, 1),
            value=rec["value"].transpose(0, 1),
            reward=reward,
            done=per_actor(rec["done"], S, P),
            last_value=last,
        )
        self.ep_return, self.ep_shaped = after.ep_return, after.ep_shaped
        return ro, self.state, stats
