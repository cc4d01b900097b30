"""Playing fixed policies: exact-seat games between any policies, greedy or sampled, with mean and standard
error; the symmetriser of a policy over a set of Dec-POMDP symmetries.

An ``Agent`` is what sits in one seat: a single-seed network (``ActorCritic`` with S = 1), optionally
symmetrised. ``play(agents, config, games)`` plays ``games`` complete episodes with ``agents[i]`` in seat i of
the env of ``config`` and returns the mean team return and its standard error.

The symmetriser of ``Agent(net, symmetries, average)`` over a set Phi of symmetries (``Symmetry``: phi(pi)(a | o)
= pi(phi_A(a) | phi_O(o)), ``action_map`` as phi_A), one of two quantities:

* ``average="logits"`` (the default; the official code's ``SymmetrizedIPPOAgent``): the logits at o are
  1/|Phi| sum_phi l(phi_O(o))[phi_A(.)], the mean of pi's *unmasked* logits l, mapped back; illegal actions are
  masked afterwards. Its policy is softmax of a mean, not a mean of policies.
* ``average="probabilities"`` (the paper's symmetriser S(pi) = 1/|Phi| sum_phi phi(pi), and ers-exact's
  ``symmetrise``): the distribution at o is 1/|Phi| sum_phi phi(pi)(. | o), each phi(pi)(. | o) the masked
  softmax of the mapped-back logits under o's legal mask (every action allowed for an agent with none, the
  Hanabi waiting player: ``policy_mask``). ``Agent.logits`` returns its log, so sampling and argmax draw from
  the averaged distribution itself.

Both keep one recurrent state per phi and seat (the net runs on the |Phi| mapped observation streams).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from ers_deep.envs.base import BatchedEnv, step_legal
from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets import ActorCritic, NetState, masked_logits, policy_mask, sample
from ers_deep.nets.layers import frozen_limbs
from ers_deep.train.config import TrainConfig, make_env

__all__ = ["AVERAGES", "Agent", "Average", "play"]

#: what the symmetriser averages over Phi (module docstring): the official code's logits or the paper's policies
Average = Literal["logits", "probabilities"]
AVERAGES: tuple[str, ...] = get_args(Average)

#: safety bound on the steps of one evaluation (the longest episodes here: Overcooked V2, 400 steps)
MAX_STEPS = 10_000


@dataclass(frozen=True)
class Agent:
    """A single-seed network in one seat, optionally symmetrised over ``symmetries`` by averaging ``average``
    (module docstring; without symmetries the two are the same policy, pi)."""

    net: ActorCritic
    symmetries: tuple[Symmetry, ...] = ()
    average: Average = "logits"

    def __post_init__(self) -> None:
        if self.average not in AVERAGES:
            raise ValueError(f"average={self.average!r}: choose one of {', '.join(AVERAGES)}")

    @property
    def group(self) -> int:
        return max(1, len(self.symmetries))

    def initial_state(self, n: int, device: torch.device) -> NetState:
        """The net's state of n seats' worth of actors (x |Phi| when symmetrised: one per phi and seat)."""
        return self.net.initial_state(n * self.group, device)

    @torch.no_grad()
    def logits(
        self, obs: Tensor, first: Tensor, hidden: NetState, legal: Tensor | None = None
    ) -> tuple[Tensor, NetState]:
        """Logits [n, A] for observations [n, *O] (episode-start flags ``first`` [n]) whose softmax under the
        legal mask ``legal`` [n, A] is the agent's policy, and the state after the step. Unmasked for pi and
        the logit average; for the probability average log S(pi)(. | o) (-inf on illegal actions), which needs
        ``legal`` (``ValueError`` without it)."""
        if not self.symmetries:
            out, _, h = self.net(obs[None, None], first[None, None], hidden)
            return out[0, 0], h
        G, n = len(self.symmetries), obs.shape[0]
        mapped = torch.cat([s.apply_obs(obs) for s in self.symmetries])  # [G*n, *O]
        out, _, h = self.net(mapped[None, None], first.repeat(G)[None, None], hidden)
        out = out[0, 0].view(G, n, -1)
        back = [out[g].index_select(-1, s.action_map.to(out.device)) for g, s in enumerate(self.symmetries)]
        if self.average == "logits":
            return torch.stack(back).mean(0), h
        if legal is None:
            raise ValueError("the probability average of the symmetriser needs the legal mask")
        mask = policy_mask(legal.to(out.device))
        probs = torch.softmax(masked_logits(torch.stack(back).double(), mask), -1).mean(0)  # S(pi)(. | o)
        return probs.log().to(out.dtype), h


@torch.no_grad()
def play(
    agents: Sequence[Agent],
    config: TrainConfig,
    games: int,
    *,
    greedy: bool = False,
    seed: int = 0,
    record: Callable[[Tensor, Tensor, Tensor], None] | None = None,
) -> dict[str, float]:
    """Play ``games`` complete episodes with ``agents[i]`` in seat i; mean team return and standard error. The
    return is the game's: discounted by its discount on a tabular env (sum_t gamma^t r_t, as ers-exact's J and
    the exact scores of ``discovery.scores``), the plain sum (Hanabi's score, Overcooked's deliveries) elsewhere.
    ``record(actions [B, P], acting [B, P], running [B])`` sees every joint step before the env plays it
    (``acting``: the seats whose move counts; ``running``: the games whose first episode is still on)."""
    env = make_env(config, games, seed=seed)
    env.reset(seed=seed)
    P = env.num_agents
    if len(agents) != P:
        raise ValueError(f"the env has {P} seats, got {len(agents)} agents")
    with ExitStack() as scopes:  # the int8 embeddings' limbs once per game set (nets.layers.frozen_limbs)
        for net in {id(a.net): a.net for a in agents}.values():
            scopes.enter_context(frozen_limbs(net))
        return _play(env, agents, games, greedy, seed, record)


def _play(
    env: BatchedEnv,
    agents: Sequence[Agent],
    games: int,
    greedy: bool,
    seed: int,
    record: Callable[[Tensor, Tensor, Tensor], None] | None,
) -> dict[str, float]:
    """``play``'s games on ``env``, reset and seated."""
    dev = env.device
    gen = torch.Generator(device=dev).manual_seed(seed + 1)
    hidden = [a.initial_state(games, dev) for a in agents]
    first = torch.ones(games, dtype=torch.bool, device=dev)
    total = torch.zeros(games, dtype=torch.float64, device=dev)
    finished = torch.zeros(games, dtype=torch.bool, device=dev)
    # a tabular env's ers-exact game: its discount (every game steps in lockstep)
    game = getattr(env, "game", None)
    gamma, weight = (float(game.discount) if game is not None else 1.0), 1.0
    obs, legal = env.observe(), env.legal_mask()  # then each step's own (no re-observation)
    for _ in range(MAX_STEPS):
        acting = legal.any(-1, keepdim=True)
        legal = legal | ~acting
        actions = []
        for i, agent in enumerate(agents):
            logits, hidden[i] = agent.logits(obs[:, i], first, hidden[i], legal[:, i])
            if greedy:
                actions.append(masked_logits(logits, legal[:, i]).argmax(-1))
            else:
                actions.append(sample(logits, legal[:, i], gen)[0])
        joint = torch.stack(actions, 1)
        if record is not None:
            record(joint, acting[..., 0], ~finished)
        out = env.step(joint)
        obs, legal = out.obs, step_legal(env, out)
        total += torch.where(finished, 0.0, weight * out.reward.double())
        weight *= gamma
        finished |= out.done
        first = out.done
        if bool(finished.all()):
            break
    else:
        raise RuntimeError(f"{games} games did not all end within {MAX_STEPS} steps")
    mean = float(total.mean())
    se = float(total.std() / math.sqrt(games)) if games > 1 else float("nan")
    return {"mean": mean, "se": se, "games": games}
