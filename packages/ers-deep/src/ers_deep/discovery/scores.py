"""How deep discovery scores its candidates and what it reports (``ers_deep.discovery.run``, steps 3-4): the
objective of a phi over a set of policies (``set_score``: Pi' to rank the candidates, the held-out set for
Table 2; sp: mean J(phi(pi)); xp: mean XP(pi_i, phi(pi_j))) with sampled or exact returns (``Value``:
``sampled_value``, ``exact_value`` on tabular envs), and Table 2's metrics J_1, J_2, J_3 and the relative
reconstruction loss over the held-out policies' self-play (``sample_observations``; the loss is defined in
``ers_deep.discovery.reconstruction``, on tabular envs as ers-exact's)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ers_deep.discovery.net import LearnedSymmetry, compose
from ers_deep.discovery.reconstruction import reconstruction_loss
from ers_deep.envs.base import step_legal
from ers_deep.envs.symmetry import Symmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import masked_logits, policy_mask, sample
from ers_deep.pools import Policy
from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.evaluate import Agent, play
from ers_exact.model.values import expected_return

__all__ = [
    "COMPOSITIONS",
    "Value",
    "composition_tuples",
    "exact_value",
    "group_metrics",
    "sample_observations",
    "sampled_value",
    "set_score",
]


@torch.no_grad()
def sample_observations(policy: Policy, games: int = 64, steps: int = 64, seed: int = 0) -> Tensor:
    """Observations [n, *O] of the acting players in ``policy``'s self-play (``games`` games, ``steps`` steps
    with auto-reset; tabular envs: the one-hot local histories reached, as often as they are reached)."""
    env = make_env(policy.config, games, seed=seed)
    env.reset(seed=seed)
    gen = torch.Generator(device=env.device).manual_seed(seed)
    seen = []
    n = games * env.num_agents
    first = torch.ones(1, 1, n, dtype=torch.bool, device=env.device)
    hidden = policy.net.initial_state(n, env.device)
    obs, legal = env.observe(), env.legal_mask()  # then each step's own (no re-observation)
    for _ in range(steps):
        acting = legal.any(-1)
        seen.append(obs[acting])
        flat = obs.reshape(1, 1, n, *env.obs_shape)
        logits, _, hidden = policy.net(flat, first, hidden)
        action = sample(logits[0, 0], policy_mask(legal).reshape(n, -1), gen)[0].view(acting.shape)
        out = env.step(action)
        obs, legal = out.obs, step_legal(env, out)
        first = out.done[:, None].expand(games, env.num_agents).reshape(1, 1, n)
    return torch.cat(seen)


Value = Callable[[list[Agent]], float]  # agents[i] in seat i -> their mean team return


def sampled_value(cfg: TrainConfig, games: int, seed: int) -> Value:
    """The mean return over ``games`` sampled games (the same games for every candidate: ``seed``)."""
    return lambda agents: float(play(agents, cfg, games, seed=seed)["mean"])


def exact_value(env: TabularEnv) -> Value:
    """The exact return (ers-exact's ``expected_return``) of the policies the agents define on every local
    history of a tabular env: agent i's probabilities, legal-masked, on agent i's histories."""
    obs = env.history_obs()
    K, legal = obs.shape[0], env.legal_table()
    first = torch.ones(K, dtype=torch.bool, device=obs.device)

    def value(agents: list[Agent]) -> float:
        parts = []
        for i, agent in enumerate(agents):
            logits, _ = agent.logits(obs, first, agent.initial_state(K, obs.device), legal)
            probs = torch.softmax(masked_logits(logits.double(), legal), -1)
            parts.append(env.split_policy(probs)[i])
        return float(expected_return(env.tree, tuple(parts)))

    return value


def set_score(sym: Symmetry | None, policies: list[Policy], xp: bool, value: Value) -> float:
    """The objective over ``policies`` (any set: Pi' or the held-out policies): mean J(phi(pi)) (sp) or mean
    XP(pi_i, phi(pi_j)) over i != j (xp): phi(pi_j) in each seat in turn and pi_i in the others (two seats: eq.
    XP, both seat orders), as DiscoveryNet trains. ``discover`` ranks candidates on Pi' and measures Table 2 on
    the held-out policies."""
    P = make_env(policies[0].config, 1, seed=0).num_agents
    syms: tuple[Symmetry, ...] = () if sym is None else (sym,)
    if not xp:
        return float(np.mean([value([Agent(p.net, syms)] * P) for p in policies]))
    if P < 2:
        raise ValueError("cross-play needs two seats or more")
    vals = []
    for a in policies:
        for b in policies:
            if a is not b:
                for seat in reversed(range(P)):
                    vals.append(value([Agent(b.net, syms) if k == seat else Agent(a.net) for k in range(P)]))
    return float(np.mean(vals))


#: the most k-tuples of kept phi (k = 2, 3) J_k averages over, by scoring: every tuple when there are at most
#: this many, else this many distinct ones drawn at random (exact: ers-exact's ``zsc.discovery.group_metrics``; a sampled
#: score costs ``eval_games`` games per held-out policy, so fewer)
COMPOSITIONS = {"exact": 256, "sampled": 6}


def composition_tuples(n: int, k: int, most: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Every ordered k-tuple of range(n) when there are at most ``most`` (k = 1: always), else ``most``
    distinct ones drawn uniformly (without replacement)."""
    if k == 1 or n**k <= most:
        return list(itertools.product(range(n), repeat=k))
    picks = rng.choice(n**k, size=most, replace=False)
    return [tuple(int(i) for i in np.unravel_index(int(p), (n,) * k)) for p in picks]


def group_metrics(
    syms: list[LearnedSymmetry],
    test: list[Policy],
    obs: list[Tensor],
    value: Value,
    seed: int,
    most: int = COMPOSITIONS["exact"],
) -> dict[str, float]:
    """J_1, J_2, J_3 and the relative reconstruction loss on the held-out policies ``test`` (``obs[i]``: the
    observations of ``test[i]``'s self-play, ``sample_observations``). J_k (paper, Table 2) is
    E_{phi_1..phi_k} E_{pi} J((phi_1 o ... o phi_k)(pi)), phi_i uniform over the kept: the mean over every
    k-tuple (J_1: every kept phi), or over ``most`` distinct tuples drawn at random when there are more. The
    loss (``reconstruction.reconstruction_loss``) is the mean over the kept phi and the held-out policies of
    E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau||, tau the acting seats' AOH vectors in pi's self-play, the empty
    ones (||tau|| = 0) left out: on tabular envs the concatenation of one-hot action and one-hot observation per
    step of the local history (as ers-exact; phi_O^2 acts on the observations only, phi_A never enters, so 0
    where phi_O is an involution), on Hanabi and Overcooked V2 the observation vector (it encodes the history),
    mapped twice by phi_O; NaN where no non-empty history was seen (H = 1)."""
    if len(obs) != len(test):
        raise ValueError(f"{len(test)} held-out policies, observations of {len(obs)}")
    rng = np.random.default_rng(seed)
    out: dict[str, float] = {}
    for k in (1, 2, 3):
        tuples = composition_tuples(len(syms), k, most, rng)
        out[f"J_{k}"] = float(
            np.mean([set_score(compose([syms[i] for i in t]), test, False, value) for t in tuples])
        )
    env = make_env(test[0].config, 1, seed=0)
    out["reconstruction_loss"] = reconstruction_loss(syms, obs, env)
    return out
