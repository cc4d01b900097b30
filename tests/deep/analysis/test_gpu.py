"""The analyses on a CUDA device (marker ``gpu``, skipped without CUDA): an Overcooked V2 and a Hanabi policy on
the GPU give distributions and finite OP estimates; the paper's scale is ``scripts/analyses-gpu.sh``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ers_deep.analysis import action_matrix, deep_op_preservation
from ers_deep.crossplay import env_symmetries
from ers_deep.nets import NetConfig, build_net
from ers_deep.pools import Policy
from ers_deep.train.config import make_env, paper_config

pytestmark = pytest.mark.gpu


def _policy(env: str, **over: object) -> Policy:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    cfg = paper_config(env, seeds=(0,), device="cuda", **over)
    probe = make_env(cfg, 1, seed=0)
    net = build_net(cfg.net, [0], probe.obs_shape, probe.num_actions).to("cuda").eval()
    return Policy(net, cfg, 0, f"gpu/{env}")


def test_action_matrix_on_cuda() -> None:
    policy = _policy("overcooked-v2", net=NetConfig(kind="cnn-gru", hidden=32, conv=16))
    m = action_matrix(policy, 64, seed=0)
    assert m["transitions"] == 2 * 399 * 64
    for row in m["probabilities"]:
        assert row[0] is None or math.isclose(sum(row), 1.0, abs_tol=1e-9)


def test_op_preservation_on_cuda() -> None:
    """Hanabi-Small's colour permutations (a group of Dec-POMDP symmetries): OP^Phi(phi(pi)) = OP^Phi(pi)
    up to Monte-Carlo error for any pi."""
    policy = _policy("hanabi", hanabi_preset="Hanabi-Small", net=NetConfig(kind="mlp", hidden=64))
    phis = [s.to("cuda") for s in env_symmetries(policy.config)]
    res = deep_op_preservation([policy], phis, 4096, seed=0)
    op, shifted = res["op"], res["shifted"]
    assert np.isfinite([op["value"], shifted["value"]]).all()
    assert abs(op["value"] - shifted["value"]) <= 5 * math.hypot(op["mc_se"], shifted["mc_se"])
