"""Playing fixed policies: exact-seat games between any policies, greedy or sampled, with mean and standard
error; the symmetriser of a policy over a set of Dec-POMDP symmetries.

An ``Agent`` is what sits in one seat: a single-seed network (``ActorCritic`` with S = 1), optionally
symmetrised. ``play(agents, config, games)`` plays ``games`` complete episodes with ``agents[i]`` in seat i of
the env of ``config`` and returns the mean team return and its standard error.

The symmetriser (as the official code's ``cross_play.py``): for a set Phi of symmetries (``IndexSymmetry``),
the logits of the symmetrised policy at observation o are the mean over phi in Phi of the *unmasked* logits
of pi at phi_O(o), mapped back to the original actions (phi_A^-1); illegal actions are masked afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets import ActorCritic, NetState, masked_logits, sample
from ers_deep.train.config import TrainConfig, make_env

__all__ = ["Agent", "play"]

#: safety bound on the steps of one evaluation (the longest episodes here: Overcooked V2, 400 steps)
MAX_STEPS = 10_000


@dataclass(frozen=True)
class Agent:
    """A single-seed network in one seat, optionally symmetrised over ``symmetries``."""

    net: ActorCritic
    symmetries: tuple[Symmetry, ...] = ()

    @property
    def group(self) -> int:
        return max(1, len(self.symmetries))

    def initial_state(self, n: int, device: torch.device) -> NetState:
        """The net's state of n seats' worth of actors (x |Phi| when symmetrised: one per phi and seat)."""
        return self.net.initial_state(n * self.group, device)

    @torch.no_grad()
    def logits(self, obs: Tensor, first: Tensor, hidden: NetState) -> tuple[Tensor, NetState]:
        """Unmasked logits [n, A] for observations [n, *O] (episode-start flags ``first`` [n]) and the state
        after the step."""
        if not self.symmetries:
            out, _, h = self.net(obs[None, None], first[None, None], hidden)
            return out[0, 0], h
        G, n = len(self.symmetries), obs.shape[0]
        mapped = torch.cat([s.apply_obs(obs) for s in self.symmetries])  # [G*n, *O]
        out, _, h = self.net(mapped[None, None], first.repeat(G)[None, None], hidden)
        out = out[0, 0].view(G, n, -1)
        back = [out[g].index_select(-1, s.action_map.to(out.device)) for g, s in enumerate(self.symmetries)]
        return torch.stack(back).mean(0), h


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
    """Play ``games`` complete episodes with ``agents[i]`` in seat i; mean team return and standard error.
    ``record(actions [B, P], acting [B, P], running [B])`` sees every joint step before the env plays it
    (``acting``: the seats whose move counts; ``running``: the games whose first episode is still on)."""
    env = make_env(config, games, seed=seed)
    env.reset(seed=seed)
    P, dev = env.num_agents, env.device
    if len(agents) != P:
        raise ValueError(f"the env has {P} seats, got {len(agents)} agents")
    gen = torch.Generator(device=dev).manual_seed(seed + 1)
    hidden = [a.initial_state(games, dev) for a in agents]
    first = torch.ones(games, dtype=torch.bool, device=dev)
    total = torch.zeros(games, dtype=torch.float64, device=dev)
    finished = torch.zeros(games, dtype=torch.bool, device=dev)
    for _ in range(MAX_STEPS):
        obs, legal = env.observe(), env.legal_mask()
        acting = legal.any(-1, keepdim=True)
        legal = legal | ~acting
        actions = []
        for i, agent in enumerate(agents):
            logits, hidden[i] = agent.logits(obs[:, i], first, hidden[i])
            if greedy:
                actions.append(masked_logits(logits, legal[:, i]).argmax(-1))
            else:
                actions.append(sample(logits, legal[:, i], gen)[0])
        joint = torch.stack(actions, 1)
        if record is not None:
            record(joint, acting[..., 0], ~finished)
        out = env.step(joint)
        total += torch.where(finished, 0.0, out.reward.double())
        finished |= out.done
        first = out.done
        if bool(finished.all()):
            break
    else:
        raise RuntimeError(f"{games} games did not all end within {MAX_STEPS} steps")
    mean = float(total.mean())
    se = float(total.std() / math.sqrt(games)) if games > 1 else float("nan")
    return {"mean": mean, "se": se, "games": games}
