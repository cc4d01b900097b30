"""Which OP reading ers-deep's table1 OP column shows (``op_column_reading`` in table1.json's config): on the
two-round three-lever game with the learned set Phi = {Id, (L1 L2), (L2 L3)} (two lever transpositions, acting
on the partner's observed lever too; not a group: their product, a 3-cycle, is missing), where the two
readings of :data:`ers_exact.deployment.OP_READINGS` differ at n = 2, the column
(``population._op_objective``, the mean over phi of J(pi, phi(pi)) in both seat orders) is the "seatings" value
computed here by hand from the definition with ers-exact's exact values, and not the "per-seat" draw
E_{phi_1, phi_2} J(phi_1(pi)^1, phi_2(pi)^2) the OP agents train on (``op_reading``).

For pi = "always lever 1" the readings have closed forms from the game's rules (reward 1{a^1 = a^2} per round,
2 rounds): phi(pi) always pulls phi(L1), so J(phi_1(pi), phi_2(pi)) = 2 * 1{phi_1(L1) = phi_2(L1)}, and
phi(L1) is L1, L2, L1 over Phi: "seatings" = 2 * 2/3 = 4/3, "per-seat" = 2 * (2^2 + 1^2) / 3^2 = 10/9.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import build_net
from ers_deep.other_play import op_symmetries
from ers_deep.pools import Policy
from ers_deep.train.config import paper_config
from ers_deep.train.exact import tabular_policies
from ers_deep.zsc.population import _op_objective
from ers_exact.deployment import OP_READINGS
from ers_exact.interface import DiscoveryResult
from ers_exact.model.histories import HistoryTree
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.model.values import expected_return
from tests.deep.threads import one_thread  # noqa: F401 (autouse)

SWAPS = ((1, 0, 2), (0, 2, 1))  # (L1 L2), (L2 L3) on actions and on the partner's observed lever
CONFIG = paper_config("tabular:three-lever")


def _learned_set(tmp: Path) -> list[Transformation]:
    """The two transpositions written as an ers-exact discovery result (``--symmetries DIR``): Phi is the
    identity plus each of them."""
    phis = [Transformation((0,), (s, s), (s, s)) for s in SWAPS]
    result = DiscoveryResult("three-lever", "sp-max", tuple(phis), (1.0, 1.0), 1.0, 1.0, 1.0, 1.0, 0.0)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "discovery.json").write_text(json.dumps(result.to_json()))
    return phis


def _policy(logits: torch.Tensor) -> tuple[Policy, TabularEnv, tuple[np.ndarray, ...]]:
    """A tabular policy whose logits at every local history are the rows of ``logits`` [K, 3], and its exact
    joint policy."""
    env = TabularEnv("three-lever")
    net = build_net(CONFIG.net, [0], env.obs_shape, env.num_actions)
    with torch.no_grad():
        w = net.logits.weight  # type: ignore[union-attr]
        w.copy_(logits.reshape(w.shape))
    return Policy(net, CONFIG, 0, "pi"), env, tabular_policies(net, env)[0]


def _by_hand(tree: HistoryTree, pi: tuple[np.ndarray, ...], phis: list[Transformation]) -> dict[str, float]:
    """Both readings of OP at n = 2 from their definitions (OP_READINGS), with Phi = {Id} + ``phis``."""
    images = [pi, *(apply_to_policy(tree, phi, pi) for phi in phis)]
    J = {
        (a, b): float(expected_return(tree, (images[a][0], images[b][1])))
        for a, b in itertools.product(range(len(images)), repeat=2)
    }
    seatings = np.mean([(J[0, k] + J[k, 0]) / 2 for k in range(len(images))])
    hand = {"seatings": float(seatings), "per-seat": float(np.mean(list(J.values())))}
    assert set(hand) == set(OP_READINGS)
    return hand


def test_the_op_column_is_the_seatings_reading_for_always_lever_one(tmp_path: Path) -> None:
    """A deterministic pi (logit 50 on L1 everywhere): no sampling noise, so the column equals the seatings
    value to float precision and misses the per-seat one by 2/9."""
    phis = _learned_set(tmp_path / "phi")
    syms = op_symmetries(CONFIG, str(tmp_path / "phi"))
    assert syms[0].name == "identity" and len(syms) == 3
    K = TabularEnv("three-lever").obs_shape[0]
    policy, env, pi = _policy(torch.zeros(K, 3).index_fill_(1, torch.tensor([0]), 50.0))
    hand = _by_hand(env.tree, pi, phis)
    assert hand == pytest.approx({"seatings": 4 / 3, "per-seat": 10 / 9}, abs=1e-12)  # the closed forms
    column = _op_objective([policy, policy], [syms, syms], 200, seed=3)
    assert column.value == pytest.approx(hand["seatings"], abs=1e-12)
    assert abs(column.value - hand["per-seat"]) > 0.2


def test_the_op_column_is_the_seatings_reading_for_a_stochastic_policy(tmp_path: Path) -> None:
    """A random tabular pi (logits 3 N(0, 1)): the column, a mean of 2 |Phi| = 6 Monte-Carlo means of G games
    each with returns in [0, 2] (SD <= 1, so its SD <= 1 / sqrt(6 G)), is within 4.5 of those SDs of the
    seatings value and more than 4.5 of them away from the per-seat value."""
    phis = _learned_set(tmp_path / "phi")
    syms = op_symmetries(CONFIG, str(tmp_path / "phi"))
    K, games = TabularEnv("three-lever").obs_shape[0], 8000
    policy, env, pi = _policy(3.0 * torch.randn(K, 3, generator=torch.Generator().manual_seed(1)))
    hand = _by_hand(env.tree, pi, phis)
    tol = 4.5 / np.sqrt(2 * len(syms) * games)
    column = _op_objective([policy], [syms], games, seed=5).value
    assert abs(column - hand["seatings"]) < tol
    assert abs(column - hand["per-seat"]) > tol, hand
