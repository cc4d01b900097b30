"""The ER test on log-policies (symmetry/er_test.py) where the fixed points' probabilities underflow.

Below alpha ~0.0013 (toy game: logit gaps near 1 / alpha beyond the ~745 where exp underflows) the test on
probabilities was undefined and refused. Checked here against answers that do not come from the ER code:

* at alpha 1e-3 and 1e-4, Phi_ER of two-lever and three-lever equals Phi_MDP computed from the game's model
  alone (mdp_group: no policies, no temperature), as the paper says of low temperature (README: "Phi_ER =
  Phi_MDP holds for exact Boltzmann fixed points only at low temperature"); the toy game is the paper's
  example where Phi_ER is strictly larger, at every alpha: {identity, both agents' action swap with x <-> m},
  derived by hand below (Phi_MDP is trivial there);
* where probabilities do not underflow, the probability residual max |F(pi) - pi| and J evaluated in log space
  equal a slow reference on probabilities (every admissible candidate, apply_to_policy, boltzmann_residual,
  expected_return) to 1e-9, and the verdicts (relative logit residual, J) equal those with M from Q on
  probabilities (LogitCoordinates.reference_map): Hypothesis over random small games and temperatures. The
  verdicts of the test before (max |F(pi) - pi| <= tol) are not the reference: it accepted images whose
  logits are off where the probabilities are tiny (a random game at alpha 0.01: log pi = -50 where the
  Boltzmann map gives -100, residual 2e-22; Dec-Tiger at 0.05: -1650 for -110), no fixed points;
* three-lever at 1e-4, where a listed point's probability residual (1.4e-8) exceeds 1e-8 though the solver's
  relative logit residual (3e-12) passes: the identity is a member (|Phi_ER| was 0 with the probability test).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ers_exact.analysis.report import symmetry_report
from ers_exact.games import get_game
from ers_exact.games.random import planted_game, random_small_game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.transformation import Transformation, apply_to_log_policy, apply_to_policy
from ers_exact.model.values import expected_return
from ers_exact.solve.boltzmann import LogitCoordinates, TemperatureError, boltzmann_residual
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.symmetry.candidates import CandidateSpace, stack_pool
from ers_exact.symmetry.er import er_symmetries
from ers_exact.symmetry.er_group import er_group
from ers_exact.symmetry.er_test import ERTest
from ers_exact.symmetry.mdp_group import decpomdp_group

FAST = SolverConfig(n_starts=16, certify=False, complete_search=False)  # the pools are found all the same


def _key(e: dict[str, Any] | Transformation) -> tuple[Any, Any]:
    if isinstance(e, Transformation):
        return (tuple(map(tuple, e.actions)), tuple(map(tuple, e.observations)))
    return (tuple(map(tuple, e["actions"])), tuple(map(tuple, e["observations"])))


def _toy_expected(tree: HistoryTree) -> set[tuple[Any, Any]]:
    """By hand: at s0 Q(0) pays 1 now (x), Q(1) pays 1 at t = 1 (m), with gamma = 1 the same; after t = 1
    every action pays the same. So swapping both agents' actions and x <-> m maps every fixed point onto a
    fixed point of the same J. Swapping one agent's alone turns a convention into a mismatch (J drops), and
    an observation permutation with identity actions maps a possible history (1, b) to an impossible one
    (inadmissible). Hence {identity, the double swap}."""
    names = tree.game.observation_names[0]
    x, m = names.index("x"), names.index("m")
    swap_o = list(range(len(names)))
    swap_o[x], swap_o[m] = m, x
    ident = (((0, 1), (0, 1)), (tuple(range(len(names))),) * 2)
    return {ident, (((1, 0), (1, 0)), (tuple(swap_o),) * 2)}


CASES = [(g, a) for g in ("toy-coordination", "two-lever", "three-lever") for a in (1e-3, 1e-4)]


@pytest.mark.parametrize("name, alpha", CASES, ids=[f"{g}-{a:g}" for g, a in CASES])
def test_low_temperature_phi_er_equals_the_independent_answer(name: str, alpha: float) -> None:
    tree = enumerate_histories(get_game(name))
    mdp = {_key(p) for p in decpomdp_group(tree.game).policy_parts}
    expected = _toy_expected(tree) if name == "toy-coordination" else mdp
    rep = symmetry_report(tree, alpha, FAST, er_method="exhaustive")
    assert {_key(e) for e in rep["er"]["elements"]} == expected
    assert rep["er"]["images_outside_pool"] == 0 and rep["mdp_subgroup_of_er"]
    gen = symmetry_report(tree, alpha, FAST, er_method="generators")
    assert gen["er"]["complete"] and gen["er"]["order_on_policies"] == len(expected)


def test_a_probability_pool_that_underflowed_is_refused_in_one_line() -> None:
    """Given as probabilities, the toy game's optimal points at 1e-3 have legal actions at exactly 0: their
    logits are lost, so the test refuses (one line, naming the fix); given the solver's log-policies it runs."""
    tree = enumerate_histories(get_game("toy-coordination"))
    fs = solve_fixed_points(tree, 1e-3, FAST)
    pool = [p.policy for p in fs.optimal_points]
    assert any((pi[i] == 0)[tree.local[i].legal].any() for pi in pool for i in range(2))
    with pytest.raises(TemperatureError, match="probability exactly 0") as err:
        er_symmetries(tree, pool, 1e-3, fs.J_star, progress=False)
    assert "\n" not in str(err.value) and "log_pool" in str(err.value)
    logs = LogitCoordinates(tree).to_log_policy(np.stack([p.y for p in fs.optimal_points]))
    log_pool = [tuple(lp[k] for lp in logs) for k in range(len(pool))]
    for method in ("exhaustive", "matching"):
        er = er_symmetries(tree, None, 1e-3, fs.J_star, method=method, progress=False, log_pool=log_pool)
        assert {_key(m) for m in er.members} == _toy_expected(tree)


def test_a_point_the_solver_lists_at_low_temperature_passes_its_own_tolerance() -> None:
    """three-lever at 1e-4 (atlas's solver: 32 starts, seed 1): a listed point has logits up to 1.7e4 and an
    error of 5e-8 at a logit near 0, relative 3e-12, within the solver's 1e-11; its probability residual is
    1.4e-8, above the ER test's 1e-8. On probabilities the identity failed and atlas gave |Phi_ER| = 0
    ("Phi_MDP <= Phi_ER: False"); the relative logit test gives Phi_MDP's 6."""
    tree, alpha = enumerate_histories(get_game("three-lever")), 1e-4
    cfg = SolverConfig(n_starts=32, seed=1, certify=False)
    fs = solve_fixed_points(tree, alpha, cfg)
    ys = np.stack([p.y for p in fs.optimal_points])
    assert LogitCoordinates(tree).residual(ys, alpha).max() > 1e-8  # the probability measure fails it
    rep = symmetry_report(tree, alpha, cfg, er_method="exhaustive")
    mdp = {_key(p) for p in decpomdp_group(tree.game).policy_parts}
    assert {_key(e) for e in rep["er"]["elements"]} == mdp and rep["mdp_subgroup_of_er"]


def test_a_fixed_point_below_the_optimum_is_not_in_pi_star() -> None:
    """The ER test asks two things of an image: a Boltzmann fixed point, and self-play optimal. Three-lever at
    alpha 0.25 has fixed points at many returns (the solver's J: 1.88067 optimal, the stable 1.82209, ...):
    every one passes the fixed-point half, and exactly those at J* pass the test. (Without the J half the ER
    test accepted them all, and no other test noticed: a mutation run, 2026-12-08.)"""
    tree, alpha, tol = enumerate_histories(get_game("three-lever")), 0.25, 1e-8
    points = solve_fixed_points(tree, alpha, FAST).points
    J = np.array([p.J for p in points])
    J_star = float(J.max())
    assert int(np.sum(J_star - J > 0.05)) >= 10  # fixed points far below the optimum are there to be refused
    test = ERTest(tree, alpha, J_star, tol)
    logs = test.coords.to_log_policy(np.stack([p.y for p in points]))
    residual, _ = test.values(logs)
    assert residual.max() <= tol  # every point is a fixed point: only J can tell them apart
    assert np.array_equal(test.members(logs, len(points), 1), np.abs(J - J_star) <= tol)


def _reference(tree: HistoryTree, pool: list[Any], alpha: float, J_star: float, tol: float) -> dict:
    """Slow reference on probabilities: (residuals, returns) of every admissible candidate's images."""
    space, stacked = CandidateSpace(tree), stack_pool(pool)
    out = {}
    for combo in space.admissible_combos():
        phi = space.transformation(combo)
        imgs = apply_to_policy(tree, phi, stacked)
        out[_key(phi)] = (
            np.atleast_1d(boltzmann_residual(tree, imgs, alpha)),
            np.atleast_1d(expected_return(tree, imgs)),
        )
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), plant=st.booleans(), log_alpha=st.floats(-2.0, 0.3))
def test_log_space_verdicts_equal_the_probability_reference(seed: int, plant: bool, log_alpha: float) -> None:
    rng = np.random.default_rng(seed)
    game = random_small_game(rng, f"random-{seed}")
    if plant:  # a Dec-POMDP symmetry, so that Phi_ER is not trivial
        phi = Transformation.random(game, rng)
        game = planted_game(game, Transformation(tuple(range(game.n_states)), phi.actions, phi.observations))
    tree, alpha, tol = enumerate_histories(game), 10.0**log_alpha, 1e-8
    fs = solve_fixed_points(tree, alpha, SolverConfig(n_starts=8, seed=seed % 1000, certify=False))
    pool = [p.policy for p in fs.optimal_points]
    assume(all((pi[i] > 0)[tree.local[i].legal].all() for pi in pool for i in range(game.n_agents)))
    logs = LogitCoordinates(tree).to_log_policy(np.stack([p.y for p in fs.optimal_points]))
    log_pool = [tuple(lp[k] for lp in logs) for k in range(len(pool))]
    ref = _reference(tree, pool, alpha, fs.J_star, tol)
    test, coords = ERTest(tree, alpha, fs.J_star, tol), LogitCoordinates(tree)
    space, verdicts, expected = CandidateSpace(tree), {}, set()
    for combo in space.admissible_combos():
        phi = space.transformation(combo)
        images = apply_to_log_policy(tree, phi, logs)
        rel, J = test.values(images)
        y = coords.from_log_policy(images)  # the probability residual, evaluated in log space
        assert np.allclose(coords.residual(y, alpha), ref[_key(phi)][0], rtol=0, atol=1e-9)
        assert np.allclose(J, ref[_key(phi)][1], rtol=0, atol=1e-9)
        ok_J = np.all(np.abs(ref[_key(phi)][1] - fs.J_star) <= tol)
        # the reference's M: Q on probabilities (local_q_values), not the log-space evaluator
        ref_rel = np.abs(coords.reference_map(y, alpha) - y).max(axis=1) / np.maximum(
            1, np.abs(y).max(axis=1)
        )
        if ok_J and np.all(ref_rel <= tol):
            expected.add(_key(phi))
        verdicts[_key(phi)] = bool(np.all(rel <= tol) and np.all(np.abs(J - fs.J_star) <= tol))
    assert {k for k, v in verdicts.items() if v} == expected
    found = {}
    for method in ("exhaustive", "matching"):
        er = er_symmetries(
            tree, None, alpha, fs.J_star, tol=tol, method=method, progress=False, log_pool=log_pool
        )
        found[method] = {_key(m) for m in er.members}
    assert found["exhaustive"] == expected
    assert found["matching"] <= expected  # matching: the members whose image of pool point 0 is in the pool


def _members(function: str, tree: HistoryTree, pool: Any, logs: Any, J_star: float) -> set[tuple[Any, Any]]:
    """The policy parts of Phi_ER at alpha 0.3 by ``er_symmetries`` (listed) or ``er_group`` (its elements)."""
    if function == "er_symmetries":
        er = er_symmetries(tree, pool, 0.3, J_star, progress=False, log_pool=logs)
        return {_key(m) for m in er.members}
    group = er_group(tree, pool, 0.3, J_star, progress=False, log_pool=logs)
    return {_key(m) for m in group.elements(100)}


@pytest.mark.parametrize("function", ["er_symmetries", "er_group"])
def test_the_er_functions_take_exactly_one_of_pool_and_log_pool(function: str) -> None:
    """The pool goes in once, as probabilities (``pool``) or as log-policies (``log_pool``): both at once (the
    probabilities were never read) and neither are refused with one ValueError naming the two; each alone
    gives the same members, the toy game's Phi_ER derived by hand (``_toy_expected``)."""
    tree = enumerate_histories(get_game("toy-coordination"))
    fs = solve_fixed_points(tree, 0.3, FAST)
    pool = [p.policy for p in fs.optimal_points]
    logs = LogitCoordinates(tree).log_pool(np.stack([p.y for p in fs.optimal_points]))
    for both_or_neither in ((pool, logs), (None, None)):
        with pytest.raises(ValueError, match="exactly one of pool and log_pool") as err:
            _members(function, tree, *both_or_neither, fs.J_star)
        assert "\n" not in str(err.value)
    by_probabilities = _members(function, tree, pool, None, fs.J_star)
    assert by_probabilities == _members(function, tree, None, logs, fs.J_star) == _toy_expected(tree)
