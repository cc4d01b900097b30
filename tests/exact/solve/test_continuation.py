"""Continuation in the temperature (solve/continuation.py): branches from lambda = 0, the toy game's
pitchfork located exactly, agreement with multistart where both run (toy, three-lever, random games), and
Gambit's principal-branch QRE equal to our principal branch's crossing."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ers_exact.games import GAMES, get_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates
from ers_exact.solve.config import ContinuationConfig
from ers_exact.solve.continuation import continuation
from ers_exact.solve.fixed_points import SolverConfig, solve_fixed_points
from tests.exact.strategies import random_game


def policy_distance(coords: LogitCoordinates, y1: np.ndarray, y2: np.ndarray) -> float:
    return max(float(np.abs(a - b).max()) for a, b in zip(coords.to_policy(y1), coords.to_policy(y2)))


def same_sets(coords: LogitCoordinates, ys1, ys2, tol: float = 1e-8) -> bool:
    if len(ys1) != len(ys2):
        return False
    return all(min(policy_distance(coords, a, b) for b in ys2) < tol for a in ys1)


@pytest.fixture(scope="module")
def toy():
    return enumerate_histories(get_game("toy-coordination"))


def test_toy_pitchfork_is_located_at_alpha_one_half_and_both_arms_are_traced(toy) -> None:
    res = continuation(LogitCoordinates(toy), 0.3)
    assert len(res.bifurcations) == 1
    bif = res.bifurcations[0]
    assert bif["lambda"] == pytest.approx(2.0, abs=1e-7) and bif["kernel_dim"] == 1
    assert bif["new_branches"] == 2 and bif["branch"] == 0
    assert [b.parent for b in res.branches] == [None, 0, 0]
    assert sorted(res.point_branch) == [0, 1, 2]  # one crossing of lambda = 1 / 0.3 per branch


@pytest.mark.parametrize("alpha", [0.2, 0.3, 0.45, 0.6, 1.0])
def test_toy_continuation_multistart_and_certified_search_agree(toy, alpha: float) -> None:
    coords = LogitCoordinates(toy)
    cont = continuation(coords, alpha)
    multi = solve_fixed_points(toy, alpha, SolverConfig(continuation=False))
    assert multi.complete  # the certified subdivision proved the list complete
    assert same_sets(coords, list(cont.points), [p.y for p in multi.points])
    both = solve_fixed_points(toy, alpha)
    assert all(p.method == "multistart+continuation+certified search" for p in both.points)
    assert sorted(p.branch for p in both.points) == sorted(cont.point_branch)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_three_lever_unique_point_is_found_by_both(alpha: float) -> None:
    tree = enumerate_histories(get_game("three-lever"))
    fs = solve_fixed_points(tree, alpha)
    assert len(fs.points) == 1 and fs.points[0].method.startswith("multistart+continuation")
    assert fs.points[0].branch == 0 and pytest.approx(2 / 3, abs=1e-12) == fs.points[0].J


@pytest.mark.slow  # ~10 s; the toy continuation and the Gambit-branch tests stay in the default suite
def test_three_lever_branch_points_are_certified_fixed_points_that_newton_keeps() -> None:
    """At alpha = 0.25 the uniform branch splits at lambda = 3 along a 20-dimensional kernel (the game's
    symmetries); every crossing found on the new branches is a certified fixed point, and multistart's
    Newton, started near each of them, returns to the same point (the two methods agree on it)."""
    tree = enumerate_histories(get_game("three-lever"))
    coords = LogitCoordinates(tree)
    cont = continuation(coords, 0.25)
    assert cont.bifurcations and cont.bifurcations[0]["lambda"] == pytest.approx(3.0, abs=1e-6)
    assert len(cont.points) > 3
    ys = np.array(cont.points)
    warm = ys + np.random.default_rng(0).normal(0.0, 1e-3, size=ys.shape)
    fs = solve_fixed_points(
        tree, 0.25, SolverConfig(n_starts=0, optimum_start=False, damped_steps=0), warm_starts=warm
    )
    for y in cont.points:
        hit = [p for p in fs.points if policy_distance(coords, p.y, y) < 1e-8]
        assert hit and "multistart" in hit[0].method and "continuation" in hit[0].method
        assert hit[0].residual < 1e-10 and hit[0].certified


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_random_games_continuation_points_are_found_by_multistart(seed: int) -> None:
    game = random_game(
        np.random.default_rng(seed),
        n_agents=2,
        n_states=2,
        n_actions=2,
        n_observations=2,
        horizon=2,
        reward_kind="float",
    )
    tree = enumerate_histories(game)
    coords = LogitCoordinates(tree)
    for alpha in (1.0, 0.3):
        cont = continuation(coords, alpha)
        multi = solve_fixed_points(tree, alpha, SolverConfig(continuation=False, n_starts=64))
        assert cont.points, "the principal branch crosses every lambda"
        for y in cont.points:
            assert min(policy_distance(coords, y, p.y) for p in multi.points) < 1e-8


GAMBIT_CASES = [
    pytest.param("dectiger", 2, id="dectiger-H2"),
    pytest.param("dectiger", 3, id="dectiger-H3", marks=pytest.mark.slow),  # Gambit: 5-20 s
    pytest.param("three-lever", None, id="three-lever"),
    pytest.param("handshake", None, id="handshake"),
]


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("name, horizon", GAMBIT_CASES)
def test_gambit_principal_branch_is_our_branch_zero(name: str, horizon, alpha: float) -> None:
    """Gambit traces its logit QRE from lambda = 0 along the principal branch: where that branch does not
    bifurcate before lambda = 1 / alpha, its QRE is our branch 0's first crossing."""
    pytest.importorskip("pygambit", reason="pygambit==17.0.0b2 (requirements-dev.txt) is the oracle")
    from ..gambit_oracle import gambit_qre_policy

    if name not in GAMES and name != "dectiger":
        pytest.skip(f"{name} is not a built-in game")
    tree = enumerate_histories(get_game(name, **({"horizon": horizon} if horizon else {})))
    coords = LogitCoordinates(tree)
    cont = continuation(coords, alpha)
    # a branch point at lambda* itself (handshake at alpha 0.5: lambda = 2) counts as "first": it is located to
    # solver precision on either side of lambda*, and Gambit's point there is accurate only to the square root
    # of its tolerance (the curve is singular). Only a kernel of odd dimension turns the orientation (the sign of
    # det [H_z; t]) that Gambit's tracer keeps, and so can turn it onto an arm; across an even one (three-lever's
    # 20-dimensional kernel at lambda = 3) it goes straight on along the principal branch, and is compared
    if any(
        b["branch"] == 0 and b["lambda"] < (1 + 1e-6) / alpha and b["kernel_dim"] % 2 == 1
        for b in cont.bifurcations
    ):
        pytest.skip("the principal branch bifurcates first (or at lambda*): Gambit then picks one arm")
    first = cont.points[cont.point_branch.index(0)]
    qre = gambit_qre_policy(tree, alpha)
    dist = max(float(np.abs(a - b).max()) for a, b in zip(coords.to_policy(first), qre))
    assert dist < 1e-6
    # the principal branch alone (no test functions, one branch: what the Gambit benchmark times) crosses
    # lambda* at the same point first
    alone = continuation(coords, alpha, ContinuationConfig(max_branches=1, locate_branch_points=False))
    assert len(alone.branches) == 1 and not alone.bifurcations
    dist = max(float(np.abs(a - b).max()) for a, b in zip(coords.to_policy(alone.points[0]), qre))
    assert dist < 1e-6


def test_located_bifurcation_lies_in_the_sweeps_proven_interval(toy) -> None:
    """The alpha sweep brackets the toy game's bifurcation between grid points, with a proof (both lists
    certified complete); continuation locates it to solver precision inside that bracket."""
    from ers_exact.solve.sweep import sweep

    res = sweep(toy, [0.25, 0.35, 0.45, 0.55, 0.65], SolverConfig(continuation=False))
    proven = [b for b in res.bifurcations if b["proven"]]
    assert len(proven) == 1
    lo, hi = proven[0]["between"]
    located = continuation(LogitCoordinates(toy), 0.3).bifurcations[0]["alpha"]
    assert lo < located < hi


def _scaled(game, c: float):
    return enumerate_histories(dataclasses.replace(game, reward=game.reward * c))


@pytest.mark.parametrize("c", [1e-3, 1e4])
def test_toy_continuation_is_the_same_in_any_reward_units(toy, c: float) -> None:
    """Rewards x c at alpha x c have the same fixed points (M depends on Q / alpha): the trace finds the same
    crossings and reports the pitchfork at lambda = 2 / c, its branches' origins and ends in the game's lambdas
    (its step rules ran in the game's units before: at c = 1e4 one step passed lambda_stop)."""
    ref = continuation(LogitCoordinates(toy), 0.3)
    tree = _scaled(toy.game, c)
    res = continuation(LogitCoordinates(tree), 0.3 * c)
    assert res.alpha == pytest.approx(0.3 * c)
    assert same_sets(LogitCoordinates(toy), list(res.points), list(ref.points))
    assert [b["lambda"] for b in res.bifurcations] == pytest.approx([2.0 / c], rel=1e-7)
    assert [b["alpha"] for b in res.bifurcations] == pytest.approx([0.5 * c], rel=1e-7)
    assert [b.origin_lambda for b in res.branches] == pytest.approx(
        [b.origin_lambda / c for b in ref.branches]
    )
    assert [b.end for b in res.branches] == [
        b.end.replace(f"{1.1 / 0.3 + 0.05:.6g}", f"{(1.1 / 0.3 + 0.05) / c:.6g}") for b in ref.branches
    ]


@pytest.mark.parametrize("c", [1e-3, 1e4])
def test_three_lever_solve_is_the_same_in_any_reward_units(c: float) -> None:
    """The whole solve at 0.25 (127 points: 103 from multistart, 23 more from continuation's branches) with
    rewards x c at alpha x c: the same points, J x c, the same optimal set (``optimal_tol`` is relative to the
    reward spread)."""
    game = get_game("three-lever")
    ref = solve_fixed_points(enumerate_histories(game), 0.25)
    res = solve_fixed_points(_scaled(game, c), 0.25 * c)
    assert len(res.points) == len(ref.points) > 100
    assert [p.J for p in res.points] == pytest.approx([p.J * c for p in ref.points], rel=1e-9)
    assert [p.optimal for p in res.points] == [p.optimal for p in ref.points]
    assert sorted(p.method for p in res.points) == sorted(p.method for p in ref.points)
