"""``ActorCritic.traceable`` (no host synchronisation in the forward: what lets the update compile under "auto"
and the collection and update be captured as CUDA graphs) checked on the CPU by what it promises: a traceable net
compiles as one graph (``fullgraph=True``, where a sync is a graph break, hence an error) and equals its eager
forward; other-play with learned symmetries, which selects each phi's entries (unless grouped, as on CUDA), and
tabular discovery, whose history lift indexes with numpy, do not compile whole and say so. And ``train.learner_setup.net_collect_mode``: such a net's "auto" collection drops the capture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from ers_deep.bench.other_play import near_identity_symmetries
from ers_deep.discovery import DiscoveryNet, compose
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import ActorCritic, NetConfig
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.other_play import op_net, op_symmetries
from ers_deep.train.config import make_env
from ers_deep.train.learner_setup import net_collect_mode
from ers_exact.util.options import UsageError
from tests.deep.discovery.random_policies import random_tabular_nets
from tests.deep.discovery.test_compiled_update import discovery_config, discovery_net
from tests.deep.threads import one_thread  # noqa: F401


def _op(learned: bool) -> ActorCritic:
    cfg = discovery_config()
    net = op_net(cfg, op_symmetries(cfg, "mdp"))
    return OtherPlayNet(net.base, [compose([s]) for s in net.symmetries]) if learned else net


def _tabular_discovery() -> ActorCritic:
    """Discovery on three-lever: phi_O acts on the one-hot history lift (tabular pools, two candidates)."""
    env = TabularEnv("three-lever")
    pool = random_tabular_nets(env, [0, 1])
    maps = torch.tensor([[2, 1, 0], [1, 0, 2]])
    kind = NetConfig(kind="tabular")
    lift, size = env.history_lift, env.n_observations
    return DiscoveryNet((0, 1), pool, kind, maps, env.num_agents, lift=lift, obs_map_size=size)


def _op_grouped() -> ActorCritic:
    """Other-play with learned symmetries (random maps near the identity) grouped, as on CUDA."""
    cfg = discovery_config()
    phi = near_identity_symmetries(cfg, 3)
    return OtherPlayNet(op_net(cfg, phi).base, phi, grouped=True)


NETS: dict[str, Callable[[], ActorCritic]] = {
    "mlp": lambda: _op(False).base,  # type: ignore[attr-defined]
    "op-index": lambda: _op(False),
    "op-learned": lambda: _op(True),
    "op-learned-grouped": _op_grouped,
    "discovery-sp": lambda: discovery_net(discovery_config(), "sp"),
    "discovery-xp": lambda: discovery_net(discovery_config(), "xp"),
    "discovery-composed": lambda: discovery_net(discovery_config(), "sp", compose=True),
    "discovery-tabular": _tabular_discovery,
}


#: the nets with host syncs: other-play's per-phi selection of entries, the tabular history lift's numpy indexing
NOT_TRACEABLE = {"op-learned", "discovery-tabular"}


def _inputs(net: ActorCritic) -> tuple[Any, ...]:
    """Two steps of 8 actors (4 games), an episode starting at each step for half of them: Hanabi-Small's
    observations, or three-lever's one-hot histories for the tabular net."""
    if getattr(net, "lift", None) is not None:
        eye = TabularEnv("three-lever").history_obs()
        one = eye[torch.arange(8) % eye.shape[0]]
    else:
        one = make_env(discovery_config(), 4, seed=0).observe().reshape(8, -1)
    obs = one.reshape(1, 1, 8, -1).expand(net.num_seeds, 2, 8, -1).contiguous()
    first = torch.zeros(net.num_seeds, 2, 8, dtype=torch.bool)
    first[:, 0] = True
    first[:, 1, ::2] = True
    return obs, first, net.initial_state(8)


@pytest.mark.parametrize("name", sorted(NETS))
def test_a_traceable_net_compiles_as_one_graph_and_the_others_do_not(name: str) -> None:
    net = NETS[name]()
    args = _inputs(net)
    with torch.no_grad():
        eager = net(*args)
        whole = torch.compile(net, fullgraph=True, dynamic=False)
        if not net.traceable:
            assert name in NOT_TRACEABLE
            with pytest.raises(Exception, match=r"data-dependent"):  # the sync
                whole(*args)
            return
        compiled = whole(*args)
    assert name not in NOT_TRACEABLE, f"{name} claims no host syncs"
    for a, b in zip(eager[:2], compiled[:2], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_auto_collection_drops_the_capture_for_a_net_with_host_syncs() -> None:
    auto, explicit = discovery_config(), discovery_config(collect_mode="compile-graph")
    learned, index = _op(True), _op(False)
    assert net_collect_mode(auto, "compile-graph", learned) == "compile"
    assert net_collect_mode(auto, "graph", learned) == "eager"
    assert net_collect_mode(auto, "compile", learned) == "compile"
    assert net_collect_mode(auto, "compile-graph", index) == "compile-graph"
    assert net_collect_mode(explicit, "compile-graph", index) == "compile-graph"
    with pytest.raises(UsageError, match="synchronises with the host"):
        net_collect_mode(explicit, "compile-graph", learned)
