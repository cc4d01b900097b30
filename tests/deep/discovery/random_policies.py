"""Random tabular policies for the discovery tests: untrained and far from uniform (logits 2 N(0, 1)), so that
symmetries and compositions change their returns; and hand-built tabular symmetries (``permutation_symmetry``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ers_deep.discovery import LearnedSymmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import ActorCritic, NetConfig, build_net
from ers_deep.nets.phi import ObsMap
from ers_deep.pools import Policy
from ers_deep.train.config import paper_config


def random_tabular_nets(env: TabularEnv, seeds: Sequence[int]) -> list[ActorCritic]:
    """One random tabular net of ``env`` per seed (logits 2 N(0, 1), drawn from seed 100 + s)."""
    nets = []
    for s in seeds:
        net = build_net(NetConfig(kind="tabular"), [s], env.obs_shape, env.num_actions)
        with torch.no_grad():
            g = torch.Generator().manual_seed(100 + s)
            for p in net.parameters():
                p.copy_(2.0 * torch.randn(p.shape, generator=g))
        nets.append(net)
    return nets


def random_tabular_policies(game: str, seeds: Sequence[int]) -> list[Policy]:
    """One random policy of the tabular ``game`` (a built-in name or a .dpomdp path) per seed."""
    cfg = paper_config(f"tabular:{game}", seeds=(0,))
    nets = random_tabular_nets(TabularEnv(game), seeds)
    return [Policy(net, cfg, s, f"random-{s}") for net, s in zip(nets, seeds)]


def permutation_symmetry(
    env: TabularEnv, actions: Sequence[int], observations: Sequence[int], name: str = "phi"
) -> LearnedSymmetry:
    """A tabular learned phi whose phi_O rows are (within e^-30) the observation map o -> observations[o] and whose
    action map is ``actions``."""
    n = env.n_observations
    phi = ObsMap(1, n, relu_output=False)
    with torch.no_grad():
        last = torch.zeros(n, n)
        last[torch.arange(n), torch.tensor(list(observations))] = 10.0  # ObsMap computes x @ W: row o of W
        phi.weights[-1][0] = last
    return LearnedSymmetry(phi, torch.tensor(list(actions)), name, env.obs_shape, env.history_lift)
