"""Which OP seed an agent deploys (``PopulationConfig.select_by``, ``ers_exact.deployment``), on a three-lever case
where the paper's rule and the OP-value rule disagree, checked against closed forms from the game's rules.

Two shared policies of the 2-round three-lever game (reward 1{a^1 = a^2} per round, Phi = Phi_MDP = the 6
lever relabelings):
* A, "uniform first lever, then repeat after a match, else the unused lever": J = 1/3 * 2 + 2/3 * 1 = 4/3;
  A is Phi_MDP-invariant (phi(A) = A), so OP^Phi(A) = J(A) = 4/3 (the OP optimum).
* B, "always lever 1": J = 2; phi(B) always pulls phi(L1), so XP(B, phi(B)) = 2 for the 2 relabelings that
  fix L1 and 0 for the other 4: OP^Phi(B) = 2/3.
The paper (Section "Experiments": pi_i := argmax_k J(pi_{i,k})) deploys B; the OP-value rule deploys A.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from ers_exact.games import get_game
from ers_exact.interface import ZSCReport
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.objectives import other_play
from ers_exact.model.values import expected_return
from ers_exact.symmetry.search import decpomdp_symmetries
from ers_exact.util.options import UsageError
from ers_exact.zsc import pipeline
from ers_exact.zsc.other_play import OPResult
from ers_exact.zsc.pipeline import PopulationConfig, deployed_policy, run_zsc

J_A, OP_A, J_B, OP_B = 4 / 3, 4 / 3, 2.0, 2 / 3  # the closed forms of the module docstring


@pytest.fixture(scope="module")
def lever3() -> HistoryTree:
    return enumerate_histories(get_game("three-lever"))


def _shared(tree: HistoryTree, first: np.ndarray, after) -> tuple[np.ndarray, ...]:
    """The same policy for both agents: ``first`` at the empty history, ``after(a, o)`` after own lever a and
    the partner's lever o."""
    hist = tree.local[0]
    rows = np.full((len(hist.legal), 3), 1 / 3)
    rows[0] = first
    for a in range(3):
        for o in range(3):
            rows[hist.index[(a, o)]] = after(a, o)
    return (rows, rows.copy())


def _seeds(tree: HistoryTree) -> OPResult:
    """An OP training whose two seeds reached A and B, scored by the library."""
    eye = np.eye(3)
    A = _shared(tree, np.full(3, 1 / 3), lambda a, o: eye[a] if a == o else eye[3 - a - o])
    B = _shared(tree, eye[0], lambda a, o: eye[0])
    phis = decpomdp_symmetries(tree.game)
    ops = tuple(float(other_play(tree, p, phis)) for p in (A, B))
    Js = tuple(float(expected_return(tree, p)) for p in (A, B))
    return OPResult(A, ops[0], Js[0], ops, Js, seed_policies=(A, B))


def test_the_constructed_seeds_have_the_closed_form_values(lever3) -> None:
    result = _seeds(lever3)
    assert result.seed_J == pytest.approx((J_A, J_B), abs=1e-12)
    assert result.seed_op_values == pytest.approx((OP_A, OP_B), abs=1e-12)


@pytest.mark.parametrize(("rule", "seed"), [("sp_return", 1), ("op_value", 0)])
def test_an_agent_deploys_the_seed_its_rule_names(lever3, rule: str, seed: int) -> None:
    result = _seeds(lever3)
    deployed = deployed_policy(result, rule)
    assert all(np.array_equal(d, p) for d, p in zip(deployed, result.seed_policies[seed]))


@pytest.mark.parametrize("rule", ["sp_return", "op_value"])
def test_a_result_without_seed_policies_is_a_value_error(lever3, rule: str) -> None:
    """An OPResult built without ``seed_policies`` (default ()) cannot say what a seed deploys."""
    full = _seeds(lever3)
    bare = OPResult(full.policy, full.op_value, full.J, full.seed_op_values, full.seed_J)
    with pytest.raises(ValueError, match="seed_policies"):
        deployed_policy(bare, rule)


@pytest.mark.parametrize(
    ("rule", "sp", "op"), [("sp_return", J_B, OP_B), ("op_value", J_A, OP_A)], ids=["sp_return", "op_value"]
)
def test_the_pipeline_deploys_by_select_by_and_records_it(lever3, monkeypatch, rule, sp, op) -> None:
    """Every OP training returns the seeds A and B: both OP rows' Self-Play and OP columns are those of the
    seed ``select_by`` names, and table1's JSON round trip keeps the rule and the OP reading."""
    monkeypatch.setattr(pipeline, "train_other_play", lambda tree, phis, config, progress=None: _seeds(tree))
    cfg = PopulationConfig(agents=2, k=2, top=2, m=2, episodes=200, op_steps=1, select_by=rule)
    report, _ = run_zsc(lever3, cfg)
    mdp_row = report.rows[1]
    assert mdp_row.sp.value == pytest.approx(sp, abs=1e-12)
    assert mdp_row.op.value == pytest.approx(op, abs=1e-12)
    assert report.rows[2].sp.value == pytest.approx(sp, abs=1e-12)
    back = ZSCReport.from_json(json.loads(report.dumps()))
    assert (back.config["select_by"], back.config["op_reading"]) == (rule, "seatings")


def test_the_default_is_the_papers_rule_and_a_bad_one_is_refused() -> None:
    assert PopulationConfig().select_by == "sp_return"
    with pytest.raises(UsageError, match="select_by"):
        replace(PopulationConfig(), select_by="best")
