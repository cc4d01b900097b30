"""`symmetries --prove-optimal-set`: Phi_ER against a Pi*_alpha proven complete by the certified
branch-and-bound, and the fallback to the solver's points where the proof does not finish."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from ers_exact.analysis.report import atlas, symmetry_report
from ers_exact.cli import main
from ers_exact.games import get_game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.transformation import Transformation, apply_to_log_policy
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from tests.exact.three_lever import three_lever_optimum


def test_two_lever_group_against_the_proven_set() -> None:
    tree = enumerate_histories(get_game("two-lever"))
    plain = symmetry_report(tree, 0.25, max_elements=10)
    proven = symmetry_report(tree, 0.25, max_elements=10, prove_seconds=60.0)
    assert not plain["optimal_set_complete"] and plain["optimal_set"] is None
    assert plain["pool_listed_by_optimal_set"] is None
    assert proven["optimal_set"]["complete"] and proven["optimal_set_complete"]
    assert "certified all of Pi*_alpha: True by optimal-set" in proven["er"]["claim"]
    assert proven["pool_size"] == 4 and proven["J_star"] == pytest.approx(plain["J_star"], abs=1e-9)
    assert proven["er"]["order_on_policies"] == 2 and proven["mdp_subgroup_of_er"]
    assert proven["pool_added_by_mdp_images"] == 0  # Phi_MDP maps Pi*_alpha onto itself (paper, appendix)


def test_the_proof_with_worker_processes_gives_the_same_report(capsys: pytest.CaptureFixture[str]) -> None:
    """`--prove-workers 2`: the proof runs on two worker processes (its config says so) and the report's
    group, pool and J* are those of the one-process proof."""
    args = ["symmetries", "two-lever", "--alpha", "0.25", "--prove-optimal-set", "60", "--json"]
    reports = []
    for workers in ("1", "2"):
        assert main([*args, "--prove-workers", workers]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    one, two = reports
    assert one["optimal_set_complete"] and two["optimal_set_complete"]
    assert (one["optimal_set"]["workers"], two["optimal_set"]["workers"]) == (1, 2)
    for key in ("pool_size", "pool_listed_by_optimal_set", "pool_added_by_mdp_images"):
        assert one[key] == two[key]
    assert one["J_star"] == pytest.approx(two["J_star"], abs=1e-12)
    assert one["er"]["order_on_policies"] == two["er"]["order_on_policies"] == 2
    assert main([*args, "--prove-workers", "0"]) == 2


def _stabiliser_on_log_policy(tree: HistoryTree, log_pi: tuple[np.ndarray, ...]) -> int:
    """|{phi : phi(pi) = pi}| over every action and observation permutation of each agent (Dec-Tiger: all
    legal everywhere, so all are admissible), compared on log pi: no Boltzmann map, no ER test."""
    game, count = tree.game, 0
    per_agent = [
        list(itertools.product(itertools.permutations(range(a)), itertools.permutations(range(o))))
        for a, o in zip(game.n_actions, game.n_observations)
    ]
    for parts in itertools.product(*per_agent):
        phi = Transformation(
            tuple(range(game.n_states)), tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        )
        image = apply_to_log_policy(tree, phi, [lp[None] for lp in log_pi])
        count += all(np.allclose(a[0], b, rtol=1e-9, atol=1e-9) for a, b in zip(image, log_pi))
    return count


def test_low_temperature_proof_on_dectiger() -> None:
    """alpha 0.05: the proof needs the log-space images and the inflated certificates (not proven before).
    |Phi_ER| was 16 on policies with the ER test on probabilities, which cannot see a logit of an action of
    probability ~e^-110: 12 of those images had log pi = -1650 where the Boltzmann map gives -110 (residual on
    probabilities 1.7e-48), so they are no fixed points. The test in relative logits keeps 4 (Phi_MDP: 2).
    Independently: Pi*_alpha is proven to be one point pi, so Phi_ER's policy part is exactly the stabiliser
    {phi : phi(pi) = pi}, counted here by brute force on log pi (4 of the 144 candidates)."""
    tree = enumerate_histories(get_game("dectiger"))
    rep = symmetry_report(tree, 0.05, max_elements=0, prove_seconds=60.0)
    assert rep["optimal_set_complete"] and rep["pool_size"] == 1
    assert rep["J_star"] == pytest.approx(-4.0, abs=1e-9)
    (point,) = solve_fixed_points(tree, 0.05, SolverConfig(certify=False)).optimal_points
    assert abs(point.J - rep["J_star"]) <= 1e-9  # the one point of Pi*_alpha
    log_pi = tuple(lp[0] for lp in LogitCoordinates(tree).to_log_policy(point.y[None]))
    assert rep["er"]["order_on_policies"] == _stabiliser_on_log_policy(tree, log_pi) == 4
    assert rep["mdp_subgroup_of_er"] and rep["pool_added_by_mdp_images"] == 0


def test_a_proof_out_of_time_falls_back_to_the_solver() -> None:
    tree = enumerate_histories(get_game("three-lever"))
    rep = symmetry_report(tree, 0.25, max_elements=0, prove_seconds=1e-3)
    assert not rep["optimal_set"]["complete"] and not rep["optimal_set_complete"]
    assert "certified all of Pi*_alpha: False)" in rep["er"]["claim"]
    assert rep["pool_size"] == 6  # the solver's points


@pytest.mark.slow  # ~20 s: the branch-and-bound on three-lever
def test_the_proof_finds_the_optimum_the_solver_misses() -> None:
    """three-lever at alpha 0.25: the solver's best six points sit 0.003 below J* = 1.8992923 (the optimum
    plays lever-uniformly off its path); with the proof the pool is the 9 points at J* and Phi_ER is Phi_MDP.
    J* is checked against the hand-derived optimum (tests/exact/three_lever.py: brentq on two scalar
    fixed-point equations, itself checked against reference.py in test_optimal_set.py)."""
    tree = enumerate_histories(get_game("three-lever"))
    J_star = three_lever_optimum(0.25).J  # 1.89929234990957 (brentq)
    plain = symmetry_report(tree, 0.25, max_elements=0)
    proven = symmetry_report(tree, 0.25, max_elements=0, prove_seconds=120.0)
    assert proven["optimal_set_complete"] and proven["pool_size"] == 9
    assert proven["J_star"] > plain["J_star"] + 0.002
    assert abs(proven["J_star"] - J_star) < 1e-9
    lo, hi = proven["optimal_set"]["J_star"]
    assert lo - 1e-12 <= J_star <= hi + 1e-12
    assert proven["er"]["order_on_policies"] == proven["mdp"]["order_on_policies"] == 6
    assert proven["pool_added_by_mdp_images"] == 0  # the proven set is closed under Phi_MDP
    assert proven["pool_listed_by_optimal_set"] == 9  # the solver's own count is kept beside it
    assert proven["pool_found_by_solver"] == plain["pool_found_by_solver"] == 1


def test_cli_flag(capsys) -> None:
    argv = ["symmetries", "two-lever", "--alpha", "0.25", "--prove-optimal-set", "60", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["optimal_set"]["complete"] and out["optimal_set_complete"]
    assert main(argv[:-1]) == 0  # the text form names the proof
    assert "optimal-set (" in capsys.readouterr().out


def test_atlas_proves_each_alpha() -> None:
    rows = atlas(enumerate_histories(get_game("two-lever")), [0.25, 1.0], prove_seconds=60.0)["rows"]
    assert [r["optimal_set_complete"] for r in rows] == [True, True]
    assert [r["pool_size"] for r in rows] == [4, 1]
