"""Which OP reading ers-exact's ZSC report's OP column shows (``op_column_reading`` in its config), on the
two-round three-lever game with a learned set where the two readings of
:data:`ers_exact.deployment.OP_READINGS` differ at n = 2: Phi = {Id, (L1 L2), (L2 L3)} (two lever
transpositions acting on the partner's observed lever too; not a group: their product, a 3-cycle, is
missing). The OP + learned Phi_ER row's column is checked against both readings computed by hand from their
definitions (J of the joint policies of pi and its images, nothing of ``other_play`` or ``cross_play``):
"seatings", mean_phi (J(pi^1, phi(pi)^2) + J(phi(pi)^1, pi^2)) / 2, and "per-seat",
mean_{phi_1, phi_2} J(phi_1(pi)^1, phi_2(pi)^2). For pi = "always lever 1" they have closed forms from the
game's rules: phi(L1) is L1, L2, L1 over Phi, so 2 * 2/3 = 4/3 and 2 * (2^2 + 1^2) / 3^2 = 10/9.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import numpy as np
import pytest

from ers_exact.deployment import OP_READINGS
from ers_exact.games import get_game
from ers_exact.interface import ZSCReport
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.model.values import expected_return
from ers_exact.zsc import pipeline
from ers_exact.zsc.other_play import OPResult
from ers_exact.zsc.pipeline import PopulationConfig, run_zsc

SWAPS = ((1, 0, 2), (0, 2, 1))  # (L1 L2), (L2 L3) on actions and on the partner's observed lever


@pytest.fixture(scope="module")
def lever3() -> HistoryTree:
    return enumerate_histories(get_game("three-lever"))


def _phi(tree: HistoryTree) -> list[Transformation]:
    return [Transformation.identity(tree.game), *(Transformation((0,), (s, s), (s, s)) for s in SWAPS)]


def _by_hand(tree: HistoryTree, pi: tuple[np.ndarray, ...], phis: list[Transformation]) -> dict[str, float]:
    """Both readings of OP at n = 2 from their definitions (module docstring); phis[0] is the identity."""
    images = [apply_to_policy(tree, phi, pi) for phi in phis]
    J = {
        (a, b): float(expected_return(tree, (images[a][0], images[b][1])))
        for a, b in itertools.product(range(len(phis)), repeat=2)
    }
    hand = {
        "seatings": float(np.mean([(J[0, k] + J[k, 0]) / 2 for k in range(len(phis))])),
        "per-seat": float(np.mean(list(J.values()))),
    }
    assert set(hand) == set(OP_READINGS)
    return hand


def _lever_one(tree: HistoryTree) -> tuple[np.ndarray, ...]:
    rows = np.zeros(tree.local[0].legal.shape)
    rows[:, 0] = 1.0
    return (rows, rows.copy())


def _random(tree: HistoryTree, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.dirichlet(np.full(3, 0.5), size=h.legal.shape[0]) for h in tree.local)


def _report(tree: HistoryTree, monkeypatch: pytest.MonkeyPatch, make: Callable[[int], tuple]) -> ZSCReport:
    """run_zsc with every agent's learned Phi set to the module's non-group Phi and its k-th OP training
    returning the one seed ``make(k)``; its config survives the JSON round trip."""
    monkeypatch.setattr(pipeline, "learned_phi", lambda tree, learned: _phi(tree))
    calls = iter(range(100))

    def train(tree: HistoryTree, phis: object, config: object, progress: object = None) -> OPResult:
        pi = make(next(calls))
        J = float(expected_return(tree, pi))
        return OPResult(pi, 0.0, J, (0.0,), (J,), seed_policies=(pi,))

    monkeypatch.setattr(pipeline, "train_other_play", train)
    cfg = PopulationConfig(agents=2, k=2, top=2, m=1, episodes=200, op_steps=1)
    report, _ = run_zsc(tree, cfg)
    assert ZSCReport.from_json(json.loads(report.dumps())).config == report.config
    return report


def test_the_op_column_is_the_seatings_reading_for_always_lever_one(lever3, monkeypatch) -> None:
    report = _report(lever3, monkeypatch, lambda k: _lever_one(lever3))
    hand = _by_hand(lever3, _lever_one(lever3), _phi(lever3))
    assert hand == pytest.approx({"seatings": 4 / 3, "per-seat": 10 / 9}, abs=1e-12)  # the closed forms
    assert report.config["op_column_reading"] == "seatings" == report.config["op_reading"]
    column = report.rows[2].op
    assert column is not None and column.value == pytest.approx(hand["seatings"], abs=1e-12)
    assert abs(column.value - hand["per-seat"]) > 0.2


def test_the_op_column_is_the_seatings_reading_for_stochastic_policies(lever3, monkeypatch) -> None:
    """Each agent deploys its own random policy (the two OP trainings per agent: OP-MDP, then OP-ER): the
    column is the mean over agents of the reading its config names, not of the per-seat one."""
    report = _report(lever3, monkeypatch, lambda k: _random(lever3, k))
    phis = _phi(lever3)
    hands = [_by_hand(lever3, _random(lever3, k), phis) for k in (1, 3)]  # agent a's OP-ER training: 2a + 1
    named = np.mean([h[report.config["op_column_reading"]] for h in hands])
    per_seat = np.mean([h["per-seat"] for h in hands])
    column = report.rows[2].op
    assert column is not None and column.value == pytest.approx(named, abs=1e-12)
    assert abs(column.value - per_seat) > 1e-3, (named, per_seat)
