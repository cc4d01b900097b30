"""Action sources that a ``FastRollout`` calls inside its captured graph.

An actor maps ``(obs [B, P, *O], legal [B, P, A] bool, first [B] bool, carry)`` to ``(actions [B, P] long,
carry, extras)``: ``first`` marks games whose episode starts at this step (reset recurrent state there),
``carry`` is the actor's own state between steps (a dict of tensors, kept in static buffers), ``extras`` are
per-step tensors to record (log-probabilities, values). Every random draw comes from the actor's
``generators``, which the capture registers so that replays draw fresh, reproducible numbers.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ers_deep.envs.base import BatchedEnv
from ers_deep.nets import ActorCritic, NetState, policy_mask, sample

Carry = dict[str, Tensor]


def game_to_actors(x: Tensor, S: int, P: int) -> Tensor:
    """[S*B] per-game entries (episode-start flags) -> [S, N] per actor, N = B x P (actor n = b * P + p)."""
    return x.view(S, -1, 1).expand(S, x.numel() // S, P).reshape(S, -1)


def actors_to_game(x: Tensor, S: int, P: int) -> Tensor:
    """[S, N] per-actor entries equal across a game's agents -> [S*B] per game (the inverse of
    ``game_to_actors``)."""
    return x.view(S, -1, P)[..., 0].reshape(-1)


@runtime_checkable
class Actor(Protocol):
    """What ``FastRollout`` needs from an action source (see the module docstring)."""

    @property
    def generators(self) -> tuple[torch.Generator, ...]: ...

    def initial_carry(self, env: BatchedEnv) -> Carry: ...

    def __call__(
        self, obs: Tensor, legal: Tensor, first: Tensor, carry: Carry
    ) -> tuple[Tensor, Carry, Carry]: ...


class RandomLegal:
    """Uniformly random legal actions (the env benchmarks' source): per agent, the argmax of uniform keys
    over its legal actions (an agent with none, Hanabi's waiting player, gets action 0, which the env
    ignores)."""

    def __init__(self, env: BatchedEnv, seed: int = 1) -> None:
        self.generator = torch.Generator(device=env.device).manual_seed(int(seed))

    @property
    def generators(self) -> tuple[torch.Generator, ...]:
        return (self.generator,)

    def initial_carry(self, env: BatchedEnv) -> Carry:
        return {}

    def sample(self, legal: Tensor) -> Tensor:
        """[B, P] a uniformly random legal action per agent of ``legal`` [B, P, A]."""
        keys = torch.rand(legal.shape, generator=self.generator, device=legal.device)
        return (keys * legal).argmax(-1)

    def __call__(
        self, obs: Tensor, legal: Tensor, first: Tensor, carry: Carry
    ) -> tuple[Tensor, Carry, Carry]:
        return self.sample(legal), carry, {}


class PolicyActor:
    """Samples from an ``ActorCritic`` of S seed stacks over an env of S x B games, the IPPO learner's layout
    (N = B x P actors per seed, parameters shared by the agents): ``ers_deep.nets.sample`` under
    ``policy_mask(legal)`` (the inverse CDF: no host sync), the recurrent state reset where ``first``.

    Carry: the net's state (``NetState``), its fields as ``hidden/<field>`` [S, N, ...] (none for a
    feed-forward net). Extras: ``logp`` and ``value`` [S, N]. The network runs without gradients;
    its parameters must be updated in place (an optimiser step is; replacing a parameter tensor is not seen
    by a captured graph)."""

    def __init__(self, net: ActorCritic, num_seeds: int, generator: torch.Generator) -> None:
        if isinstance(num_seeds, bool) or int(num_seeds) != num_seeds or num_seeds < 1:
            raise ValueError(f"num_seeds must be a whole number >= 1, got {num_seeds!r}")
        self.net, self.S, self.generator = net, int(num_seeds), generator

    @property
    def generators(self) -> tuple[torch.Generator, ...]:
        return (self.generator,)

    def initial_carry(self, env: BatchedEnv) -> Carry:
        if env.batch_size % self.S:  # the games split into S equal blocks, one per seed
            raise ValueError(f"num_seeds = {self.S} must divide the env's batch_size = {env.batch_size}")
        n = env.batch_size * env.num_agents // self.S
        return self.net.initial_state(n, env.device).tensors("hidden/")

    def __call__(
        self, obs: Tensor, legal: Tensor, first: Tensor, carry: Carry
    ) -> tuple[Tensor, Carry, Carry]:
        S, P = self.S, legal.shape[1]
        N = legal.shape[0] * P // S
        first_n = game_to_actors(first, S, P)[:, None]
        with torch.no_grad():
            state = NetState.from_tensors(carry, "hidden/")
            logits, value, state = self.net(obs.reshape(S, 1, N, *obs.shape[2:]), first_n, state)
        action, logp = sample(logits[:, 0], policy_mask(legal.reshape(S, N, -1)), self.generator)  # [S, N]
        return action.reshape(-1, P), state.tensors("hidden/"), {"logp": logp, "value": value[:, 0]}
