"""Other-play with learned symmetries maps a rollout's observations once (``OtherPlayNet.stored_inputs``) and the
PPO update runs the twin that reads them (``on_stored_inputs``), as the official code stores o' in its
transitions; before 2026-12-07 the update mapped every minibatch in every epoch again. Checked against the net
that maps (the reference): the same forward, the same update."""

from __future__ import annotations

import pytest
import torch

from ers_deep.bench.other_play import near_identity_symmetries
from ers_deep.nets import NetConfig
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.other_play import op_net, op_symmetries
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.ippo import Learner
from tests.deep.threads import one_thread  # noqa: F401
from tests.deep.train.twins import max_difference, stagger, trained_params


def _config(env: str, **kw: object) -> TrainConfig:
    base: dict[str, object] = {"num_envs": 16, "num_steps": 16, "minibatches": 2, "seeds": (0, 1)}
    base["total_env_steps"] = 16 * 16 * 3  # the schedules (learning-rate warm-up, anneal) over 3 updates
    if env == "hanabi":
        base |= {"hanabi_preset": "Hanabi-Small", "net": NetConfig(hidden=32)}
    else:
        base |= {"num_envs": 8, "seeds": (0,), "net": NetConfig(kind="cnn-gru", hidden=16, conv=8)}
    return paper_config(env, **{**base, **kw})


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
@pytest.mark.parametrize("grouped", [False, True])
def test_the_twin_on_stored_inputs_equals_the_net_on_the_observations(env: str, grouped: bool) -> None:
    """On a collected rollout (episodes starting mid-rollout: new draws), the twin's logits and values on
    ``stored_inputs`` equal the mapping net's on the observations; the twin shares every parameter, and is
    traceable where pi is (the per-phi path is not)."""
    cfg = _config(env, num_steps=48 if env == "hanabi" else 16)
    phi = near_identity_symmetries(cfg, 3)
    net = OtherPlayNet(op_net(cfg, phi).base, phi, grouped=grouped)
    twin = net.on_stored_inputs()
    assert twin is not net and twin.traceable and net.traceable == grouped
    assert [id(p) for p in twin.parameters()] == [id(p) for p in net.parameters()]
    learner = Learner(cfg, net=net)
    stagger(learner)  # Overcooked V2: episodes end inside the rollout
    ro, _ = learner.collect()
    assert bool(ro.first[:, 1:].any())  # some episode starts inside the rollout
    with torch.no_grad():
        stored = net.stored_inputs(ro.obs, ro.first, ro.hidden0)
        a = net(ro.obs, ro.first, ro.hidden0)
        b = twin(stored, ro.first, ro.hidden0)
    assert stored.dtype == torch.float32 and stored.shape == ro.obs.shape
    assert float((stored - ro.obs.float()).abs().max()) > 1e-3  # the learned maps moved them
    assert float((a[0] - b[0]).abs().max()) < 1e-5 and float((a[1] - b[1]).abs().max()) < 1e-5
    assert twin.on_stored_inputs() is twin and twin.stored_inputs(stored, ro.first, ro.hidden0) is stored


def test_index_symmetries_keep_one_net() -> None:
    """The colour permutations gather per minibatch (cheaper than storing float copies): no twin."""
    cfg = _config("hanabi")
    net = op_net(cfg, op_symmetries(cfg, "mdp"))
    obs = torch.zeros(2, 1, 4, *net.obs_shape)
    first = torch.ones(2, 1, 4, dtype=torch.bool)
    assert net.on_stored_inputs() is net and net.stored_inputs(obs, first, net.initial_state(4)) is obs
    assert Learner(cfg, net=net).update_net is Learner(cfg, net=net).net


@pytest.mark.parametrize("env", ["hanabi", "overcooked-v2"])
def test_the_update_on_stored_inputs_equals_the_update_that_maps_every_minibatch(
    env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parameters after 3 updates (eager) with the stored inputs against the reference, the net that maps
    every minibatch (``on_stored_inputs`` patched to the net itself): within 1e-5; and 1e-4 away from 0 updates."""
    cfg = _config(env, update_mode="eager")
    phi = near_identity_symmetries(cfg, 3)
    learner = Learner(cfg, net=op_net(cfg, phi))
    assert learner.update_net is not learner.net
    staggered = env == "overcooked-v2"
    stored = trained_params(cfg, 3, staggered, op_net(cfg, phi))
    before = trained_params(cfg, 0, staggered, op_net(cfg, phi))
    with monkeypatch.context() as m:
        m.setattr(OtherPlayNet, "on_stored_inputs", lambda self: self)
        assert Learner(cfg, net=op_net(cfg, phi)).update_net.premapped is False
        mapping = trained_params(cfg, 3, staggered, op_net(cfg, phi))
    assert max_difference(stored, mapping) < 1e-5
    assert max_difference(stored, before) > 1e-4
