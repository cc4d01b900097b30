"""Pi*_alpha proven complete (:mod:`ers_exact.solve.optimal_set`): the probability-space enclosures hold every
sampled value, the simplex-aware bound equals a linear program's optimum, the certified optimal set of
random small games equals the one an exhaustive grid + Newton search finds, and ``complete: true`` is never
reported while a planted twin optimum is missing from the list."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from ers_exact.cli import main
from ers_exact.games import get_game
from ers_exact.model.game import Game, make_game
from ers_exact.model.histories import enumerate_histories
from ers_exact.solve.boltzmann import LogitCoordinates, logit_bound
from ers_exact.solve.box_enclosure import BoxEnclosure, greedy_max, weighted_mean_max
from ers_exact.solve.config import NewtonSettings, OptimalSetConfig, SolverConfig
from ers_exact.solve.fixed_points import solve_fixed_points
from ers_exact.solve.interval_array import IArray
from ers_exact.solve.newton import dedup, newton
from ers_exact.solve.optimal_set import certified_optimal_set
from tests.exact.reference import policy_fn_from_arrays, ref_expected_return
from tests.exact.strategies import random_game
from tests.exact.three_lever import ref_boltzmann_residual, three_lever_optimum

FAST = OptimalSetConfig(max_seconds=20.0, progress=False)
SOLVER = SolverConfig(n_starts=16, complete_search=False, progress=False)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5))
def test_greedy_bound_is_the_linear_program_optimum(seed: int, n: int) -> None:
    """max sum p v over lo <= p <= hi, sum p = 1 (scipy's linprog as the reference)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(n))
    lo = p * rng.random(n) * (rng.random(n) < 0.7)
    hi = np.minimum(1.0, p + rng.random(n) * (rng.random(n) < 0.7))
    v = rng.normal(size=n) * 10.0 ** rng.integers(-2, 3)
    ref = -linprog(-v, A_eq=np.ones((1, n)), b_eq=[1.0], bounds=list(zip(lo, hi))).fun
    got = float(greedy_max(v, lo, hi))
    assert ref - 1e-9 * (1 + abs(ref)) <= got <= ref + 1e-7 * (1 + np.abs(v).max())


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 6))
def test_weighted_mean_bound_is_the_vertex_optimum(seed: int, n: int) -> None:
    """max sum W x / sum W over lo <= W <= hi (a linear-fractional program: its optimum is at a vertex, all
    2^n enumerated here); padded entries (mask false) must not count."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) * 10.0 ** rng.integers(-2, 3)
    lo = rng.random(n) * (rng.random(n) < 0.7)
    hi = lo + rng.random(n) * 10.0 ** rng.integers(-3, 2)
    corners = np.array(np.meshgrid(*[[a, b] for a, b in zip(lo, hi)], indexing="ij")).reshape(n, -1).T
    den = corners.sum(axis=1)
    ref = np.max(np.where(den > 0, corners @ x / np.where(den > 0, den, 1), -np.inf))
    pad = np.r_[x, 1e9][:, None], np.r_[lo, 5.0][:, None], np.r_[hi, 6.0][:, None]
    got = float(weighted_mean_max(*pad, np.r_[np.ones(n, bool), False][:, None])[0])
    assert ref <= got <= ref + 1e-7 * (1 + np.abs(x).max())


@pytest.mark.parametrize("held", [True, False])
@pytest.mark.parametrize("name", ["toy-coordination", "dectiger", "three-lever"])
def test_enclosures_hold_sampled_values(name: str, held: bool) -> None:
    """M(y) and J(pi(y)) at points of random boxes (wide and narrow, corners included) lie in the enclosures,
    with and without the held-agent stage bound (``held=False``: what the search's later contraction rounds
    use on games with more than ``held_orders`` fill orders)."""
    tree = enumerate_histories(get_game(name))
    coords = LogitCoordinates(tree)
    enc = BoxEnclosure(coords)
    rng = np.random.default_rng(1)
    P, D, alpha = 32, coords.dim, 0.5
    c = rng.normal(size=(P, D)) * 4
    w = rng.exponential(size=(P, D)) * rng.choice([1e-3, 1.0, 20.0], size=(P, 1))
    lo, hi = c - w, c + w
    mlo, mhi, jlo, jhi = enc(lo, hi, alpha, held=held)
    for y in [lo, hi, *(lo + rng.random((P, D)) * (hi - lo) for _ in range(8))]:
        ev = coords.evaluate(y, alpha, jacobian=False)
        assert np.all((mlo <= ev.values) & (ev.values <= mhi))
        assert np.all((jlo <= ev.J) & (jhi >= ev.J))
    assert np.all(np.isfinite(mhi)) and np.all(np.isfinite(jhi))  # useful even on the widest boxes


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_agents=st.sampled_from([2, 3]),
    width=st.sampled_from([1e-3, 1.0, 8.0]),
    legal=st.booleans(),
    discount=st.sampled_from([1.0, 0.9]),
)
def test_enclosures_hold_on_random_two_stage_games(
    seed: int, n_agents: int, width: float, legal: bool, discount: float
) -> None:
    """Soundness of every bound in BoxEnclosure (per-node, belief-weighted gaps, the decentralised stage bound
    with vertex enumeration or one agent held) on random H = 2 games with 2-3 actions and observations, two or
    three agents, illegal actions and discounting: M(y) and J(pi(y)) at the corners and inside random boxes."""
    rng = np.random.default_rng(seed)
    game = random_game(
        rng,
        n_agents=n_agents,
        n_states=2,
        n_actions=[int(a) for a in rng.integers(2, 4, size=n_agents)],
        n_observations=[int(o) for o in rng.integers(1, 3, size=n_agents)],
        horizon=2,
        discount=discount,
        reward_kind="float",
        legal=legal,
    )
    coords = LogitCoordinates(enumerate_histories(game))
    assume(coords.dim > 0)
    _assert_enclosures_hold(coords, BoxEnclosure(coords), rng, width)


def _assert_enclosures_hold(
    coords: LogitCoordinates, enc: BoxEnclosure, rng: np.random.Generator, width: float
) -> None:
    """M(y) and J(pi(y)) at the corners and inside 8 random boxes of logit widths ~``width`` lie in ``enc``'s
    enclosures, up to the float evaluation's own rounding (1e-12 relative)."""
    P, D, alpha = 8, coords.dim, 0.5
    c = rng.normal(size=(P, D)) * 3
    w = rng.exponential(size=(P, D)) * width
    lo, hi = c - w, c + w
    mlo, mhi, jlo, jhi = enc(lo, hi, alpha)
    corners = [np.where(rng.random((P, D)) < 0.5, lo, hi) for _ in range(16)]
    for y in [lo, hi, *corners, *(lo + rng.random((P, D)) * (hi - lo) for _ in range(8))]:
        ev = coords.evaluate(y, alpha, jacobian=False)
        tol = 1e-12 * (1 + np.abs(ev.J))  # the float evaluation's own rounding
        mtol = 1e-12 * (1 + np.abs(ev.values))
        assert np.all((mlo <= ev.values + mtol) & (ev.values - mtol <= mhi))
        assert np.all((jlo <= ev.J + tol) & (jhi >= ev.J - tol))


@pytest.mark.parametrize("name", ["toy-coordination", "two-lever", "dectiger"])
def test_value_bound_is_tight_over_the_whole_domain(name: str) -> None:
    """Over the whole domain |y| <= B / alpha the decentralised bound of J (stage_bound: one-step delayed
    sharing, the stage games solved by vertex enumeration) equals the best corner's J on these H = 2 games."""
    tree = enumerate_histories(get_game(name))
    coords = LogitCoordinates(tree)
    B = logit_bound(tree, 1.0)
    y = np.random.default_rng(0).choice([-B, B], size=(20_000, coords.dim))
    best = float(coords.evaluate(y, 1.0, jacobian=False).J.max())
    _, _, _, jhi = BoxEnclosure(coords)(np.full((1, coords.dim), -B), np.full((1, coords.dim), B), 1.0)
    assert best <= jhi[0] <= best + 1e-6 * (1 + abs(best))


@pytest.mark.parametrize(
    ("name", "alpha", "n_optimal"),
    [
        pytest.param("handshake", 0.25, 2, id="handshake-0.25"),  # the two conventions, twins under the swap
        pytest.param("handshake", 1.0, 1, id="handshake-1"),  # one fixed point: uniform play (J = 1/2)
        pytest.param("toy-coordination", 1.0, 1, id="toy-1"),
        pytest.param("two-lever", 1.0, 1, id="two-lever-1"),
        pytest.param("dectiger", 1.0, 1, id="dectiger-1"),  # listen twice, opening with small probability
        pytest.param("dectiger", 0.25, 1, id="dectiger-0.25"),  # J = -4 - 3e-9 (the deterministic -4)
    ],
)
def test_builtin_games_proven_complete(name: str, alpha: float, n_optimal: int) -> None:
    tree = enumerate_histories(get_game(name))
    result = certified_optimal_set(tree, alpha, FAST, solver=SOLVER)
    assert result.complete, result.note
    assert len(result.optimal_points) == n_optimal
    found = solve_fixed_points(tree, alpha, SOLVER)
    assert result.J_star_lo - 1e-9 <= found.J_star <= result.J_star_hi + 1e-9
    for p in result.optimal_points:
        assert p.residual < 1e-9 and p.J_lo <= p.J <= p.J_hi


def test_handshake_uniform_point_is_pinned() -> None:
    """At alpha = 1 the handshake game's only fixed point is uniform play, J = (match + mismatch) / 2."""
    result = certified_optimal_set(enumerate_histories(get_game("handshake")), 1.0, FAST, solver=SOLVER)
    (point,) = result.points
    assert np.allclose(point.policy[0], 0.5) and abs(point.J - 0.5) < 1e-12


def _grid_newton_optimal_set(tree, alpha: float, per_axis: int) -> list[tuple[float, np.ndarray]]:  # type: ignore[no-untyped-def]
    """The reference: Newton from every point of a grid over |y| <= B / alpha (exhaustive for D <= 4)."""
    coords = LogitCoordinates(tree)
    B = logit_bound(tree, alpha)
    axes = [np.concatenate([np.linspace(-B, B, per_axis), np.linspace(-3, 3, per_axis)])] * coords.dim
    starts = np.array(np.meshgrid(*axes)).reshape(coords.dim, -1).T
    y, res = newton(coords, starts, alpha, NewtonSettings(steps=80, tol=1e-12), B)
    ok = np.isfinite(res) & (res < 1e-10)
    pts = [yk for yk, _ in dedup(coords, y[ok], res[ok], 1e-6)]
    J = coords.evaluate(np.array(pts), alpha, jacobian=False).J
    best = J.max()
    return [(float(j), p) for j, p in zip(J, pts) if j >= best - 1e-6]


@pytest.mark.slow
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_actions=st.sampled_from([(2, 2), (2, 3)]),
    alpha=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
)
def test_certified_set_equals_grid_newton_search(seed: int, n_actions: tuple[int, int], alpha: float) -> None:
    """Random one-step games (D <= 3): the certified optimal set is the grid + Newton search's."""
    assume(_compare_with_grid(seed, n_actions, alpha))  # a singular (bifurcating) point cannot be certified


@pytest.mark.parametrize(("seed", "alpha"), [(0, 0.1), (7, 0.25)])
def test_certified_set_equals_grid_newton_search_fixed(seed: int, alpha: float) -> None:
    """The cheap sibling of the Hypothesis test above: two fixed games, each proven complete."""
    assert _compare_with_grid(seed, (2, 2), alpha)


def _compare_with_grid(seed: int, n_actions: tuple[int, int], alpha: float) -> bool:
    game = random_game(
        np.random.default_rng(seed),
        n_states=2,
        n_actions=n_actions,
        n_observations=1,
        horizon=1,
        reward_kind="float",
    )
    tree = enumerate_histories(game)
    result = certified_optimal_set(tree, alpha, FAST, solver=SOLVER)
    if not result.complete:
        return False
    ref = _grid_newton_optimal_set(tree, alpha, 9)
    coords = LogitCoordinates(tree)
    got = result.optimal_points
    assert len(got) == len(ref)
    for j, y in ref:
        hits = [p for p in got if np.all(p.box_lo <= y + 1e-7) and np.all(y - 1e-7 <= p.box_hi)]
        assert len(hits) == 1 and abs(hits[0].J - j) < 1e-8
    assert coords.dim == sum(a - 1 for a in n_actions)
    return True


def _twin_game(rng: np.random.Generator, n: int) -> tuple[Game, np.ndarray]:
    """A one-step common-payoff game whose payoffs are invariant under the cyclic action shift a -> a + 1 of
    both agents (a planted symmetry): every optimal point has twins there."""
    base = rng.uniform(-1, 1, size=(n, n)) + 2 * np.eye(n) * rng.uniform(0.5, 1.5)
    R = np.mean([np.roll(np.roll(base, k, axis=0), k, axis=1) for k in range(n)], axis=0)
    game = make_game(
        name="twins",
        states=["s"],
        actions=[[f"a{k}" for k in range(n)]] * 2,
        observations=[["o"]] * 2,
        transition=np.ones((1, n * n, 1)),
        observation=np.ones((n * n, 1, 1)),
        reward=R.reshape(1, n * n, 1),
        initial_belief=np.ones(1),
        horizon=1,
    )
    return game, R


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([2, 3]), alpha=st.sampled_from([0.05, 0.1, 0.2]))
def test_complete_is_never_reported_without_a_planted_twin(seed: int, n: int, alpha: float) -> None:
    """The solver's list is cut to one optimal point; its twins (the planted shift of it) are optimal fixed
    points too, so a complete answer must have found them itself."""
    check_twin(seed, n, alpha)


def test_planted_twin_is_found_by_the_search() -> None:
    """The cheap sibling: one game, proven complete, its missing twin found by the branch-and-bound."""
    assert check_twin(3, 2, 0.1)


def check_twin(seed: int, n: int, alpha: float, config: OptimalSetConfig = FAST) -> bool:
    """The planted-twin check (also run with worker processes, ``test_optimal_set_pool.py``): True where the
    search proved the set complete and had to find the twin itself."""
    game, _ = _twin_game(np.random.default_rng(seed), n)
    tree = enumerate_histories(game)
    full = solve_fixed_points(tree, alpha, SOLVER)
    best = full.optimal_points[0]
    cut = dataclasses.replace(full, points=(best,))
    result = certified_optimal_set(tree, alpha, config, candidates=cut)
    twin = [np.roll(p[0], 1, axis=-1) for p in best.policy]  # phi(pi): shift every agent's actions
    twin_is_new = np.abs(twin[0] - best.policy[0][0]).max() > 1e-6
    if result.complete:
        pols = [np.concatenate([q.ravel() for q in p.policy]) for p in result.optimal_points]
        flat_twin = np.concatenate([t.ravel() for t in twin])
        assert any(np.abs(p - flat_twin).max() < 1e-6 for p in pols)
        if twin_is_new:
            assert len(result.optimal_points) >= 2
            assert any(p.found_by == "search" for p in result.optimal_points)
    return result.complete and twin_is_new


def test_cli_optimal_set_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimal-set", "handshake", "--alpha", "0.25", "--json", "--starts", "8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["complete"] is True and out["n_optimal"] == 2
    assert out["J_star"][0] <= out["J_star"][1] and all(p["certified"] for p in out["points"])


def test_budget_stop_reports_what_is_left() -> None:
    """A search stopped by its box budget says so and counts the boxes it left, never claiming completeness."""
    tree = enumerate_histories(get_game("dectiger"))
    cfg = dataclasses.replace(FAST, max_boxes=4)  # dectiger H=2 is proven in ~37 boxes
    result = certified_optimal_set(tree, 0.25, cfg, solver=SOLVER)
    assert not result.complete
    assert result.boxes_left > 0 and 0 < result.volume_left <= 1
    assert result.log10_volume_left == pytest.approx(np.log10(result.volume_left), abs=1e-12)
    assert "NOT proven complete" in result.note


def test_a_share_below_float64_is_reported_by_its_logarithm() -> None:
    """toy-coordination at alpha 1e-4 stopped after 8 boxes leaves boxes far out in the saturated logits: their
    share underflows (volume_left 0.0, and the note said "volume share 0" while boxes were left);
    log10_volume_left keeps it, and the note prints it as a power of ten. (The search is complete after ~13
    boxes since the relative reach weights of the interval evaluator; before, it never was.)"""
    tree = enumerate_histories(get_game("toy-coordination"))
    cfg = dataclasses.replace(FAST, max_boxes=8)
    result = certified_optimal_set(tree, 1e-4, cfg, solver=SOLVER)
    assert not result.complete and result.boxes_left > 0 and result.volume_left == 0.0
    assert -1e6 < result.log10_volume_left < -300
    assert f"volume share 10^{result.log10_volume_left:.1f}" in result.note
    assert result.to_json()["log10_volume_left"] == result.log10_volume_left


def test_log_logistic_width_against_arbitrary_precision() -> None:
    """log(sigma(hi) - sigma(lo)) without the difference's cancellation, against mpmath at 800 digits (the saturated side mirrored), on
    intervals at every scale: saturated (both ends beyond 40), straddling 0 at widths down to 1e-300, wide."""
    import mpmath as mp

    from ers_exact.solve.optimal_set_result import log_logistic_width

    rng = np.random.default_rng(0)
    ends = [np.sort(rng.uniform(-c, c, 2)) for c in (1, 10, 100, 700, 1e4) for _ in range(40)]
    ends += [np.array([c, c + w]) for c in (-200.0, -50.0, 50.0, 700.0) for w in (1e-9, 1.0, 30.0)]
    ends += [np.array([-w, w]) for w in (1e-300, 1e-100, 1e-8, 3.0)]
    with mp.workdps(800):
        for lo, hi in ends:
            sig = lambda x: 1 / (1 + mp.exp(-mp.mpf(x)))  # noqa: E731
            # sigma(hi) - sigma(lo) = sigma(-lo) - sigma(-hi): both near 1 would need ~hi / 2.3 digits
            exact = mp.log(sig(-lo) - sig(-hi) if lo > 0 else sig(hi) - sig(lo))
            got = float(log_logistic_width(np.array(lo), np.array(hi)))
            assert got == pytest.approx(float(exact), rel=1e-12, abs=1e-12), (lo, hi)
    assert log_logistic_width(np.array(3.0), np.array(3.0)) == -np.inf  # no width


def test_the_hand_derived_three_lever_optimum_is_a_reference_fixed_point() -> None:
    """The second method behind the next test's J*: the policy solved by brentq in tests/exact/three_lever.py
    (lever f with probability p, convention c on the path with probability x, uniform elsewhere) is a fixed
    point of the Boltzmann map written from reference.py, and reference.py's J of it is the closed form J."""
    tree = enumerate_histories(get_game("three-lever"))
    opt = three_lever_optimum(0.25)
    assert 0.9 < opt.x < opt.p < 1.0
    for first, convention in [(0, 0), (2, 1)]:
        policy = [
            np.array([opt.policy(first, convention, i, h.as_tuple(k)) for k in range(len(h))])
            for i, h in enumerate(tree.local)
        ]
        assert ref_boltzmann_residual(tree, policy, 0.25) < 1e-14
        assert abs(ref_expected_return(tree.game, policy_fn_from_arrays(tree, policy)) - opt.J) < 1e-13


def test_search_finds_the_optimum_the_candidates_miss() -> None:
    """three-lever at alpha 0.25: the optimum plays uniformly at every history off its path (an unstable
    point, J* = 1.8992923499) and multistart misses it; the branch-and-bound's Newton from its most promising
    boxes finds it, certified, with its 9 images (3 first levers x 3 second-round conventions). J* and the
    points are checked against the hand-derived optimum (tests/exact/three_lever.py: two scalar fixed-point
    equations solved by brentq) and reference.py's J and Boltzmann map, not against the solver's own numbers."""
    tree = enumerate_histories(get_game("three-lever"))
    opt = three_lever_optimum(0.25)  # J = 1.89929234990957 (brentq)
    found = solve_fixed_points(tree, 0.25, SOLVER)
    assert found.J_star < opt.J - 1e-3
    # bounded by boxes, not by time: under 20 s the closed blocks alone could use the budget on a loaded
    # machine, and the search then never ran (it hung in the listing of images before that had a deadline)
    cfg = dataclasses.replace(FAST, max_boxes=2000, max_seconds=3600.0)
    result = certified_optimal_set(tree, 0.25, cfg, candidates=found)
    assert abs(result.J_star_lo - opt.J) < 1e-9
    assert result.J_star_lo - 1e-12 <= opt.J <= result.J_star_hi + 1e-12
    assert "search" in {p.found_by for p in result.optimal_points}
    assert all(p.J_lo <= p.J <= p.J_hi and abs(p.J - opt.J) < 1e-8 for p in result.optimal_points)
    images = set()
    for point in result.optimal_points:
        first = int(np.argmax(point.policy[0][0]))
        convention = int(np.argmax(point.policy[0][tree.local[0].index[(first, first)]]))
        images.add((first, convention))
        for i, h in enumerate(tree.local):
            want = np.array([opt.policy(first, convention, i, h.as_tuple(k)) for k in range(len(h))])
            np.testing.assert_allclose(point.policy[i], want, rtol=0, atol=1e-9)
        assert abs(ref_expected_return(tree.game, policy_fn_from_arrays(tree, point.policy)) - opt.J) < 1e-9
        assert ref_boltzmann_residual(tree, point.policy, 0.25) < 1e-9
    assert len(images) == 9


def test_listing_images_and_closed_blocks_stop_at_their_deadline() -> None:
    """Regression: the listing of the roots' images had no time limit (on a loaded machine, three-lever at
    alpha 0.25 with --max-seconds 20 listed 19,682 images of one root, ~25 ms of certificate each), and the
    closed blocks ran past max_seconds. Past the deadline every image left counts as unmapped (the set is then
    not proven complete) and unfinished blocks are left to the search."""
    from ers_exact.solve.closed_blocks import closed_blocks, closed_components
    from ers_exact.solve.local_symmetry import local_domain
    from ers_exact.solve.optimal_set_roots import Roots, certify_candidates, map_roots

    tree = enumerate_histories(get_game("three-lever"))
    coords, alpha = LogitCoordinates(tree), 0.25
    enc, roots = BoxEnclosure(coords), Roots()
    found = solve_fixed_points(tree, alpha, SOLVER)
    ys = np.array([p.y for p in found.points])
    assert certify_candidates(coords, enc, ys, alpha, FAST, roots) == len(ys)
    before = len(roots.lo)
    map_roots(coords, enc, None, alpha, FAST, roots, local_domain(tree), deadline=0.0)
    assert len(roots.lo) == before and roots.unmapped >= 1  # nothing certified, the cut orbit reported
    assert closed_components(tree)  # three-lever has closed blocks: None below is the deadline's doing
    assert closed_blocks(coords, enc, alpha, logit_bound(tree, alpha), deadline=0.0) is None


def test_interval_jacobian_holds_on_a_wide_box_of_large_logits() -> None:
    """Regression (found by the planted-twin test, seed 708): the log-sum-exp of a wide box of logits ~46 had a
    sum whose rounding margin reached below 0; its log was NaN and the NaN upper bounds were dropped by later
    min / max, so DM's enclosure missed the true values (14 against an upper bound of 6e-15) and a Krawczyk
    contraction lost an optimal fixed point. The sum now keeps its largest term as lower bound and log maps a
    lower end <= 0 to -inf."""
    game, _ = _twin_game(np.random.default_rng(708), 3)
    coords = LogitCoordinates(enumerate_histories(game))
    lo = np.array([10.015052, 10.489388, -11.391902, 31.395044])
    hi = np.array([34.795157, 46.648364, 35.412203, 35.54114])
    m, dm = coords.derivatives.enclose(lo, hi, 0.05, jacobian=True)
    assert dm is not None
    pts = lo + np.random.default_rng(0).random((500, 4)) * (hi - lo)
    ev = coords.evaluate(np.concatenate([pts, [[30.0, 30.0, 0.0, 35.0]]]), 0.05, jacobian=True)
    assert ev.jacobian is not None
    assert np.all(ev.jacobian >= dm.lo.transpose(2, 0, 1) - 1e-12)
    assert np.all(ev.jacobian <= dm.hi.transpose(2, 0, 1) + 1e-12)
    assert np.all((ev.values + 1e-12 >= m.lo.T) & (ev.values - 1e-12 <= m.hi.T))
    check_twin(708, 3, 0.05)  # complete or not, never without the twin (asserted inside)


def test_interval_log_of_a_nonpositive_lower_end_is_minus_inf() -> None:
    x = IArray(np.array([-1e-17, 0.0, 2.0]), np.array([1.0, 1.0, 3.0])).log()
    assert np.all(np.isneginf(x.lo[:2])) and not np.any(np.isnan(x.hi)) and x.lo[2] <= np.log(2.0)


@pytest.mark.parametrize("held_orders", [0, 24, 120])
def test_later_rounds_hold_the_agent_only_where_it_is_cheap(
    held_orders: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OptimalSetConfig.held_orders``: the contraction rounds after the exact ones use the held-agent stage
    bound only where every held agent has at most that many fill orders (here 5 actions: 80), and the
    proven set is the same either way (a random two-agent game with 5 and 2 actions)."""
    rng = np.random.default_rng(3)
    game = random_game(rng, n_actions=[5, 2], n_observations=[1, 2], horizon=2, reward_kind="float")
    calls: list[tuple[bool, bool]] = []
    call = BoxEnclosure.__call__

    def spy(self, lo, hi, alpha, exact=True, held=True):  # type: ignore[no-untyped-def]
        calls.append((exact, held))
        return call(self, lo, hi, alpha, exact, held)

    monkeypatch.setattr(BoxEnclosure, "__call__", spy)
    cfg = dataclasses.replace(FAST, held_orders=held_orders)
    res = certified_optimal_set(enumerate_histories(game), 0.5, cfg, SOLVER)
    assert res.complete and len(res.optimal_points) >= 1
    later = [held for exact, held in calls if not exact]
    assert later, "no contraction round after the exact one ran"
    assert all(later) if held_orders >= 120 else not any(later)
    monkeypatch.setattr(BoxEnclosure, "__call__", call)
    ref = certified_optimal_set(
        enumerate_histories(game), 0.5, dataclasses.replace(FAST, held_orders=120), SOLVER
    )
    assert np.isclose(res.J_star_lo, ref.J_star_lo, atol=1e-9)
    assert len(res.optimal_points) == len(ref.optimal_points)


def test_held_orders_must_be_a_nonnegative_integer() -> None:
    with pytest.raises(ValueError, match="held_orders"):
        OptimalSetConfig(held_orders=-1)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.sampled_from([1e-3, 1.0, 8.0]))
def test_enclosures_hold_with_five_actions(seed: int, width: float) -> None:
    """The held-agent stage bound with 5 actions (80 fill orders, ``stage_bound.fill_orders``) and the exact
    stage games: M(y) and J(pi(y)) at corners and inside random boxes of a random 5 x 2-action game."""
    rng = np.random.default_rng(seed)
    game = random_game(rng, n_actions=[5, 2], n_observations=[1, 2], horizon=2, reward_kind="float")
    coords = LogitCoordinates(enumerate_histories(game))
    enc = BoxEnclosure(coords)
    assert enc.held.orders == 80
    _assert_enclosures_hold(coords, enc, rng, width)
