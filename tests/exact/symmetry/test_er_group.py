"""Phi_ER by generators and order (issue 23, part 3) against the exhaustive scan of Psi's policy part: on
every built-in game and the small standard files, same order, every listed member in the group and the same
verdict on random elements; a Hypothesis property on random small games; and the groups too large to list
(Grid3x3corners, Mars, fireFighting) with their orders and orbits, no element listed."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ers_exact.analysis.report import symmetry_report
from ers_exact.games import get_game, load_game
from ers_exact.games.random import planted_game, random_small_game
from ers_exact.model.histories import HistoryTree, enumerate_histories
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from ers_exact.symmetry.er import ERResult, er_symmetries
from ers_exact.symmetry.er_group import ERGroupBudgetError, er_group
from ers_exact.symmetry.mdp_group import decpomdp_group
from ers_exact.util.errors import InputError


def _flat(pi: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(a).ravel() for a in pi])


def closed_pool(
    tree: HistoryTree, alpha: float, n_starts: int = 16, seed: int = 0
) -> tuple[list[Any], float, ERResult]:
    """The solver's optimal set, closed under the exhaustive scan's members until none maps a pool point
    outside the pool: there the exhaustive members are exactly {phi : phi(pool) = pool}."""
    fs = solve_fixed_points(tree, alpha, SolverConfig(n_starts=n_starts, seed=seed, certify=False))
    pool = [p.policy for p in fs.optimal_points]
    while True:
        er = er_symmetries(tree, pool, alpha, fs.J_star, method="exhaustive", progress=False)
        flat = [_flat(pi) for pi in pool]
        added = False
        for phi in er.members:
            for pi in list(pool):
                img = apply_to_policy(tree, phi, pi)
                if all(np.abs(_flat(img) - g).max() > 1e-9 for g in flat):
                    pool.append(img)
                    flat.append(_flat(img))
                    added = True
        if not added:
            return pool, fs.J_star, er


def _key(phi: Transformation) -> tuple[Any, Any]:
    return (phi.actions, phi.observations)


def check_agreement(tree: HistoryTree, alpha: float, rng: np.random.Generator, n_random: int = 40) -> None:
    """The generator search, with and without Phi_MDP's seeds, equals the exhaustive members."""
    pool, j_star, exhaustive = closed_pool(tree, alpha)
    members = {_key(m) for m in exhaustive.members}
    for seeds in ((), decpomdp_group(tree.game).generators):
        group = er_group(tree, pool, alpha, j_star, seeds=seeds)
        assert group.complete and group.order_on_policies == len(members) == group.generated_order()
        assert all(group.contains(m) for m in exhaustive.members)  # same order + inclusion: same set
        for _ in range(n_random):  # random elements of Psi: the same verdict
            phi = Transformation.random(tree.game, rng)
            assert group.contains(phi) == (_key(phi) in members)
        for m in exhaustive.members[:n_random]:  # and random elements of the group itself
            assert group.contains(m)
        if len(members) <= 5000:
            assert {_key(e) for e in group.elements(5000)} == members


BUILTIN = [
    ("toy-coordination", None, 0.3),
    ("three-lever", None, 0.25),
    ("three-lever", None, 1.0),
    ("two-lever", None, 0.5),
    ("handshake", None, 0.5),
    ("dectiger", 2, 0.25),
    ("dectiger", 2, 1.0),
]
FILES = [
    ("dectiger", 0.25),
    ("dectiger_skewed", 0.5),
    ("broadcastChannel", 0.25),
    ("broadcastChannel", 1.0),
    ("recycling", 0.25),
    ("2generals", 0.5),
    ("GridSmall", 0.25),
]


@pytest.mark.parametrize("name, horizon, alpha", BUILTIN, ids=[f"{n}-H{h}-{a}" for n, h, a in BUILTIN])
def test_generators_equal_the_exhaustive_scan_on_builtin_games(
    name: str, horizon: int | None, alpha: float
) -> None:
    tree = enumerate_histories(get_game(name, **({"horizon": horizon} if horizon else {})))
    check_agreement(tree, alpha, np.random.default_rng(0))


@pytest.mark.parametrize("stem, alpha", FILES, ids=[f"{s}-{a}" for s, a in FILES])
def test_generators_equal_the_exhaustive_scan_on_standard_files(
    dpomdp_dir: Path, stem: str, alpha: float
) -> None:
    tree = enumerate_histories(load_game(dpomdp_dir / f"{stem}.dpomdp", horizon=2))
    check_agreement(tree, alpha, np.random.default_rng(1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), plant=st.booleans(), alpha=st.sampled_from([0.2, 0.5, 2.0]))
def test_generators_equal_the_exhaustive_scan_on_random_games(seed: int, plant: bool, alpha: float) -> None:
    rng = np.random.default_rng(seed)
    game = random_small_game(rng, f"random-{seed}")
    if plant:  # a Dec-POMDP symmetry on actions and observations, so that Phi_ER is not trivial
        phi = Transformation.random(game, rng)
        game = planted_game(game, Transformation(tuple(range(game.n_states)), phi.actions, phi.observations))
    tree = enumerate_histories(game)
    check_agreement(tree, alpha, rng, n_random=20)


def test_a_pool_point_that_is_not_optimal_is_refused() -> None:
    tree = enumerate_histories(get_game("toy-coordination"))
    fs = solve_fixed_points(tree, 0.3, SolverConfig(n_starts=8, certify=False))
    uniform = tuple(np.full((len(h), k), 1.0 / k) for h, k in zip(tree.local, tree.game.n_actions))
    with pytest.raises(InputError, match="pool point 1 is not a self-play-optimal"):
        er_group(tree, [fs.optimal_points[0].policy, uniform], 0.3, fs.J_star)


def test_a_budget_gives_a_lower_bound_that_says_so() -> None:
    tree = enumerate_histories(get_game("three-lever"))
    pool, j_star, exhaustive = closed_pool(tree, 1.0)
    group = er_group(tree, pool, 1.0, j_star, max_nodes=5)
    assert not group.complete and group.stopped_at is not None
    assert len(exhaustive.members) % group.order_on_policies == 0  # a subgroup: Lagrange
    assert "NOT proven" in group.claim and group.to_json()["order_is_lower_bound"]
    with pytest.raises(ERGroupBudgetError, match="more than --max-elements"):
        next(group.elements(0))


@pytest.mark.parametrize("method", ["exhaustive", "generators"])
def test_both_methods_say_whether_every_element_is_listed(method: str) -> None:
    """One key for both methods and Phi_MDP: ``elements_listed`` (the exhaustive search said
    ``elements_truncated``, with the opposite sense). The toy game's Phi_ER has 2 policy parts."""
    tree = enumerate_histories(get_game("toy-coordination"))
    for cap, listed in ((2, True), (1, False)):
        rep = symmetry_report(tree, 0.25, max_elements=cap, er_method=method)
        er = rep["er"]
        assert (
            er["order_on_policies"] == 2
            and er["elements_listed"] is listed
            and "elements_truncated" not in er
        )
        assert len(er["elements"]) == (2 if listed else {"exhaustive": 1, "generators": 0}[method])
        assert rep["mdp"]["elements_listed"] is True


def test_grid3x3corners_h2_group_too_large_to_list(dpomdp_dir: Path) -> None:
    """Matching refused here (1,194,393,600 candidates onto one pool point); the group needs none listed."""
    tree = enumerate_histories(load_game(dpomdp_dir / "Grid3x3corners.dpomdp", horizon=2))
    start = time.perf_counter()
    rep = symmetry_report(tree, 0.25, max_elements=100)
    er = rep["er"]
    assert time.perf_counter() - start < 60
    assert rep["er_method"] == "generators" and er["complete"] and rep["mdp_subgroup_of_er"]
    assert er["order_on_policies"] == 1_194_393_600 == (math.factorial(4) * math.factorial(6) * 2) ** 2
    assert er["order"] == str(math.factorial(81) * 1_194_393_600) and er["order_text"].startswith("81! * ")
    assert er["elements"] == [] and not er["elements_listed"]
    assert sorted(map(len, er["orbits"]["observations_0"])) == [2, 6] and len(er["generators"]) < 40
    assert "order exactly 81! * 1,194,393,600" in er["claim"] and "not certified" in er["claim"]


#: H = 1, alpha 0.25: each agent's one root row has log pi = (-64.4 x 4, 0, -24) over its 6 actions, so a
#: fixed point's image is one iff the action permutation keeps those logits (4!) and any observation
#: permutation (8!, nothing is decided after observing). The ER test on probabilities also let the -24 action
#: (probability 3.8e-11 < 1e-8) swap with the -64.4 ones: (5! 8!)^2, no fixed points among the extra images.
MARS_H1 = (math.factorial(4) * math.factorial(8)) ** 2


def test_mars_h1_closed_form_is_the_stabiliser_of_its_one_decision(dpomdp_dir: Path) -> None:
    """MARS_H1 from the solved point itself, not from the ER search: at H = 1 each agent's policy is one row
    over its actions (every one legal), and the pool is one point pi, so H = {phi : phi(pi) = pi} has per
    agent (prod over classes of equal log pi of |class|!) x |O^i|!; log pi is compared, not pi (the -24 and
    -64.4 actions have probabilities 3.8e-11 and 1e-28, equal within a probability tolerance)."""
    tree = enumerate_histories(load_game(dpomdp_dir / "Mars.dpomdp", horizon=1))
    cfg = SolverConfig(n_starts=4, certify=False, continuation=False)
    (point,) = solve_fixed_points(tree, 0.25, cfg).optimal_points
    order = 1
    for i, log_pi in enumerate(LogitCoordinates(tree).to_log_policy(point.y[None])):
        assert log_pi.shape[1] == 1 and tree.local[i].legal.all()  # one decision, every action legal
        row = np.sort(log_pi[0, 0])
        classes = np.split(row, np.flatnonzero(np.diff(row) > 1e-9) + 1)
        order *= math.prod(math.factorial(len(c)) for c in classes) * math.factorial(
            tree.game.n_observations[i]
        )
    assert order == MARS_H1


@pytest.mark.slow  # ~25 s here, most of it Phi_MDP's search
@pytest.mark.parametrize("horizon, alpha, order", [(1, 0.25, MARS_H1), (2, 1.0, 9216)])
def test_mars_by_generators(dpomdp_dir: Path, horizon: int, alpha: float, order: int) -> None:
    tree = enumerate_histories(load_game(dpomdp_dir / "Mars.dpomdp", horizon=horizon))
    rep = symmetry_report(tree, alpha, max_elements=0, er_method="generators")
    assert rep["er"]["complete"] and rep["er"]["order_on_policies"] == order and rep["mdp_subgroup_of_er"]


def test_cli_er_method_generators(capsys: pytest.CaptureFixture[str]) -> None:
    from ers_exact.cli import main

    assert (
        main(["symmetries", "toy-coordination", "--alpha", "0.3", "--er-method", "generators", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["er_method"] == "generators" and out["er"]["method"] == "generators"
    assert out["er"]["order"] == 24 * 2 and out["er"]["complete"] and out["er"]["generated_order"] == 2
    assert main(["symmetries", "toy-coordination", "--alpha", "0.3", "--er-method", "generators"]) == 0
    text = capsys.readouterr().out
    assert (
        "proven: " in text and "order exactly 4! * 2" in text and "Phi_ER (generators, 1 generators" in text
    )


def test_the_claim_says_what_the_exact_test_tests() -> None:
    """Dec-Tiger H=2 at alpha 0.05: candidates whose images match the pool within MATCH_TOL in probabilities
    but whose logits are off where the probabilities are tiny are rejected by the exact test (the exhaustive
    scan, which tests every candidate, agrees on the order: 4 on policies). The claim says what that test is:
    a relative tolerance on the logits y, an absolute one on J (it said "the exact ER test at tol 1e-08",
    read as a tolerance on probabilities, which the test no longer uses)."""
    tree = enumerate_histories(get_game("dectiger", horizon=2))
    gen = symmetry_report(tree, 0.05, er_method="generators")["er"]
    exhaustive = symmetry_report(tree, 0.05, er_method="exhaustive")["er"]
    assert gen["complete"] and gen["order_on_policies"] == exhaustive["order_on_policies"] == 4
    assert gen["rejected_by_exact_test"] > 0 and gen["tol"] == 1e-8
    claim = gen["claim"]
    assert "||M(y) - y||_inf <= 1e-08 * max(1, ||y||_inf)" in claim and "|J(phi(pi)) - J*| <= 1e-08" in claim
    assert "within 1e-07 in probabilities" in claim and "at tol" not in claim
    assert f"({gen['rejected_by_exact_test']} candidate(s) matched the pool but failed that test" in claim
